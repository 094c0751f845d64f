"""What the MCP face hears of the registry's terminals, for what no request tells it.

The MCP face is a client of a registry server like any other (docs/mcp.md).  How a
command ends, or that it waits for input, it asks for (``terminal/wait``); what it
keeps from the notifications every client hears is what a progress message and the
choice of a cwd need: each terminal's latest ``Terminal`` (its live cwd), the command
each is running and since when, and the tail of its recent output.
"""

from __future__ import annotations

import re
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import methods
from .client import RegistryClient

__all__ = ["RunStart", "RunTracker", "last_line"]

#: Starts remembered (by run id), for the command line and start of a run being waited on.
_STARTS_KEPT = 1024
#: Raw output kept per terminal for progress messages.
_TAIL_CHARS = 2048


@dataclass(frozen=True)
class RunStart:
    run_id: int
    command: str
    at: float


class RunTracker:
    """Follows every terminal of the server through its notifications."""

    def __init__(self, client: RegistryClient) -> None:
        #: terminal id -> its latest ``Terminal`` (wire form), ``closed`` once closed.
        self.terminals: dict[int, dict[str, Any]] = {}
        #: terminal id -> the run in progress there.
        self.running: dict[int, RunStart] = {}
        self._starts: OrderedDict[int, RunStart] = OrderedDict()
        self._tails: dict[int, str] = {}
        # Callbacks run as each message is read, so everything the server sent before
        # an answer is known here before the code awaiting that answer resumes.
        for method in methods.NOTIFICATIONS:
            client.on(method, self._receiver(method))

    def _receiver(self, method: str) -> Callable[[Any], None]:
        return lambda params: self._handle(method, params)

    def note_start(self, run_id: int, terminal_id: int, command: str, at: float) -> None:
        """A run of ours started at ``at`` (earlier than its didStartRun arrives)."""
        start = RunStart(run_id, command, at)
        self._remember(run_id, start)
        self.running[terminal_id] = start

    def start_of(self, run_id: int) -> RunStart | None:
        return self._starts.get(run_id)

    def last_line(self, terminal_id: int) -> str:
        return last_line(self._tails.get(terminal_id, ""))

    # -- notifications ----------------------------------------------------------------

    def _handle(self, method: str, params: Any) -> None:
        if not isinstance(params, dict):
            return
        if method in (methods.DID_OPEN, methods.DID_CHANGE):
            self.terminals[params["id"]] = params
        elif method == methods.DID_WRITE:
            if params.get("runId") is not None:
                terminal_id = params["terminalId"]
                tail = self._tails.get(terminal_id, "") + params["data"]
                self._tails[terminal_id] = tail[-_TAIL_CHARS:]
        elif method == methods.DID_START_RUN:
            terminal_id = params["terminalId"]
            start = self._starts.get(params["runId"])
            if start is None:
                start = RunStart(params["runId"], params["commandLine"], time.monotonic())
                self._remember(start.run_id, start)
            self.running[terminal_id] = start
            self._tails.pop(terminal_id, None)
        elif method == methods.DID_END_RUN:
            current = self.running.get(params["terminalId"])
            if current is not None and current.run_id == params["runId"]:
                del self.running[params["terminalId"]]
        elif method == methods.DID_CLOSE:
            terminal_id = params["terminalId"]
            self.running.pop(terminal_id, None)
            self._tails.pop(terminal_id, None)
            info = self.terminals.get(terminal_id)
            if info is not None:
                info["closed"] = True

    def _remember(self, run_id: int, start: RunStart) -> None:
        self._starts[run_id] = start
        while len(self._starts) > _STARTS_KEPT:
            self._starts.popitem(last=False)


#: Escape sequences (CSI, OSC, two-byte ESC) and other control characters, for the
#: one-line progress message only -- the output the model reads is cleaned by the server.
_CONTROL = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[@-_]|[\x00-\x08\x0b-\x1f\x7f]"
)


def last_line(raw: str) -> str:
    """The last non-blank line of raw terminal output, as a person would see it."""
    for line in reversed(raw.replace("\r\n", "\n").split("\n")):
        # A carriage return without a newline overwrites the line (progress bars).
        text = _CONTROL.sub("", line.rsplit("\r", 1)[-1]).strip()
        if text:
            return text
    return ""
