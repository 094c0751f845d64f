"""TerminalRun: one command's life in a terminal.

A run owns what one submitted command produced: its raw output (bounded), exit code,
state, timings and the working directory after it.  Terminals create and finish runs;
callers await them.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Generator
from enum import StrEnum
from typing import Any

from .output import BoundedBuffer, KeptOutput
from .processes import boot_clock, signal_name

__all__ = ["RunState", "TerminalRun"]

_run_ids = itertools.count(1)


class RunState(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    TIMED_OUT = "timedOut"
    CANCELLED = "cancelled"
    FAILED = "failed"


class TerminalRun:
    """A command and everything it produced.

    ``exit_code`` is None when it is not known (no integration, a run that never
    started, a shell that died).  Await the run (or :meth:`wait`) for its end.
    """

    def __init__(
        self,
        terminal_id: int,
        command_line: str,
        output_cap: int,
        *,
        typed: bool = False,
        separate_streams: bool = False,
    ) -> None:
        self.id = next(_run_ids)
        self.terminal_id = terminal_id
        self.command_line = command_line
        #: True for a command the user typed into the terminal (``write``), not
        #: submitted through ``run``.
        self.typed = typed
        self.state = RunState.RUNNING
        self.exit_code: int | None = None
        self.cwd: str | None = None
        #: Why the run ended as it did, when that needs saying (fallbacks, failures).
        self.note: str | None = None
        #: The resource limit it hit ("memoryMb", "pids", ...; :mod:`registry.limits`).
        self.limit: str | None = None
        #: The limits it ran under, by name (``{"outputMb": 1024}``).
        self.limits: dict[str, float] = {}
        #: The task the terminal was bound to when the run started: its output is
        #: that task's to be reported (set by the registry).
        self.task_id: str | None = None
        self.started_at = time.time()
        #: The same moment on the clock process start times are kept in.
        self.started_boot = boot_clock()
        self.ended_at: float | None = None
        self._started_mono = time.monotonic()
        self._ended_mono: float | None = None
        self._output = BoundedBuffer(output_cap)
        # Separate streams, for providers that have them (subprocess).
        self._stdout = BoundedBuffer(output_cap) if separate_streams else None
        self._stderr = BoundedBuffer(output_cap) if separate_streams else None
        #: True when the output was rebuilt after the fact (heuristic runs).
        self.output_replaced = False
        loop = asyncio.get_running_loop()
        self._done: asyncio.Future[TerminalRun] = loop.create_future()
        self._started: asyncio.Future[None] = loop.create_future()
        # Resolved when the command starts or the run ends, whichever is first.
        self._start_settled: asyncio.Future[None] = loop.create_future()

    # -- output ------------------------------------------------------------------

    def append(self, data: bytes) -> None:
        self._output.append(data)

    def append_stream(self, stream: str, data: bytes) -> None:
        """Output from one of two separate streams; it also joins the merged output."""
        buffer = self._stdout if stream == "stdout" else self._stderr
        if buffer is not None:
            buffer.append(data)
        self._output.append(data)

    @property
    def stdout(self) -> bytes | None:
        """stdout alone, where the provider keeps it apart (else None)."""
        return self._stdout.getvalue() if self._stdout is not None else None

    @property
    def stderr(self) -> bytes | None:
        """stderr alone, where the provider keeps it apart (else None)."""
        return self._stderr.getvalue() if self._stderr is not None else None

    def replace_output(self, data: bytes) -> None:
        """Set the output after the fact (heuristic runs trim echo and prompt)."""
        self._output.clear()
        self._output.append(data)
        self.output_replaced = True

    @property
    def output(self) -> bytes:
        """Raw output, escape sequences kept; head and tail when it was too long."""
        return self._output.getvalue()

    @property
    def output_bytes(self) -> int:
        """Every byte the command wrote, held or not."""
        return self._output.total

    @property
    def dropped_bytes(self) -> int:
        """Bytes of output no longer held (cut out between head and tail)."""
        return self._output.dropped

    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    def kept_output(self) -> KeptOutput:
        """The output held, as text, and what was dropped between its head and tail."""
        return self._output.kept()

    # -- start -------------------------------------------------------------------

    @property
    def started(self) -> bool:
        """The command is known to have started (its C marker, or its process)."""
        return self._started.done()

    def mark_started(self) -> None:
        if not self._started.done():
            self._started.set_result(None)
        if not self._start_settled.done():
            self._start_settled.set_result(None)

    async def wait_started(self) -> None:
        """Return once the command has started or the run has ended."""
        if not self._start_settled.done():
            await asyncio.shield(self._start_settled)

    def add_done_callback(self, callback: Callable[[], object]) -> None:
        """Call ``callback()`` when the run ends (at once if it has)."""
        self._done.add_done_callback(lambda _: callback())

    # -- result ------------------------------------------------------------------

    @property
    def signal(self) -> str | None:
        """Signal name for exit codes above 128 (130 -> SIGINT, 143 -> SIGTERM)."""
        return signal_name(self.exit_code)

    @property
    def done(self) -> bool:
        return self._done.done()

    @property
    def duration(self) -> float:
        end = self._ended_mono if self._ended_mono is not None else time.monotonic()
        return end - self._started_mono

    def finish(
        self,
        state: RunState,
        *,
        exit_code: int | None = None,
        cwd: str | None = None,
        note: str | None = None,
    ) -> bool:
        """End the run; the first call wins. Returns whether this call ended it."""
        if self._done.done():
            return False
        self.state = state
        if exit_code is not None:
            self.exit_code = exit_code
        if cwd is not None:
            self.cwd = cwd
        if note is not None:
            self.note = note if self.limit is None else f"{self.note}; {note}"
        self.ended_at = time.time()
        self._ended_mono = time.monotonic()
        if not self._start_settled.done():
            self._start_settled.set_result(None)
        self._done.set_result(self)
        return True

    def hit_limit(self, name: str, why: str) -> None:
        """It hit the limit ``name``: it fails, and its note says why (first one wins).

        Also once the run has ended (a limit noticed on its last counters): before
        its end is told to anyone, the terminal's own ``_end_run`` calls this.
        """
        if self.limit is not None:
            return
        self.limit = name
        ended = f"{name} limit hit: {why}; its processes were ended"
        self.note = ended if not self.note else f"{ended}; {self.note}"
        if self.done:
            self.state = RunState.FAILED

    async def wait(self) -> TerminalRun:
        return await asyncio.shield(self._done)

    def __await__(self) -> Generator[Any, None, TerminalRun]:
        return self.wait().__await__()

    def __repr__(self) -> str:
        return (
            f"TerminalRun(id={self.id}, terminal={self.terminal_id}, "
            f"command={self.command_line!r}, state={self.state.value}, "
            f"exit_code={self.exit_code})"
        )
