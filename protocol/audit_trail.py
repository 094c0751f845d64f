"""What the audit log records: one line per command, from the registry's events.

:class:`AuditTrail` listens to the registry like the fan-out does.  When a run
starts it notes where the terminal stood and who asked for it -- the client of the
request that started it, which the ``terminal/run`` handler puts in
:data:`REQUESTER` (a context variable: the run starts inside that handler's task,
so a client's run can never be credited to another; a command typed into the
terminal has none).  When the run ends it appends the line (:mod:`protocol.audit`).
"""

from __future__ import annotations

import contextvars
import logging
from dataclasses import dataclass
from typing import Any

from registry.registry import RegistryListener
from registry.run import TerminalRun
from registry.terminals.base import Terminal

from .audit import AuditFile

__all__ = ["REQUESTER", "AuditTrail", "Requester"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Requester:
    """The client a request came from."""

    pid: int | None
    uid: int | None
    transport: str


#: The client whose request is being handled (set by the ``terminal/run`` handler).
REQUESTER: contextvars.ContextVar[Requester | None] = contextvars.ContextVar(
    "terminal_registry_requester", default=None
)


class AuditTrail(RegistryListener):
    """Appends a line to the audit log for every command that ends."""

    def __init__(self, file: AuditFile) -> None:
        self.file = file
        #: Per running run: (the client who asked, the cwd it started in).
        self._started: dict[int, tuple[Requester | None, str]] = {}

    def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
        self._started[run.id] = (REQUESTER.get(), terminal.cwd)

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        requester, cwd_before = self._started.pop(run.id, (None, terminal.cwd))
        client: dict[str, Any] | None = None
        if requester is not None:
            client = {
                "pid": requester.pid,
                "uid": requester.uid,
                "transport": requester.transport,
            }
        entry = {
            "time": run.started_at,
            "ended": run.ended_at,
            "client": client,
            "typed": run.typed,
            "task": run.task_id,
            "terminal": terminal.id,
            "provider": terminal.provider,
            "runId": run.id,
            "cwdBefore": cwd_before,
            "cwdAfter": run.cwd,
            "command": run.command_line,
            "exitCode": run.exit_code,
            "signal": run.signal,
            "state": run.state.value,
            "durationMs": round(run.duration * 1000),
            "outputBytes": run.output_bytes,
            "limits": run.limits,
            "limit": run.limit,
        }
        try:
            self.file.write(entry)
        except OSError as error:
            # The log is the user's record, not the command's: a full disk must not
            # fail the run, but it is said.
            log.error("audit log %s: cannot write: %s", self.file.path, error)

    def close(self) -> None:
        self.file.close()
