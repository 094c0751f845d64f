"""TerminalEntry: what the registry keeps of one terminal besides the terminal itself.

Which task it is bound to (and whether it was just handed to one), the output its
runs have not handed out yet (:mod:`registry.unread`), whether it is hot
(:mod:`registry.hot`) with the timer that says when it cools down, and the snapshot
of it an environment report is rendered from (:mod:`registry.environment`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from .config import Settings
from .environment import ReportedRun, ReportedTerminal
from .full_output import FullOutputs
from .hot import HotTracker
from .model_text import TextLimits
from .run import TerminalRun
from .terminals.base import Terminal, TerminalListener
from .unread import RunOutputQueue, UnreadRun
from .waiting import TerminalState

__all__ = ["TerminalEntry", "normalise_path"]


def normalise_path(path: str) -> str:
    """A key under which equal directories compare equal.

    Absolute, ``..`` and trailing slashes resolved, symlinks followed; case folded
    only where the file system ignores case (Windows).
    """
    return os.path.normcase(os.path.realpath(os.path.abspath(os.path.expanduser(path))))


class TerminalEntry:
    """What the registry knows of one terminal besides the terminal itself."""

    def __init__(self, terminal: Terminal, task_id: str | None, settings: Settings) -> None:
        self.terminal = terminal
        self.task_id = task_id
        #: Handed to this task and not used yet: other tasks must not take it.
        self.claimed_by: str | None = None
        self.claimed = False
        #: The normalised live cwd it is indexed under.
        self.key = normalise_path(terminal.cwd)
        self.unread = RunOutputQueue(settings.run_output_cap, TextLimits.of(settings))
        #: Files with the whole output of runs whose text for a model was cut.
        self.full_outputs = FullOutputs(settings.full_output_cap)
        terminal.subscribe(_BetweenRuns(self))
        self.hot = HotTracker(settings.hot_timeout, settings.hot_compiling_timeout)
        self.cool_timer: asyncio.TimerHandle | None = None
        #: Said on the next run's note: why this terminal runs it (a fallback, a
        #: terminal handed over from another task).
        self.notes: list[str] = []

    @property
    def cooling(self) -> bool:
        """Busy and hot: a report waits for it to cool down -- unless its command waits
        for input, and so stays quiet for good."""
        terminal = self.terminal
        return terminal.busy and self.hot.is_hot() and not terminal.wait_state.waiting

    def claim(self, task_id: str | None) -> None:
        self.claimed = True
        self.claimed_by = task_id

    def unclaim(self) -> None:
        self.claimed = False
        self.claimed_by = None

    def run_started(self, run: TerminalRun) -> None:
        self.unclaim()  # used now: busy protects it, then it is reusable
        run.task_id = self.task_id
        self.unread.run_started(run)
        self.hot.reset()
        if self.notes:
            run.note = "; ".join([*self.notes, *([run.note] if run.note else [])])
            self.notes.clear()

    def output(self, data: bytes, run: TerminalRun | None, cooled: Callable[[], None]) -> bool:
        """Note output; returns whether it made the terminal hot.  ``cooled()`` is
        called once the terminal has cooled down again (unless it closed)."""
        was_hot = self.hot.is_hot()
        self.hot.feed(data.decode("utf-8", "replace"))
        if run is not None:
            self.unread.output(run, data)
        self._schedule_cooling(cooled)
        return not was_hot

    def between_runs(self, data: bytes) -> None:
        """Output of no command (a background job's): unread, for the task bound now."""
        self.unread.between_runs(data, self.task_id)

    def _schedule_cooling(self, cooled: Callable[[], None]) -> None:
        if self.cool_timer is not None:
            return

        def check() -> None:
            self.cool_timer = None
            if self.terminal.closed:
                return
            if self.hot.is_hot():
                self._schedule_cooling(cooled)
            else:
                cooled()

        # 10 ms past the moment it cools: asyncio runs a timer that is due within one
        # clock resolution, so one set for the exact moment could find the terminal
        # hot still by a hair and set itself again for no time at all.
        delay = self.hot.cools_in() + 0.01
        self.cool_timer = asyncio.get_running_loop().call_later(delay, check)

    def closed(self) -> None:
        if self.cool_timer is not None:
            self.cool_timer.cancel()

    def snapshot(
        self, task_id: str | None = None, *, peek: bool = False
    ) -> ReportedTerminal | None:
        """The terminal for ``task_id``'s report, taking its unread output of that task
        (it counts as retrieved, unless ``peek``); None when it has nothing to report."""
        terminal = self.terminal
        running = terminal.current_run if not terminal.closed else None
        if running is not None and task_id is not None and self.task_id not in (task_id, None):
            running = None  # another task's command now: not this report's
        runs = [_reported(unread) for unread in self.unread.take(task_id, peek=peek)]
        wait = terminal.wait_state if not terminal.closed else None
        if wait is not None and not (wait.waiting or wait.state is TerminalState.STOPPED_JOB):
            wait = None
        if running is None and not runs and wait is None:
            return None
        command_line = running.command_line if running is not None else None
        return ReportedTerminal(
            terminal.id, self.task_id, terminal.cwd, running is not None, command_line, runs, wait
        )


def _reported(unread: UnreadRun) -> ReportedRun:
    return ReportedRun(
        unread.run_id,
        unread.command_line,
        unread.state.value,
        unread.exit_code,
        unread.ended,
        unread.text,
    )


class _BetweenRuns(TerminalListener):
    """Output of no command (a background job's) joins the entry's unread output."""

    def __init__(self, entry: TerminalEntry) -> None:
        self._entry = entry

    def on_idle_output(self, terminal: Terminal, data: bytes) -> None:
        self._entry.between_runs(data)
