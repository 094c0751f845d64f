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
import contextlib
import os
from collections.abc import Mapping
from enum import StrEnum
from typing import Self

import psutil

from ..config import Settings
from ..errors import InvalidCwdError, TerminalBusyError, TerminalClosedError
from ..listeners import Listeners
from ..output import BoundedBuffer
from ..processes import wait_gone
from ..run import RunState, TerminalRun
from .children import NOWHERE, TERMINAL_TAG_VARIABLE, Placement

__all__ = [
    "TERMINAL_TAG_VARIABLE",
    "IntegrationState",
    "Terminal",
    "TerminalListener",
    "existing_directory",
]


def existing_directory(cwd: str) -> str:
    """``cwd`` made absolute, or :class:`InvalidCwdError` saying what is wrong with it."""
    path = os.path.abspath(os.path.expanduser(cwd))
    if not os.path.isdir(path):
        reason = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise InvalidCwdError(cwd, reason)
    return path


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
    ) -> Self:
        """Start a terminal in ``cwd``: what the registry's provider table calls.

        ``placement`` says where its processes go (more environment, a cgroup).

        Raises :class:`InvalidCwdError` for a cwd that is not a directory and
        :class:`SpawnError` when the terminal cannot be started.
        """

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

    # -- commands -----------------------------------------------------------------

    async def run(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> TerminalRun:
        """Run ``command`` and return its run once it has ended."""
        run = await self.start(command, timeout=timeout, env=env)
        return await run.wait()

    @abc.abstractmethod
    async def start(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> TerminalRun:
        """Submit ``command``; return its run as soon as it has started."""

    @abc.abstractmethod
    async def write(self, data: str | bytes) -> None:
        """Raw input to the terminal (answers a prompt, or types at the shell)."""

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
        group = self._placement.cgroup
        if group is None:
            return
        members = group.members()
        if members:
            group.kill()
            await wait_gone(_processes(members), grace)

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

    def _output(self, data: bytes, run: TerminalRun | None) -> None:
        """Output arrived: into the replay buffer, then to the listeners."""
        self._replay.append(data)
        self._listeners.call(lambda listener: listener.on_output(self, data, run))

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


def _processes(pids: set[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    return found
