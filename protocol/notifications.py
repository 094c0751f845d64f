"""Engine events to the wire: what every connected client hears, and how often.

:class:`Fanout` listens to the registry and turns each of its events into the
notification of docs/protocol.md, sent to every initialised connection.  Output is
coalesced (:class:`WriteCoalescer`): at most one ``terminal/didWrite`` per terminal
per 20 ms, nothing dropped, order kept, UTF-8 decoded incrementally so a character
split across reads is never broken.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from registry.output import IncrementalText
from registry.registry import RegistryListener, TerminalRegistry
from registry.run import TerminalRun
from registry.terminals.base import Terminal
from registry.waiting import TerminalState, WaitState

from . import methods
from . import types as wire
from .options import wire_limits

__all__ = [
    "DID_WRITE_INTERVAL",
    "Fanout",
    "Sink",
    "WriteCoalescer",
    "terminal_info",
    "waiting_for",
]

#: didWrite coalescing window: at most one notification per terminal per this long.
DID_WRITE_INTERVAL = 0.02


class Sink(Protocol):
    """A connection, as far as notifications are concerned."""

    def notify(self, method: str, params: Any) -> None: ...


_KINDS = {
    TerminalState.WAITING_FOR_INPUT: "input",
    TerminalState.WAITING_FOR_PASSWORD: "password",
    TerminalState.FULL_SCREEN: "fullScreen",
    TerminalState.STOPPED_JOB: "stoppedJob",
}


def waiting_for(state: WaitState) -> wire.WaitingFor | None:
    """The wire ``waitingFor`` of a wait-state; None when it waits for nobody."""
    kind = _KINDS.get(state.state)
    if kind is None:
        return None
    keys = list(state.keys) if state.keys is not None else None
    return wire.WaitingFor(kind, state.prompt, state.program, state.certainty.value, keys)


def terminal_info(registry: TerminalRegistry, terminal: Terminal) -> wire.TerminalInfo:
    """The wire ``Terminal`` of one of the registry's terminals."""
    entry = registry.entry(terminal.id)
    state = terminal.wait_state
    return wire.TerminalInfo(
        id=terminal.id,
        provider=terminal.provider,
        task_id=entry.task_id,
        cwd=terminal.cwd,
        busy=terminal.busy,
        hot=entry.hot.is_hot(),
        shell_integration=terminal.integration.value,
        shell=terminal.shell,
        pid=terminal.pid,
        last_command=terminal.last_command,
        state=state.state.value,
        waiting_for=waiting_for(state),
        limits=wire_limits(terminal.limits),
        limits_by=terminal.limits_by,
    )


class Fanout(RegistryListener):
    """Registry events -> notifications to every sink."""

    def __init__(self, registry: TerminalRegistry, sinks: Callable[[], Iterable[Sink]]) -> None:
        self._registry = registry
        self._sinks = sinks
        self._writes = WriteCoalescer(self.broadcast)

    def broadcast(self, method: str, params: Any) -> None:
        for sink in list(self._sinks()):
            sink.notify(method, params)

    def flush_writes(self, terminal_id: int) -> None:
        """Send a terminal's gathered didWrite now (before a replay answer)."""
        self._writes.flush(terminal_id)

    def flush_all(self) -> None:
        self._writes.flush_all()

    def _info(self, terminal: Terminal) -> Any:
        return wire.unstructure(terminal_info(self._registry, terminal))

    # -- registry events ------------------------------------------------------------

    def on_open(self, terminal: Terminal) -> None:
        self.broadcast(methods.DID_OPEN, self._info(terminal))

    def on_change(self, terminal: Terminal) -> None:
        if not terminal.closed:
            self.broadcast(methods.DID_CHANGE, self._info(terminal))

    def on_close(self, terminal: Terminal) -> None:
        self._writes.flush(terminal.id, last=True)
        self.broadcast(methods.DID_CLOSE, wire.unstructure(wire.DidCloseParams(terminal.id)))

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        self._writes.add(terminal.id, run.id if run is not None else None, data)

    def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
        # No flush here: output without a run (prompt, echo) may keep gathering; the
        # run's own output starts a new didWrite anyway (its runId differs).
        params = wire.DidStartRunParams(terminal.id, run.id, run.command_line)
        self.broadcast(methods.DID_START_RUN, wire.unstructure(params))

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        self._writes.flush(terminal.id)
        params = wire.DidEndRunParams(
            terminal.id, run.id, run.state.value, run.exit_code, run.limit
        )
        self.broadcast(methods.DID_END_RUN, wire.unstructure(params))


class WriteCoalescer:
    """didWrite at most once per terminal per interval; nothing dropped, order kept."""

    def __init__(
        self, send: Callable[[str, Any], None], interval: float = DID_WRITE_INTERVAL
    ) -> None:
        self._send = send
        self._interval = interval
        self._pending: dict[int, tuple[int | None, bytearray, asyncio.TimerHandle]] = {}
        self._decoders: dict[int, IncrementalText] = {}

    def add(self, terminal_id: int, run_id: int | None, data: bytes) -> None:
        pending = self._pending.get(terminal_id)
        if pending is not None and pending[0] != run_id:
            self.flush(terminal_id)
            pending = None
        if pending is None:
            timer = asyncio.get_running_loop().call_later(self._interval, self.flush, terminal_id)
            self._pending[terminal_id] = (run_id, bytearray(data), timer)
        else:
            pending[1].extend(data)

    def flush(self, terminal_id: int, *, last: bool = False) -> None:
        """Send what is gathered; ``last``: the terminal closed, forget its decoder."""
        pending = self._pending.pop(terminal_id, None)
        decoder = self._decoders.pop(terminal_id, None) if last else None
        if pending is None:
            return
        run_id, data, timer = pending
        timer.cancel()
        if decoder is None:
            decoder = self._decoders.setdefault(terminal_id, IncrementalText())
        text = decoder.decode(bytes(data), final=last)
        if text:
            params = wire.DidWriteParams(terminal_id, text, run_id)
            self._send(methods.DID_WRITE, wire.unstructure(params))

    def flush_all(self) -> None:
        for terminal_id in list(self._pending):
            self.flush(terminal_id)
