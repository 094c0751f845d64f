"""One MCP session's view of the registry: its client, its task, and following commands.

An MCP server over stdio serves one agent session, so this process's
:class:`McpSession` is that session: it holds the registry client, the
:class:`~protocol.mcp_runs.RunTracker`, the session's task id (named after the MCP
client, e.g. ``claude-code-3fa2c1``) and where the task's last command left its shell
(so that a ``cd`` carries over when the model omits ``cwd``).  The tools of
:mod:`protocol.mcp_tools` are thin on top of it; the registry's rules (reuse, cleaning,
ending processes) stay in the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from . import types as wire
from .client import RegistryClient
from .errors import RegistryError, TerminalBusyError, UnknownTerminalError
from .mcp_results import CommandResult, TerminalSummary
from .mcp_runs import RunEnd, RunTracker, signal_name

__all__ = ["Connect", "McpSession", "Progress", "SessionSettings", "explain"]

#: After an interrupt, how long to wait for the command's end (SIGINT, SIGTERM, SIGKILL
#: are a second apart by default).
_INTERRUPT_WAIT = 10.0
#: Progress notifications while a call waits on a command: at most this often.
PROGRESS_INTERVAL = 1.0


@dataclass
class SessionSettings:
    #: The longest a tool call waits on a command before returning its output so far.
    call_timeout: float = 30.0
    #: Where commands run when the model gives no cwd (the directory we were started in).
    cwd: str = field(default_factory=os.getcwd)


#: How a session (re)connects: the face's own choice of server.
Connect = Callable[[], Awaitable[RegistryClient]]
#: ``progress(seconds so far, message)``: an MCP progress notification.
Progress = Callable[[float, str], Awaitable[None]]


class McpSession:
    """The registry as one MCP session sees it."""

    def __init__(self, connect: Connect, client: RegistryClient, settings: SessionSettings) -> None:
        self._connect = connect
        self._connecting = asyncio.Lock()
        self.client = client
        self.settings = settings
        self.tracker = RunTracker(client)
        self._task_id: str | None = None
        #: task -> the terminal its last command ran in.
        self._last_terminal: dict[str, int] = {}
        #: terminal -> the run a tool call is waiting on there (None: whatever runs).
        self._waited: dict[int, int | None] = {}

    async def ready(self) -> None:
        """Connected to a server: after one went away (stopped, or died), the next tool
        call connects again (a background server is started anew as the CLI does)."""
        if self.client.connected:
            return
        async with self._connecting:
            if self.client.connected:
                return
            lost = self.client
            self.client = await self._connect()
            self.tracker = RunTracker(self.client)
            if self._task_id is not None and self.scoped_task() is not None:
                self._task_id = self.scoped_task()
            self._last_terminal.clear()
            self._waited.clear()
            with contextlib.suppress(Exception):
                await lost.close()

    # -- the task ---------------------------------------------------------------------

    def task_id(self, client_name: str | None = None) -> str:
        """This session's task: ``<client name>-<6 hex digits>``, fixed at first use --
        unless we run inside one of the server's terminals, whose task is then ours."""
        if self._task_id is None:
            name = re.sub(r"[^a-z0-9]+", "-", (client_name or "mcp").lower()).strip("-")
            self._task_id = self.scoped_task() or f"{name[:24] or 'mcp'}-{secrets.token_hex(3)}"
        return self._task_id

    def scoped_task(self) -> str | None:
        """The task the server lets this connection act for, when it allows only one: we
        run inside one of its terminals (an agent started in a terminal of the registry)."""
        scope = self.client.capabilities.get("terminalRegistry", {}).get("scope")
        return str(scope["taskId"]) if isinstance(scope, dict) else None

    def default_cwd(self, task: str) -> str:
        """Where the task's last command left its shell; else the start directory."""
        terminal_id = self._last_terminal.get(task)
        info = self.tracker.terminals.get(terminal_id) if terminal_id is not None else None
        if info is not None and not info.get("closed") and info.get("cwd"):
            return str(info["cwd"])
        return self.settings.cwd

    def resolve_cwd(self, cwd: str) -> str:
        """``~`` expanded; a relative path is taken from the start directory."""
        return os.path.normpath(os.path.join(self.settings.cwd, os.path.expanduser(cwd)))

    def summary(self, info: Any, task: str) -> TerminalSummary:
        t = info if isinstance(info, dict) else _wire(info)
        return TerminalSummary(
            id=t["id"],
            task_id=t["taskId"],
            yours=t["taskId"] == task,
            busy=t["busy"],
            cwd=t["cwd"],
            last_command=t["lastCommand"],
            shell=t["shell"],
            provider=t["provider"],
            integration=t["shellIntegration"],
        )

    # -- commands -----------------------------------------------------------------------

    async def start(
        self,
        command: str,
        *,
        task: str,
        cwd: str | None,
        terminal_id: int | None,
        timeout: float | None,
    ) -> tuple[int, int, str | None]:
        """Start ``command`` in the background: (terminal id, run id, note)."""
        if terminal_id is not None and cwd is not None:
            raise ValueError(
                "give terminal_id or cwd, not both: a terminal runs where its shell stands "
                "(cd in the command to move it)"
            )
        if terminal_id is None:
            cwd = self.resolve_cwd(cwd) if cwd is not None else self.default_cwd(task)
        began = time.monotonic()
        started = await self.client.run(
            command,
            terminal_id=terminal_id,
            cwd=cwd,
            task_id=task if terminal_id is None else None,
            timeout=timeout,
            background=True,
        )
        self.tracker.note_start(started.run_id, started.terminal_id, command, began)
        self._last_terminal[task] = started.terminal_id
        return started.terminal_id, started.run_id, started.note

    async def follow(
        self,
        terminal_id: int,
        run_id: int | None,
        wait: float,
        progress: Progress | None = None,
    ) -> RunEnd | None:
        """Wait (at most ``wait`` s) for the run to end; a cancelled wait interrupts it.

        ``progress(elapsed, message)`` is called at once and then every second while
        waiting.  Replaced by ``terminal/wait`` (with ``yieldOnInput``) when "Commands
        that wait" lands.
        """
        reporter = (
            asyncio.ensure_future(self._report(terminal_id, run_id, progress))
            if progress is not None
            else None
        )
        self._waited[terminal_id] = run_id
        try:
            return await self.tracker.wait_end(terminal_id, run_id, wait)
        except anyio.get_cancelled_exc_class():
            # notifications/cancelled, or the client went away: the command this call
            # was waiting on is interrupted (Ctrl-C, then its process tree).
            with anyio.CancelScope(shield=True):
                await self.interrupt(terminal_id, run_id)
            raise
        finally:
            self._waited.pop(terminal_id, None)
            if reporter is not None:
                reporter.cancel()

    async def interrupt(self, terminal_id: int, run_id: int | None) -> RunEnd | None:
        try:
            await self.client.kill(terminal_id)
        except (RegistryError, ConnectionError):
            return None  # it ended, or its terminal closed or its server went, meanwhile
        return await self.tracker.wait_end(terminal_id, run_id, _INTERRUPT_WAIT)

    async def _report(self, terminal_id: int, run_id: int | None, progress: Progress) -> None:
        start = self.tracker.start_of(run_id) if run_id is not None else None
        began = start.at if start is not None else time.monotonic()
        command = start.command if start is not None else "the command"
        while True:
            elapsed = time.monotonic() - began
            line = self.tracker.last_line(terminal_id)
            message = f"{command} · {elapsed:.0f} s" + (f" · {line}" if line else "")
            await progress(elapsed, message)
            await asyncio.sleep(PROGRESS_INTERVAL)

    async def result(
        self, terminal_id: int, run_id: int | None, end: RunEnd | None, *, read: bool = True
    ) -> CommandResult:
        """The command as the model should see it: state, exit code, cwd, new output.

        With ``read`` false the output is left unread (for read_output and
        environment_details later): a background start reports no output.  A given
        run that ended without printing a byte costs no ``terminal/output`` request.
        """
        if end is None and run_id is not None:
            end = self.tracker.end_of(run_id)
        silent = run_id is not None and end is not None and not self.tracker.printed(run_id)
        output = ""
        if read and not silent:
            # A closed terminal whose last output was already taken is unknown now.
            with contextlib.suppress(UnknownTerminalError):
                output = await self.client.output(terminal_id)
        info = self.tracker.terminals.get(terminal_id)
        if info is None:
            try:
                info = _wire(await self.client.get(terminal_id))
            except UnknownTerminalError:
                info = {}
        if run_id is None:
            current = self.tracker.running.get(terminal_id)
            run_id = current.run_id if current is not None else end.run_id if end else None
        start = self.tracker.start_of(run_id) if run_id is not None else None
        command = start.command if start is not None else info.get("lastCommand")
        note = None
        if end is not None:
            state = end.state
            exit_code = end.exit_code
            duration = end.at - start.at if start is not None else None
        elif info.get("closed"):
            state, exit_code, duration = "failed", None, None
            note = "the terminal closed while the command ran"
        elif info.get("busy") or run_id is not None:
            state, exit_code = "running", None
            duration = time.monotonic() - start.at if start is not None else None
        else:
            state, exit_code, duration = "idle", None, None
        result = CommandResult(
            terminal_id=terminal_id,
            run_id=run_id,
            command=command,
            state=state,
            exit_code=exit_code,
            signal=signal_name(exit_code),
            cwd=info.get("cwd"),
            duration_seconds=round(duration, 3) if duration is not None else None,
            output=output,
            note=note,
            task_id=info.get("taskId"),
        )
        if state == "running":
            result.next_step = running_hint(terminal_id, self.settings.call_timeout)
        return result

    # -- ending ----------------------------------------------------------------------------

    async def stop(self, *, release: bool) -> None:
        """Interrupt the commands tool calls are waiting on, then :meth:`close`: what
        cancelling those calls would do, for when they cannot be cancelled."""
        for terminal_id, run_id in list(self._waited.items()):
            await self.interrupt(terminal_id, run_id)
        await self.close(release=release)

    async def close(self, *, release: bool) -> None:
        """Release the session's task (its terminals live on for the next session) --
        unless it is the task of the terminal we run in, which is not ours to end."""
        if release and self._task_id is not None and self.scoped_task() is None:
            with contextlib.suppress(RegistryError, ConnectionError, RuntimeError):
                await self.client.release(self._task_id)
        await self.client.close()


def running_hint(terminal_id: int, call_timeout: float) -> str:
    return (
        f"The command keeps running. Call wait_for_command with terminal_id {terminal_id} "
        f"to wait for it (up to {call_timeout:g} s per call); read_output shows new output; "
        "if it waits for input, answer with write_input (or send_keys for keys such as q "
        "or C-c); kill_command stops it."
    )


def explain(error: RegistryError) -> str:
    """A registry error as a sentence for the model, with what to do about it."""
    message = error.message
    if isinstance(error, TerminalBusyError):
        return (
            f"{message}: wait for it with wait_for_command, stop it with kill_command, or "
            "run without terminal_id to get an idle terminal"
        )
    if isinstance(error, UnknownTerminalError):
        return f"{message}: list_terminals shows the terminals that exist"
    return message


def _wire(info: Any) -> dict[str, Any]:
    data: dict[str, Any] = wire.unstructure(info)
    return data
