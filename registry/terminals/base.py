"""Terminal: what every provider offers, and how observers hear about it.

A terminal runs one command at a time, knows its live working directory, and keeps
its recent raw output for mirrors.  Providers (``shell``: a PTY; ``subprocess``: a
child per command) implement the abstract methods; observers (the registry, the
protocol layer) subscribe a :class:`TerminalListener`.

A run that is ended on purpose (timed out, cancelled, its terminal closed) ends in
the state it was ended for, whatever its own end then says: the provider records
the reason with :meth:`Terminal._end_as` and reads it back through
:meth:`Terminal._ending_or` when the run finishes.
"""

from __future__ import annotations

import abc
import asyncio
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Self

from ..config import Settings
from ..errors import TerminalBusyError, TerminalClosedError
from ..keys import key_bytes
from ..limits import NO_LIMITS, Limits, RunLimits, enforcement, kill_joined_since
from ..listeners import Listeners
from ..output import BoundedBuffer
from ..processes import end_cgroup
from ..run import RunState, TerminalRun
from ..waiting import TerminalState, WaitState
from .children import NOWHERE, TERMINAL_TAG_VARIABLE, Placement
from .paths import existing_directory, normalise_path

__all__ = [
    "TERMINAL_TAG_VARIABLE",
    "IntegrationState",
    "Terminal",
    "TerminalListener",
    "existing_directory",
    "normalise_path",
]


class IntegrationState(StrEnum):
    PENDING = "pending"
    RICH = "rich"
    NONE = "none"


class TerminalListener:
    """Receives a terminal's events. Override what you need; all default to no-ops.

    Called synchronously from the terminal's read path: keep them quick, and never
    let them raise (a raising listener is logged and skipped).
    """

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        """Raw output (escape sequences kept, markers removed) as it arrives."""

    def on_idle_output(self, terminal: Terminal, data: bytes) -> None:
        """Output of no command, between runs: a background job's, a job notice.
        (It reached :meth:`on_output` too; prompts and typed echo are not this.)"""

    def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
        """A command started (including one typed into the terminal)."""

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        """A command ended, whatever its state."""

    def on_change(self, terminal: Terminal) -> None:
        """cwd, busy, integration state or another reported field changed."""

    def on_close(self, terminal: Terminal) -> None:
        """The terminal closed (closed by us, or its shell died)."""


class Terminal(abc.ABC):
    """One terminal of any provider."""

    provider: str = ""

    def __init__(self, terminal_id: int, cwd: str, replay_cap: int) -> None:
        self.id = terminal_id
        self._cwd = cwd
        self._closed = False
        #: Where its processes go; its cgroup ends whatever escaped everything else.
        self._placement: Placement = NOWHERE
        self._listeners: Listeners[TerminalListener] = Listeners()
        self._replay = BoundedBuffer(replay_cap, head_share=0.0)
        self.current_run: TerminalRun | None = None
        self.last_run: TerminalRun | None = None
        #: Why the current run is being ended on purpose, once someone asked.
        self._ending_state: RunState | None = None
        self._closed_event = asyncio.Event()
        #: Its own limits: every command it runs gets them unless the run sets its own.
        self.limits: Limits = NO_LIMITS
        self._run_limits: RunLimits | None = None
        self._limits_by: dict[str, str] | None = None
        self._limit_tasks: set[asyncio.Task[None]] = set()
        self._located: tuple[str, tuple[str, str]] | None = None

    @classmethod
    @abc.abstractmethod
    async def create(
        cls,
        terminal_id: int,
        cwd: str,
        settings: Settings | None = None,
        *,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        placement: Placement = NOWHERE,
        target: str | None = None,
    ) -> Self:
        """Start a terminal in ``cwd``: what the registry's provider table calls.

        ``placement`` says where its processes go (more environment, a cgroup);
        ``target`` is where a remote provider runs it (an ssh destination, a
        container), and local providers take none.

        Raises :class:`InvalidCwdError` for a cwd that is not a directory and
        :class:`SpawnError` when the terminal cannot be started.
        """

    # -- where it runs (remote providers override; see terminals/remote.py) -------

    @classmethod
    async def locate(cls, cwd: str, target: str | None, settings: Settings) -> tuple[str, str]:
        """The registry's key for terminals of this provider standing in ``cwd`` on
        ``target``: (target key, path key).  Checks ``cwd`` where it will be used:
        here, on this machine (:class:`InvalidCwdError`)."""
        if target:
            raise ValueError(f"the {cls.provider} provider runs on this machine: no host")
        return ("", normalise_path(existing_directory(cwd)))

    def location(self) -> tuple[str, str]:
        """Where its live cwd is, keyed as :meth:`locate` keys it."""
        # Asked on every change of the terminal (twice a run); resolving symlinks
        # each time was a twentieth of a `true`'s round trip, so once per cwd.
        if self._located is None or self._located[0] != self._cwd:
            self._located = (self._cwd, ("", normalise_path(self._cwd)))
        return self._located[1]

    @property
    def target(self) -> str | None:
        """Where it runs, as it was asked for; None: on this machine."""
        return None

    @property
    def host(self) -> str | None:
        """The ssh provider: ``user@host`` (``:port`` when not 22)."""
        return None

    @property
    def container(self) -> str | None:
        """The container provider: the container's name or id."""
        return None

    @property
    def display_cwd(self) -> str:
        """The live cwd for people and models: ``ssh://user@host/path`` when remote."""
        return self._cwd

    @property
    def reap_command(self) -> list[str] | None:
        """What ends, from here, what it left where no signal of ours reaches (a
        host, a container), should the server die (:mod:`registry.ownership`)."""
        return None

    @property
    def lost(self) -> str | None:
        """Why it closed when that was its connection (``connection to HOST lost``)."""
        return None

    # -- identity and state -------------------------------------------------------

    @property
    def cwd(self) -> str:
        """The live working directory, as the shell last reported it."""
        return self._cwd

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def busy(self) -> bool:
        """True from the moment a run is submitted until it ends."""
        return self.current_run is not None

    @property
    def wait_state(self) -> WaitState:
        """What it is doing: ``running`` or ``idle`` here; a terminal that can see its
        programs (a shell in a PTY) also tells waiting for input, a password or a key
        in a full-screen program, and a stopped job (:mod:`registry.waiting`)."""
        return WaitState(TerminalState.RUNNING if self.busy else TerminalState.IDLE)

    def waiting_now(self) -> WaitState | None:
        """The command waits for input, and a look made since our last write says so;
        None otherwise (and always where it cannot be told)."""
        return None

    async def until_waiting(self) -> WaitState:
        """Return once :meth:`waiting_now` has a state; cancel to stop waiting.

        Where it cannot be told, never returns: the run's end is what to await."""
        never: asyncio.Future[WaitState] = asyncio.get_running_loop().create_future()
        return await never

    @property
    def last_command(self) -> str | None:
        run = self.current_run or self.last_run
        return run.command_line if run else None

    @property
    @abc.abstractmethod
    def tag(self) -> str:
        """The value of :data:`TERMINAL_TAG_VARIABLE` every process it starts carries."""

    @property
    def scratch(self) -> str | None:
        """Its private directory of temporary files, if it has one (removed at close)."""
        return None

    @property
    @abc.abstractmethod
    def shell(self) -> str:
        """The shell (or interpreter) commands run in."""

    @property
    @abc.abstractmethod
    def pid(self) -> int | None:
        """The long-lived process behind the terminal, if there is one."""

    @property
    @abc.abstractmethod
    def integration(self) -> IntegrationState: ...

    @property
    def limits_by(self) -> dict[str, str]:
        """How each limit is enforced here: "cgroup", "rlimit", "server" or "none"."""
        if self._limits_by is None:  # its placement never changes: looked up once
            self._limits_by = enforcement(self._placement.cgroup)
        return dict(self._limits_by)

    # -- commands -----------------------------------------------------------------

    async def run(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        *,
        limits: Limits | None = None,
    ) -> TerminalRun:
        """Run ``command`` and return its run once it has ended."""
        run = await self.start(command, timeout=timeout, env=env, limits=limits)
        return await run.wait()

    @abc.abstractmethod
    async def start(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        *,
        limits: Limits | None = None,
    ) -> TerminalRun:
        """Submit ``command``; return its run as soon as it has started.

        ``limits`` are the run's own, over the terminal's (:attr:`limits`).
        """

    @abc.abstractmethod
    async def write(self, data: str | bytes) -> None:
        """Raw input to the terminal (answers a prompt, or types at the shell)."""

    async def send_keys(self, keys: Sequence[str]) -> None:
        """Named keys (``["Escape", ":q!", "Enter"]``, ``["C-c"]``: :mod:`registry.keys`)
        as input; an unknown key raises before anything is sent."""
        await self.write(key_bytes(keys))

    @abc.abstractmethod
    def resize(self, cols: int, rows: int) -> None: ...

    @abc.abstractmethod
    async def kill(self) -> None:
        """End the running command's process tree; the terminal lives on."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End the terminal and every process it started."""

    async def _end_group(self, grace: float) -> None:
        """End what is left in the terminal's cgroup (a process that cleared its
        environment and left its session), and wait until it is gone."""
        await end_cgroup(self._placement.cgroup, grace)

    def _check_can_start(self) -> None:
        """A new command needs an open terminal with nothing running in it."""
        if self._closed:
            raise TerminalClosedError(f"terminal {self.id} is closed")
        if self.busy:
            raise TerminalBusyError(f"terminal {self.id} is running a command")

    async def wait_closed(self) -> None:
        await self._closed_event.wait()

    def replay(self, max_bytes: int | None = None) -> bytes:
        """The most recent raw output, for a mirror to repaint from."""
        if max_bytes is None:
            return self._replay.getvalue()
        return self._replay.tail(max_bytes)

    # -- observers ----------------------------------------------------------------

    def subscribe(self, listener: TerminalListener) -> None:
        self._listeners.add(listener)

    def unsubscribe(self, listener: TerminalListener) -> None:
        self._listeners.remove(listener)

    def _output(self, data: bytes, run: TerminalRun | None, *, idle: bool = False) -> None:
        """Output arrived: into the replay buffer, then to the listeners; ``idle``: it
        is no command's (between runs)."""
        self._replay.append(data)
        if run is not None and self._run_limits is not None and run is self.current_run:
            self._run_limits.output(len(data))
        self._listeners.call(lambda listener: listener.on_output(self, data, run))
        if idle:
            self._listeners.call(lambda listener: listener.on_idle_output(self, data))

    def _changed(self) -> None:
        self._listeners.call(lambda listener: listener.on_change(self))

    def _set_cwd(self, cwd: str) -> None:
        if cwd and cwd != self._cwd:
            self._cwd = cwd
            self._changed()

    def _begin_run(self, run: TerminalRun) -> None:
        self.current_run = run
        self._listeners.call(lambda listener: listener.on_run_start(self, run))
        self._changed()

    def _end_run(self, run: TerminalRun) -> None:
        if self.current_run is run and self._run_limits is not None:
            # A limit hit at the very end (the OOM killer ended the command) is
            # noticed here, before anyone hears how the run ended.
            guard, self._run_limits = self._run_limits, None
            guard.finish(run.exit_code)
        if self.current_run is run:
            self.current_run = None
            self._ending_state = None
        self.last_run = run
        self._listeners.call(lambda listener: listener.on_run_end(self, run))
        self._changed()

    def _mark_closed(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._closed_event.set()
        self._listeners.call(lambda listener: listener.on_close(self))

    # -- limits -------------------------------------------------------------------

    def set_limits(self, limits: Limits) -> None:
        """Its own limits from now on; the cgroup's memory and pids limits follow at
        once (so they bound typed commands too), unless a run has its own in force."""
        self.limits = limits
        group = self._placement.cgroup
        if group is not None and self._run_limits is None:
            standing = limits.effective()
            group.set_limits(
                memory_bytes=standing.memory_mb * 2**20 if standing.memory_mb else None,
                pids=standing.pids,
            )

    def _watch_limits(
        self, run: TerminalRun, limits: Limits | None, *, shell_pid: int | None = None
    ) -> RunLimits | None:
        """Apply and watch the run's limits (its own over the terminal's), if any.

        Providers call it as the run begins; ``shell_pid``: a shell whose next
        child is the command takes the rlimits the cgroup cannot enforce.
        """
        effective = (limits or NO_LIMITS).over(self.limits).effective()
        if effective == NO_LIMITS:
            return None
        guard = RunLimits(
            effective,
            self._placement.cgroup,
            lambda name, why: self._limit_breached(run, name, why),
            standing=self.limits,
            shell_pid=shell_pid,
            how=self.limits_by,
        )
        self._run_limits = guard
        run.limits = effective.set()
        guard.start()
        return guard

    def _limit_breached(self, run: TerminalRun, name: str, why: str) -> None:
        run.hit_limit(name, why)
        if self.current_run is not run:
            return
        if run.done:
            # Noticed only by the last look as the run ends (the command gave up at
            # the limit and exited, or a busy loop delayed the poll): what it left
            # running in the group still goes, the terminal's own process kept.
            own = self.pid
            self._kill_run_group(run, set() if own is None else {own})
            return
        self._end_as(RunState.FAILED)
        task = asyncio.ensure_future(self._end_for_limit(run))
        self._limit_tasks.add(task)
        task.add_done_callback(self._limit_tasks.discard)

    async def _end_for_limit(self, run: TerminalRun) -> None:
        """End the run's processes at once (SIGKILL): it broke a limit."""
        await self.kill()

    def _kill_run_group(self, run: TerminalRun, keep: set[int]) -> set[int]:
        """SIGKILL what joined the terminal's cgroup since ``run`` started, but ``keep``."""
        return kill_joined_since(self._placement.cgroup, run.started_boot, keep)

    # -- ending runs on purpose ---------------------------------------------------

    def _end_as(self, state: RunState, *, unless_ending: bool = False) -> None:
        """The current run is being ended on purpose: it will end as ``state``.

        The latest reason wins (a cancel during a timeout's interrupt is a cancel),
        except with ``unless_ending``: closing the terminal under a run that is
        already being ended keeps that run's reason.
        """
        if self.current_run is None or (unless_ending and self._ending_state is not None):
            return
        self._ending_state = state

    def _ending_or(self, state: RunState) -> RunState:
        """The state the current run ends in: what it was ended for, else ``state``."""
        return self._ending_state or state
