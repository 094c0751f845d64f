"""When to look: one terminal's wait-state, kept current by events and a slow poll.

:class:`WaitWatcher` owns the timing; the looking is :class:`TerminalProbe`'s and the
verdict :func:`decide`'s.  A terminal (ShellTerminal) owns one watcher and tells it
three things: output arrived (after feeding its :class:`ScreenModel`), we wrote to
the PTY, and a command started or ended (its marker machine).  The watcher calls
``on_change`` with the new :class:`WaitState` whenever the verdict changes.

When it looks, and why:

* ``quiet`` (100 ms) after the later of the last output and our last write: a
  prompt is printed, then the program blocks reading; a look any sooner sees the
  state before the write took effect.  One timer per terminal, re-armed lazily (a
  chunk of output costs a clock read and a comparison, not a timer).
* Again after a "running" verdict, backing off (0.1, 0.2, 0.4, 0.8 s after a
  command starts or we write; from 0.2 s after output): a program that reads
  without printing a prompt (``cat``) may take a moment to block.
* When a rule needs more quiet (a polling loop, a proxy, a busy thread): at the time
  the verdict says.
* While in a waiting state, within ``stale_after`` of new activity even if output
  keeps coming, so an answered prompt turns back into ``running`` promptly.
* A safety poll every ``poll_interval`` (1 s).  For a shell idle at its prompt it
  is one ``tcgetpgrp`` and nothing more -- cost stays flat with many idle
  terminals; when the shell has background jobs it also reads its children (one
  file) to see one stop.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..screen import ScreenModel
from .decide import Certainty, Decision, Rules, TerminalState, decide
from .probe import TerminalProbe
from .sample import Sample

__all__ = ["Check", "WaitState", "WaitWatcher", "WatchSettings"]

log = logging.getLogger(__name__)

_WAITING = frozenset(
    {
        TerminalState.WAITING_FOR_INPUT,
        TerminalState.WAITING_FOR_PASSWORD,
        TerminalState.FULL_SCREEN,
    }
)


@dataclass(frozen=True)
class WaitState:
    """What a terminal is doing, as reported to clients."""

    state: TerminalState
    certainty: Certainty = Certainty.CERTAIN
    #: The program concerned: the one reading the terminal, else the group's leader.
    program: str | None = None
    pid: int | None = None
    #: The cursor row when waiting for input or a password (the question asked);
    #: None otherwise (full screen included: see ``keys``).
    prompt: str | None = None
    #: For full screen: the named keys that leave it (``("q",)``), when known.
    keys: tuple[str, ...] | None = None
    #: Why, in words (for logs and docs; not part of equality).
    reason: str = field(default="", compare=False)
    #: When this state was entered (monotonic clock; not part of equality).
    since: float = field(default=0.0, compare=False)

    @property
    def waiting(self) -> bool:
        """Waiting for input, a password, or a key in a full-screen program."""
        return self.state in _WAITING


@dataclass(frozen=True)
class WatchSettings:
    rules: Rules = field(default_factory=Rules)
    #: The slow safety poll.
    poll_interval: float = 1.0
    #: A waiting state is looked at again this soon after new activity.
    stale_after: float = 0.25
    #: Looks after a "running" verdict, before the safety poll takes over.
    backoff: tuple[float, ...] = (0.1, 0.2, 0.4, 0.8)


@dataclass(frozen=True)
class Check:
    """One look, for observers that measure (tests, the benchmark)."""

    at: float
    quiet: float
    sample: Sample
    decision: Decision
    deep: bool


class _Facts:
    """The screen as the decision sees it: alternate screen only if this group's."""

    def __init__(self, screen: ScreenModel, alternate_screen: bool) -> None:
        self._screen = screen
        self.alternate_screen = alternate_screen

    @property
    def application_keypad(self) -> bool:
        return self._screen.application_keypad

    def prompt_line(self) -> str:
        return self._screen.prompt_line()


class WaitWatcher:
    """Keeps one terminal's :class:`WaitState` current. Create inside the event loop."""

    def __init__(
        self,
        master_fd: int,
        shell_pid: int,
        screen: ScreenModel,
        command_running: Callable[[], bool],
        on_change: Callable[[WaitState], None],
        *,
        settings: WatchSettings | None = None,
        probe: TerminalProbe | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_check: Callable[[Check], None] | None = None,
    ) -> None:
        self._loop = asyncio.get_running_loop()
        self._settings = settings or WatchSettings()
        self._rules = self._settings.rules
        self._probe = probe or TerminalProbe(master_fd, shell_pid)
        self._screen = screen
        self._command_running = command_running
        self._on_change = on_change
        self._on_check = on_check
        self._clock = clock
        now = clock()
        self._state = WaitState(TerminalState.IDLE, since=now)
        self._activity = now
        self._dirty_since: float | None = None
        self._soon: asyncio.TimerHandle | None = None
        self._soon_at = math.inf
        self._backoff = 0
        self._alternate_seen = False
        self._alternate_owner: int | None = None
        self._jobs = False
        self._last_foreground: int | None = None
        #: When a look first found the shell reading while a command runs (see _check).
        self._shell_read_seen: float | None = None
        self._closed = False
        self._poll = self._loop.call_later(self._settings.poll_interval, self._on_poll)
        self._arm(now)

    # -- what the terminal tells us ---------------------------------------------------

    @property
    def state(self) -> WaitState:
        return self._state

    @property
    def probe(self) -> TerminalProbe:
        return self._probe

    def note_output(self) -> None:
        """Output arrived (the screen model has been fed with it)."""
        if self._closed:
            return
        now = self._clock()
        self._activity = now
        if self._dirty_since is None:
            self._dirty_since = now
        # After output the first extra look waits two steps, not one: a loop that
        # prints every 0.2 s then gets one look per print, not two.
        self._backoff = 1
        alternate = self._screen.alternate_screen
        if alternate != self._alternate_seen:
            # Who switched it on: a crashed program's leftover alternate screen must
            # not make the next command look full screen.
            self._alternate_seen = alternate
            self._alternate_owner = self._probe.foreground() if alternate else None
        if self._soon_at > now + self._rules.quiet:
            self._arm(now + self._rules.quiet)

    def note_write(self) -> None:
        """We wrote to the PTY (input, keys, a command line)."""
        if self._closed:
            return
        now = self._clock()
        self._activity = now
        if self._dirty_since is None:
            self._dirty_since = now
        self._backoff = 0
        if self._soon_at > now + self._rules.quiet:
            self._arm(now + self._rules.quiet)

    def note_command(self) -> None:
        """A command started or ended (the marker machine's "command running" changed)."""
        if self._closed:
            return
        now = self._clock()
        running = self._command_running()
        if running and self._state.state is not TerminalState.RUNNING:
            # A command line was submitted: running until a look says otherwise.  A
            # waiting verdict is the last command's, not this one's: were it kept, the
            # same question asked again would never be told (an equal state is news to
            # no one).
            self._set(Decision(TerminalState.RUNNING, reason="a command started"), now)
        elif not running and self._state.state not in (
            TerminalState.IDLE,
            TerminalState.STOPPED_JOB,
        ):
            # The command ended: whatever it waited for is over (a look soon says whether
            # a job is left stopped).
            self._set(Decision(TerminalState.IDLE, reason="the command ended"), now)
        self._backoff = 0
        self._shell_read_seen = None
        # Look as soon as the quiet rule lets a look decide anything (a look any sooner
        # would only re-arm itself: one timer per command instead of three).
        self._arm(max(now, self._activity + self._rules.quiet))

    def check_now(self) -> WaitState:
        """Look now, whatever the timers say; return the (possibly new) state."""
        if not self._closed:
            self._check(self._clock(), None)
        return self._state

    def close(self) -> None:
        self._closed = True
        self._poll.cancel()
        if self._soon is not None:
            self._soon.cancel()
            self._soon = None

    # -- timing -----------------------------------------------------------------------

    def _arm(self, at: float) -> None:
        """Make sure a look happens at ``at`` (an earlier armed one stays)."""
        if self._soon is not None:
            if self._soon_at <= at:
                return
            self._soon.cancel()
        self._soon_at = at
        delay = max(0.0, at - self._clock())
        self._soon = self._loop.call_later(delay, self._on_soon)

    def _on_soon(self) -> None:
        self._soon = None
        self._soon_at = math.inf
        if self._closed:
            return
        now = self._clock()
        quiet = now - self._activity
        if quiet < self._rules.quiet - 0.001:
            stale = (
                self._state.waiting
                and self._dirty_since is not None
                and now - self._dirty_since >= self._settings.stale_after
            )
            if not stale:
                self._arm(self._activity + self._rules.quiet)
                return
        self._check(now, None)

    def _on_poll(self) -> None:
        if self._closed:
            return
        self._poll = self._loop.call_later(self._settings.poll_interval, self._on_poll)
        if self._soon is not None:
            return  # a look is due anyway
        foreground = self._probe.foreground()
        if foreground is None:
            return  # the PTY is gone; the terminal closes us
        if (
            foreground == self._probe.shell_group
            and foreground == self._last_foreground
            and self._state.state is TerminalState.IDLE
            and not self._jobs
            and not self._command_running()
        ):
            return  # idle at its prompt with no jobs: nothing to look at
        self._check(self._clock(), foreground)

    # -- looking ----------------------------------------------------------------------

    def _check(self, now: float, foreground: int | None) -> None:
        probe = self._probe
        fg = probe.foreground() if foreground is None else foreground
        if fg is None:
            return
        self._last_foreground = fg
        self._dirty_since = None
        running = self._command_running()
        deep = not (fg == probe.shell_group and not running)
        if deep:
            sample = probe.sample(fg)
            if sample is None:
                return
        else:
            # The shell is at its prompt: only its jobs can make this not idle.
            sample = Sample(fg, probe.shell_group, None, None, (), probe.jobs())
        self._jobs = bool(sample.jobs)
        quiet = now - self._activity
        decision = self._not_caught_up(now, fg, running)
        if decision is None:
            facts = _Facts(self._screen, self._alternate_seen and self._alternate_owner == fg)
            decision = decide(sample, quiet, facts, running, self._rules)
        if self._on_check is not None:
            self._on_check(Check(now, quiet, sample, decision, deep))
        if decision.state is not None:
            self._set(decision, now)
        if decision.recheck_in is not None:
            self._arm(now + max(decision.recheck_in, 0.005))
        elif decision.state is TerminalState.RUNNING and self._backoff < len(
            self._settings.backoff
        ):
            self._arm(now + self._settings.backoff[self._backoff])
            self._backoff += 1
        elif decision.state is not TerminalState.RUNNING:
            self._backoff = 0

    def _not_caught_up(self, now: float, fg: int, running: bool) -> Decision | None:
        """ "Not yet" while the shell reads with a command running and we may be behind.

        That is the shell's own ``read`` -- or the command has just ended: the shell
        writes D, then reads, and the bytes reach us a moment later (a look landing in
        between, on a loaded machine, called an ended command "waiting for input
        (bash)"). So no verdict while output waits unread in the PTY, and none on the
        first sighting: a second look confirms it.
        """
        if not (running and fg == self._probe.shell_group):
            self._shell_read_seen = None
            return None
        if self._shell_read_seen is None:
            self._shell_read_seen = now
        if self._probe.output_unread():
            return Decision(
                None,
                reason="the shell reads while a command runs, with output unread",
                recheck_in=self._rules.raced_recheck,
            )
        left = self._shell_read_seen + self._rules.raced_recheck - now
        if left > 0:
            return Decision(
                None, reason="the shell reads while a command runs: confirming", recheck_in=left
            )
        return None

    def _set(self, decision: Decision, now: float) -> None:
        assert decision.state is not None
        since = self._state.since if decision.state is self._state.state else now
        new = WaitState(
            decision.state,
            decision.certainty,
            decision.program,
            decision.pid,
            decision.prompt,
            decision.keys,
            decision.reason,
            since,
        )
        if new == self._state:
            return
        quiet_change = new.state is TerminalState.RUNNING and self._state.state is new.state
        self._state = new
        if quiet_change:
            # Which process of a running command leads is kept, not announced.
            return
        try:
            self._on_change(new)
        except Exception:
            log.exception("wait-state listener failed")
