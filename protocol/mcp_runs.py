"""What the MCP face knows about commands, learnt from the registry's notifications.

The MCP face is a client of a registry server like any other (docs/mcp.md).  It starts
every command with ``terminal/run`` in the background, so that what the command prints
stays "not yet retrieved" until a tool hands it to the model -- also when the model's
session ends first, the next session's ``environment_details`` reports it -- and follows
the command through the notifications every client hears: :class:`RunTracker` keeps,
per terminal, the latest ``Terminal`` state, the run in progress, the last ends and the
tail of recent output (for progress messages).

:meth:`RunTracker.wait_end` stands in for ``terminal/wait`` of "Commands that wait"
(issue 8), which has not landed: that request will also return at a wait for input,
and with a whole ``RunResult``.
"""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import methods
from .client import RegistryClient

__all__ = ["RunEnd", "RunTracker", "last_line", "signal_name"]

#: Ends remembered (by run id), so a wait that starts after the end still finds it.
_ENDS_KEPT = 4096
#: Raw output kept per terminal for progress messages.
_TAIL_CHARS = 2048


@dataclass(frozen=True)
class RunEnd:
    """How a run ended, as ``terminal/didEndRun`` said, and when we heard it."""

    run_id: int
    terminal_id: int
    state: str
    exit_code: int | None
    at: float


@dataclass
class RunStart:
    run_id: int
    command: str
    at: float


_FOLLOWED = (
    methods.DID_OPEN,
    methods.DID_CHANGE,
    methods.DID_CLOSE,
    methods.DID_START_RUN,
    methods.DID_WRITE,
    methods.DID_END_RUN,
)


class RunTracker:
    """Follows every terminal of the server through its notifications."""

    def __init__(self, client: RegistryClient) -> None:
        self.terminals: dict[int, dict[str, Any]] = {}
        self.running: dict[int, RunStart] = {}
        self.last_end: dict[int, RunEnd] = {}
        self._starts: OrderedDict[int, RunStart] = OrderedDict()
        self._ends: OrderedDict[int, RunEnd] = OrderedDict()
        self._tails: dict[int, str] = {}
        #: Runs that printed something (didWrite with their runId).
        self._printed: OrderedDict[int, bool] = OrderedDict()
        self._waiters: dict[int, list[asyncio.Future[RunEnd | None]]] = {}
        # Callbacks run as each message is read, so everything the server sent before
        # an answer is known here before the code awaiting that answer resumes.
        for method in _FOLLOWED:
            client.on(method, self._receiver(method))

    def _receiver(self, method: str) -> Callable[[Any], None]:
        return lambda params: self._handle(method, params)

    # -- what we know ---------------------------------------------------------------

    def note_start(self, run_id: int, terminal_id: int, command: str, at: float) -> None:
        """A run of ours started at ``at`` (earlier than its didStartRun arrives)."""
        start = RunStart(run_id, command, at)
        self._remember(self._starts, run_id, start)
        if run_id not in self._ends:
            self.running[terminal_id] = start

    def start_of(self, run_id: int) -> RunStart | None:
        return self._starts.get(run_id)

    def end_of(self, run_id: int) -> RunEnd | None:
        return self._ends.get(run_id)

    def last_line(self, terminal_id: int) -> str:
        return last_line(self._tails.get(terminal_id, ""))

    def printed(self, run_id: int) -> bool:
        """Whether the run printed anything.  Once it has ended this is final: the
        server sends all of a run's output before its didEndRun."""
        return run_id in self._printed

    # -- waiting --------------------------------------------------------------------

    async def wait_end(self, terminal_id: int, run_id: int | None, timeout: float) -> RunEnd | None:
        """The end of run ``run_id`` (None: of whatever runs in the terminal now).

        Returns None when ``timeout`` passes first (the command goes on) or when the
        terminal closes without a word about the run.  Stands in for
        ``terminal/wait`` until "Commands that wait" lands.
        """
        if run_id is not None and (end := self._ends.get(run_id)) is not None:
            return end
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            future: asyncio.Future[RunEnd | None] = loop.create_future()
            self._waiters.setdefault(terminal_id, []).append(future)
            try:
                end = await asyncio.wait_for(future, remaining)
            except TimeoutError:
                return None
            finally:
                waiters = self._waiters.get(terminal_id)
                if waiters is not None and future in waiters:
                    waiters.remove(future)
            if end is None or run_id is None or end.run_id == run_id:
                return end

    # -- notifications ----------------------------------------------------------------

    def _handle(self, method: str, params: Any) -> None:
        if not isinstance(params, dict):
            return
        if method in (methods.DID_OPEN, methods.DID_CHANGE):
            self.terminals[params["id"]] = params
        elif method == methods.DID_WRITE:
            if params.get("runId") is not None:
                if params["runId"] not in self._printed:
                    self._remember(self._printed, params["runId"], True)
                terminal_id = params["terminalId"]
                tail = self._tails.get(terminal_id, "") + params["data"]
                self._tails[terminal_id] = tail[-_TAIL_CHARS:]
        elif method == methods.DID_START_RUN:
            terminal_id = params["terminalId"]
            start = self._starts.get(params["runId"])
            if start is None:
                start = RunStart(params["runId"], params["commandLine"], time.monotonic())
                self._remember(self._starts, start.run_id, start)
            self.running[terminal_id] = start
            self._tails.pop(terminal_id, None)
        elif method == methods.DID_END_RUN:
            end = RunEnd(
                params["runId"],
                params["terminalId"],
                params["state"],
                params.get("exitCode"),
                time.monotonic(),
            )
            self._remember(self._ends, end.run_id, end)
            self.last_end[end.terminal_id] = end
            current = self.running.get(end.terminal_id)
            if current is not None and current.run_id == end.run_id:
                del self.running[end.terminal_id]
            self._wake(end.terminal_id, end)
        elif method == methods.DID_CLOSE:
            terminal_id = params["terminalId"]
            self.running.pop(terminal_id, None)
            self._tails.pop(terminal_id, None)
            info = self.terminals.get(terminal_id)
            if info is not None:
                info["closed"] = True
            self._wake(terminal_id, None)

    def _wake(self, terminal_id: int, end: RunEnd | None) -> None:
        for waiter in self._waiters.pop(terminal_id, []):
            if not waiter.done():
                waiter.set_result(end)

    @staticmethod
    def _remember(table: OrderedDict[int, Any], key: int, value: Any) -> None:
        table[key] = value
        while len(table) > _ENDS_KEPT:
            table.popitem(last=False)


# -- small pure helpers -------------------------------------------------------------------


def signal_name(exit_code: int | None) -> str | None:
    """``SIGINT`` for 130: the shell's 128+N convention, as ``RunResult.signal``."""
    if exit_code is None or not 128 < exit_code <= 128 + 64:
        return None
    try:
        return signal.Signals(exit_code - 128).name
    except ValueError:
        return None


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
