"""Awaiting a run: until it ends, until its terminal waits for someone, or for a while.

What ``terminal/run`` with ``yieldOnInput`` and ``terminal/wait`` do.  The run's end
and the terminal's next *fresh* waiting state (one a look made after our last write
confirmed: :meth:`~registry.terminals.base.Terminal.until_waiting`) are awaited
together; whichever comes first answers.  So the answer loop -- run, the command
asks, write the answer, wait -- never resolves on the question just answered, and
never misses the next one.

:class:`RunBook` keeps the registry's recent runs by id, so a run can be awaited by
its id after its terminal has moved on to another.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from .run import TerminalRun
from .terminals.base import Terminal
from .waiting import WaitState

__all__ = ["RunBook", "follow"]

#: Runs remembered by id (the oldest are forgotten first).
KEPT = 1024


class RunBook:
    """The most recent runs, by id."""

    def __init__(self, kept: int = KEPT) -> None:
        self._kept = kept
        self._runs: dict[int, TerminalRun] = {}

    def add(self, run: TerminalRun) -> None:
        self._runs[run.id] = run
        while len(self._runs) > self._kept:
            del self._runs[next(iter(self._runs))]

    def get(self, run_id: int) -> TerminalRun | None:
        return self._runs.get(run_id)

    def find(self, run_id: int | None, terminal: Terminal | None) -> TerminalRun:
        """The run ``run_id``, else ``terminal``'s current run, else its last one;
        ValueError saying which is missing."""
        if run_id is not None:
            run = self._runs.get(run_id)
            if run is None:
                raise ValueError(f"unknown run {run_id} (or one too old to be remembered)")
            return run
        if terminal is None:
            raise ValueError("give a runId or a terminalId")
        run = terminal.current_run or terminal.last_run
        if run is None:
            raise ValueError(f"terminal {terminal.id} has run nothing to wait for")
        return run


async def follow(
    run: TerminalRun,
    terminal: Terminal | None,
    *,
    timeout: float | None = None,
    yield_on_input: bool = False,
) -> WaitState | None:
    """Wait until ``run`` ends, or (``yield_on_input``) ``terminal`` waits for input,
    or ``timeout`` seconds have passed.  Returns the waiting state it yielded on,
    else None (the run ended, or time ran out: ``run.done`` says which)."""
    if run.done:
        return None
    if yield_on_input and terminal is not None:
        waiting = terminal.waiting_now()
        if waiting is not None:
            return waiting
    if timeout is None and not (yield_on_input and terminal is not None and not terminal.closed):
        # Only the end to wait for (the common call): awaited directly, without the
        # task and the asyncio.wait below -- two turns of the loop per command
        # (bench_server). Shielded inside run.wait(): a cancel ends the waiting only.
        await run.wait()
        return None
    ended: asyncio.Future[object] = asyncio.ensure_future(run.wait())
    asked: asyncio.Future[WaitState] | None = None
    pending: set[asyncio.Future[Any]] = {ended}
    if yield_on_input and terminal is not None and not terminal.closed:
        asked = asyncio.ensure_future(terminal.until_waiting())
        pending.add(asked)
    try:
        done, _ = await asyncio.wait(pending, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for future in pending:
            future.cancel()
        for future in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await future
    if run.done or asked is None or asked not in done:
        return None
    return asked.result()
