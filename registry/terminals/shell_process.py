"""The shell as a process: stopping its commands, and ending it and all it started.

:class:`ShellProcess` is the :class:`~registry.terminals.phases.PhaseMachine` on an
:class:`~registry.terminals.pty.AsyncPty`: what the shell's markers say, plus what
we do to the shell's processes (:class:`~registry.terminals.shell.ShellTerminal`
adds starting it and submitting commands):

* a command that does not start: the processes say whether it runs unmarked or the
  line editor swallowed it;
* stopping a command: SIGINT to the PTY's foreground job (Ctrl-C when the shell
  runs it itself), then SIGTERM to that job's processes, then the shell is given up
  on and the terminal closed; then what the command left behind (the rest of its
  process groups, what joined the terminal's cgroup since it started);
* closing: SIGHUP to the shell, its tree and every process carrying the terminal's
  tag, then SIGTERM, then SIGKILL; then the cgroup; then the shell is reaped and its
  run ended;
* its wait-state (:class:`~registry.terminals.waits.WaitTracking`): told every
  chunk of output, every write of ours and every start and end of a command, it
  says whether the command waits for input; a change is announced like any other.
  When the one reading is the shell itself, at its line editor, during a run, and
  either another program was exec'd in its place or the cursor row is the prompt it
  showed before the command, the shell is back at its prompt without its markers:
  the run ends with the integration lost (its hooks were removed, ``exec bash``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Coroutine, Sequence
from typing import Any

import psutil

from ..config import Settings
from ..limits import POLL_INTERVAL
from ..processes import (
    end_processes,
    foreground_processes,
    in_groups,
    process_tree,
    started_since,
    tagged_processes,
    wait_gone,
)
from ..run import RunState, TerminalRun
from ..shell import ShellLaunch
from ..waiting import TerminalState, WaitState, WatchSettings
from .children import TERMINAL_TAG_VARIABLE
from .phases import Phase, PhaseMachine
from .pty import AsyncPty
from .waits import WaitTracking

__all__ = ["ShellProcess"]

_RUNNING = WaitState(TerminalState.RUNNING)
_IDLE = WaitState(TerminalState.IDLE)

log = logging.getLogger(__name__)


class ShellProcess(PhaseMachine):
    """A shell on a PTY: its markers, its commands stopped, its end."""

    #: How its wait-state is decided (a remote terminal's is relayed).
    _watch_settings: WatchSettings | None = None

    def __init__(
        self,
        terminal_id: int,
        cwd: str,
        settings: Settings,
        launch: ShellLaunch,
        nonce: str,
        tag: str,
        pty: AsyncPty,
    ) -> None:
        super().__init__(terminal_id, cwd, settings, nonce if launch.integrated else None)
        self._launch = launch
        self._tag = tag
        self._pty = pty
        self._loop = asyncio.get_running_loop()
        self._tasks: set[asyncio.Task[object]] = set()
        self._finalizing: asyncio.Task[None] | None = None
        self._waits = WaitTracking(
            pty.fd,
            pty.pid,
            (settings.cols, settings.rows),
            self._command_running,
            self._wait_changed,
            self._watch_settings,
        )
        #: The wait-state last announced (through _changed), to announce changes only.
        self._announced = self._wait_key()
        #: The shell's command line as it started: another one means an exec.
        self._cmdline = _cmdline(pty.pid)

    # -- reported state -----------------------------------------------------------

    @property
    def shell(self) -> str:
        return self._launch.shell

    @property
    def pid(self) -> int | None:
        return self._pty.pid

    @property
    def tag(self) -> str:
        return self._tag

    @property
    def scratch(self) -> str | None:
        return self._launch.temp_dir

    @property
    def output_pending(self) -> bool:
        """The shell wrote what we have not read yet (a busy loop has not got to it)."""
        return not self._pty.closed and self._pty.unread() > 0

    @property
    def size(self) -> tuple[int, int]:
        """(cols, rows) of the PTY."""
        if self._closed or self._pty.closed:
            return (self._settings.cols, self._settings.rows)
        rows, cols = self._pty.getwinsize()
        return (cols, rows)

    # -- the wait-state --------------------------------------------------------------

    @property
    def wait_state(self) -> WaitState:
        state = self._waits.state
        # A waiting verdict counts while a command runs: once the run has ended, one
        # not yet looked at again is stale (the answer ended the command).
        if state.state is TerminalState.STOPPED_JOB or (state.waiting and self._command_running()):
            return state
        return _RUNNING if self.busy else _IDLE

    def waiting_now(self) -> WaitState | None:
        return self._waits.fresh() if self._command_running() else None

    async def until_waiting(self) -> WaitState:
        return await self._waits.until_waiting()

    async def send_keys(self, keys: Sequence[str]) -> None:
        data = self._waits.key_bytes(keys)  # raises on an unknown key, sending nothing
        await self.write(data)

    def _wait_key(self) -> tuple[object, ...]:
        state = self.wait_state
        return (state.state, state.certainty, state.program, state.prompt, state.keys)

    def _wait_changed(self, state: WaitState) -> None:
        if (
            state.waiting
            and state.pid == self._pty.pid
            and self._phase is Phase.OUTPUT
            and self._guess is None
            and self.current_run is not None
            and self._waits.line_editor_reads()
        ):
            why = self._shell_took_over(state)
            if why is not None:
                self._integration_lost_during_run(why)
                return
        if self._wait_key() != self._announced:
            self._changed()

    def _shell_took_over(self, state: WaitState) -> str | None:
        """Why the shell reading its line editor during a run is at a prompt of its
        own (None: it is not, as far as can be told: ``read -e``, fish's ``read``)."""
        now = _cmdline(self._pty.pid)
        if self._cmdline is not None and now is not None and now != self._cmdline:
            shown = now.replace("\0", " ").strip()
            return f"another program replaced the shell (exec {shown})"
        if state.prompt and state.prompt == self._waits.shell_prompt():
            return "the shell is back at its prompt without reporting the command's end"
        return None

    def _changed(self) -> None:
        self._announced = self._wait_key()
        super()._changed()

    def _command_running_changed(self) -> None:
        self._waits.command_changed()

    def _command_output_starts(self) -> None:
        self._waits.command_started()

    def _output(self, data: bytes, run: TerminalRun | None, *, idle: bool = False) -> None:
        self._waits.output(data)
        super()._output(data, run, idle=idle)

    def _spawn_task(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _write(self, data: bytes) -> None:
        self._pty.write(data)
        self._waits.wrote()

    def _interrupt_command(self) -> bool:
        if not foreground_processes(self._pty.fd, self._pty.pid):
            return False
        self._send_interrupt()
        return True

    def _start_overdue(self, run: TerminalRun) -> None:
        """``command_start_timeout`` after submitting: has the command shown up?"""
        if not run.done and not run.started and self._phase is Phase.SUBMITTED:
            self._no_start(run)

    def _timed_out(self, run: TerminalRun) -> None:
        if not run.done:
            self._spawn_task(self._interrupt(run, RunState.TIMED_OUT))

    def _no_start(self, run: TerminalRun) -> None:
        """No C and no prompt after submitting: decide from the processes."""
        if foreground_processes(self._pty.fd, self._pty.pid):
            # Something is running without markers (hooks broken by the user's rc):
            # the next prompt (P;Cwd) still ends it; mark it started.
            run.mark_started()
            return
        # A line editor swallowed it: nothing runs. Clear the line and report.
        self._abandon_input(
            RunState.COMPLETED,
            "the shell did not start the command; output is what the screen showed",
        )

    async def _interrupt(self, run: TerminalRun, state: RunState) -> None:
        """End a running command: SIGINT, then SIGTERM, then SIGKILL, grace apart."""
        if run.done or self.current_run is not run:
            return
        self._end_as(state)
        grace = self._settings.kill_grace
        if not run.started and self._guess is None:
            self._abandon_input(state, "ended before the command started", keep_screen=False)
            return
        groups: set[int] = set()  # the command's process groups, seen while it ran
        reached_the_shell = not self._send_interrupt(groups)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.wait(), grace)
        if not run.done and reached_the_shell and foreground_processes(self._pty.fd, self._pty.pid):
            # The Ctrl-C came between the command's start (C) and its taking the
            # terminal, so the shell got it: the command, in the foreground now,
            # gets its own before anything harder.
            self._send_interrupt(groups)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.wait(), grace)
        if not run.done:
            procs = foreground_processes(self._pty.fd, self._pty.pid)
            if procs:
                await end_processes(procs, grace, signals=(signal.SIGTERM,))
                waited = grace
            else:
                # The shell runs it itself (a builtin loop): only SIGINT reaches it
                # without ending the shell. Ask again and give it longer.
                self._send_interrupt()
                waited = 3 * grace
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.wait(), waited)
        if not run.done:
            # The shell itself does not come back: the terminal cannot be trusted.
            log.warning("terminal %s: shell did not return after kill; closing", self.id)
            self._finish_current(state, note="the shell did not return to a prompt")
            await self.close()
            return
        await self._end_leftovers(run, groups)

    async def _end_leftovers(self, run: TerminalRun, groups: set[int]) -> None:
        """What the ended command started and left behind: the rest of its process
        groups (``bash -c 'a & b & wait'``: the jobs ignore SIGINT and outlive the
        bash, re-parented to init) and whatever joined the terminal's cgroup since
        the command started (a setsid'd child) -- never the shell, nor the jobs of
        earlier commands."""
        leftovers = {p.pid: p for p in in_groups(groups, since=run.started_boot)}
        group = self._placement.cgroup
        if group is not None:
            members = group.members() - {self._pty.pid}
            for proc in started_since(members, run.started_boot):
                leftovers.setdefault(proc.pid, proc)
        if leftovers:
            await end_processes(list(leftovers.values()), self._settings.kill_grace)

    def _send_interrupt(self, groups: set[int] | None = None) -> bool:
        """SIGINT to the foreground job, as Ctrl-C would, even if the tty is raw.

        Returns whether a command's process group got it (else the shell did); that
        group is added to ``groups``.
        """
        pgrp = self._pty.foreground_process_group()
        if pgrp > 0 and pgrp != self._pty.pid:
            if groups is not None:
                groups.add(pgrp)
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGINT)
            return True
        # The shell runs it itself (builtins, a loop): Ctrl-C reaches the shell.
        self._write(b"\x03")
        return False

    async def _end_for_limit(self, run: TerminalRun) -> None:
        """It broke a limit: SIGKILL its processes at once (a fork bomb or a memory
        hog gets no grace), the shell kept.

        When the shell itself runs it (a loop starting ``sleep &`` jobs), the SIGKILL
        ends the jobs, not the loop, which goes on starting more in the room the kill
        made.  Ctrl-C stops the loop; what it started meanwhile is killed again until
        the shell is back at its prompt -- bash, a fork of its cut short by that
        Ctrl-C, waits in its prompt hook for the last job it started, and while the
        limit holds, that job's place is one the shell cannot fork into.  Only a
        shell that still does not come back gets the usual interrupt (and is given
        up on).  A loop that ended by itself after the first kill started jobs since:
        they go as the run ends.
        """
        shell = self._pty.pid
        killed = self._kill_run_group(run, {shell})
        procs = [p for p in foreground_processes(self._pty.fd, shell) if p.pid not in killed]
        for proc in procs:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        grace = self._settings.kill_grace
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.wait(), grace)
        if not run.done:
            self._send_interrupt()
            await self._kill_joining_until_done(run, 3 * grace)
        if not run.done:
            await self._interrupt(run, RunState.FAILED)
            return
        if self.current_run is None or self.current_run is run:  # not the next run's
            self._kill_run_group(run, {shell})

    async def _kill_joining_until_done(self, run: TerminalRun, timeout: float) -> None:
        """SIGKILL what joins the terminal's group since ``run`` started (the shell
        kept) every :data:`~registry.limits.POLL_INTERVAL`, until the run ends or
        ``timeout`` passes: a loop may start one more job before its Ctrl-C lands."""
        deadline = self._loop.time() + timeout
        while not run.done and self._loop.time() < deadline:
            self._kill_run_group(run, {self._pty.pid})
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.wait(), POLL_INTERVAL)

    async def kill(self) -> None:
        run = self.current_run
        if run is not None:
            await self._interrupt(run, RunState.CANCELLED)

    def resize(self, cols: int, rows: int) -> None:
        if cols <= 0 or rows <= 0:
            raise ValueError(f"terminal size must be positive, got {cols}x{rows}")
        if not self._closed and not self._pty.closed:
            self._pty.setwinsize(rows, cols)
            self._waits.resize(cols, rows)
            self._changed()

    def _on_eof(self) -> None:
        """The shell's side of the PTY is gone: the shell exited or was killed."""
        for event in self._parser.flush():
            if isinstance(event, bytes):
                self._on_bytes(event)
        if self._finalizing is None:
            self._finalizing = asyncio.ensure_future(self._finalize())

    async def _finalize(self) -> None:
        """Reap the shell, end the current run, end leftovers, remove temp files."""
        with contextlib.suppress(psutil.Error):
            # Its PTY is closed, so it is on its way out; give it time to finish
            # (under load that can take a while) before the PTY's close forces it.
            await wait_gone([psutil.Process(self._pty.pid)], max(5.0, self._settings.kill_grace))
        # The watcher reads the master fd: it stops before the fd is closed (and its
        # number perhaps reused).
        self._waits.close()
        self._pty.close()
        status, signum = self._pty.exit_status, self._pty.exit_signal
        leftovers = tagged_processes(TERMINAL_TAG_VARIABLE, self._tag)
        if leftovers:
            await end_processes(leftovers, self._settings.kill_grace, signals=(signal.SIGTERM,))
        await self._end_group(self._settings.kill_grace)
        self._launch.cleanup()
        self._shell_gone(status, signum)

    async def close(self) -> None:
        """End the shell and everything it started; remove our temporary files."""
        if self._closed:
            return
        if self._finalizing is None:
            self._end_as(RunState.CANCELLED, unless_ending=True)
            # SIGHUP first, as when a terminal window closes: the shell passes it on
            # to its jobs. Then SIGTERM, then SIGKILL.
            procs = process_tree(self._pty.pid, TERMINAL_TAG_VARIABLE, self._tag)
            await end_processes(procs, self._settings.kill_grace, signals=(signal.SIGHUP,))
        if self._finalizing is None:
            # The EOF has not been seen (or never will be): finalise directly.
            self._pty.stop_reading()
            self._finalizing = asyncio.ensure_future(self._finalize())
        await asyncio.shield(self._finalizing)
        for task in list(self._tasks):
            task.cancel()


def _cmdline(pid: int) -> str | None:
    """A process's argv as the kernel shows it (NUL-separated); None if unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode("utf-8", "replace")
    except OSError:
        return None
