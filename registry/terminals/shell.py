"""The shell provider: a real shell in a real PTY, driven by its OSC 633 markers.

:class:`ShellTerminal` is the :class:`~registry.terminals.phases.PhaseMachine` (what
the shell's markers say) on an :class:`~registry.terminals.pty.AsyncPty`, started
with what :mod:`~registry.terminals.children` gives every child.  This module adds
what we do to the shell:

* submission: a command typed in one write (``command\r``), as a bracketed paste
  when it has several lines and the shell's line editor takes one, else line by
  line, each after the shell asked for it; a command that never starts is
  abandoned; without integration :mod:`~registry.terminals.heuristic` drives it;
* stopping a command: SIGINT to the PTY's foreground job (Ctrl-C when the shell
  runs it itself), then SIGTERM to that job's processes, then the shell is given up
  on and the terminal closed;
* closing: SIGHUP to the shell, its tree and every process carrying the terminal's
  tag, then SIGTERM, then SIGKILL; then the shell is reaped and its run ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import signal
from collections.abc import Coroutine, Mapping
from typing import Any

import psutil

from ..config import Settings
from ..errors import SpawnError, TerminalClosedError
from ..processes import (
    end_processes,
    foreground_processes,
    process_tree,
    tagged_processes,
    wait_gone,
)
from ..run import RunState, TerminalRun
from ..shell import ShellLaunch, prepare_launch
from .base import IntegrationState, existing_directory
from .children import TERMINAL_TAG_VARIABLE, agent_environment, new_tag, reset_signals
from .heuristic import GuessedRun, drive
from .phases import Phase, PhaseMachine, Submission
from .pty import AsyncPty, spawn_child

__all__ = ["Phase", "ShellTerminal", "Submission"]

log = logging.getLogger(__name__)


class ShellTerminal(PhaseMachine):
    """A shell in a PTY. Create with :meth:`spawn`; close with :meth:`close`."""

    provider = "shell"

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

    # -- creation -----------------------------------------------------------------

    @classmethod
    async def spawn(
        cls,
        terminal_id: int,
        cwd: str,
        settings: Settings | None = None,
        *,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        target: str | None = None,
        integration: bool = True,
    ) -> ShellTerminal:
        """Start a shell in ``cwd``. Returns at once; :meth:`ready` awaits start-up.

        Raises :class:`InvalidCwdError` for a cwd that is not a directory and
        :class:`SpawnError` when the shell cannot be started.
        """
        if target:  # remote shells are terminals/remote.py's
            raise ValueError("a local shell runs on this machine: no target")
        settings = settings or Settings()
        cwd = existing_directory(cwd)
        shell = shell or settings.default_shell
        nonce = secrets.token_hex(16)
        tag = new_tag(terminal_id)
        environ = os.environ if env is None else {**os.environ, **env}
        base = agent_environment(environ, term="xterm-256color")
        base[TERMINAL_TAG_VARIABLE] = tag
        launch = prepare_launch(
            shell, base, nonce, integration=integration, login=settings.login_shell
        )
        try:
            child = spawn_child(
                launch.argv,
                env=launch.env,
                cwd=cwd,
                rows=settings.rows,
                cols=settings.cols,
                preexec_fn=reset_signals,
            )
        except OSError as error:
            launch.cleanup()
            raise SpawnError(f"cannot start shell {launch.shell!r}: {error}") from error
        pty = AsyncPty(child)
        terminal = cls(terminal_id, cwd, settings, launch, nonce, tag, pty)
        pty.start_reading(terminal._on_data, terminal._on_eof)
        terminal._spawn_task(terminal._detect_integration())
        return terminal

    #: What the registry's provider table calls: :meth:`spawn`, with our integration.
    create = spawn

    def _spawn_task(self, coro: Coroutine[Any, Any, object]) -> asyncio.Task[object]:
        task: asyncio.Task[object] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # -- reported state -----------------------------------------------------------

    @property
    def shell(self) -> str:
        return self._launch.shell

    @property
    def pid(self) -> int | None:
        return self._pty.pid

    @property
    def size(self) -> tuple[int, int]:
        """(cols, rows) of the PTY."""
        if self._closed or self._pty.closed:
            return (self._settings.cols, self._settings.rows)
        rows, cols = self._pty.getwinsize()
        return (cols, rows)

    # -- commands -----------------------------------------------------------------

    async def start(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> TerminalRun:
        self._check_can_start()
        self._submission = Submission.CLAIMED
        try:
            strategy = await self.ready()
            await self._wait_for_prompt()
            if self._closed:
                raise TerminalClosedError(f"terminal {self.id} is closed")
            command = command.replace("\r\n", "\n").rstrip("\n")
            if env:
                command = _with_exports(env, command)
            run = TerminalRun(self.id, command, self._settings.run_output_cap)
            self._begin_run(run)
        finally:
            self._submission = Submission.IDLE
        timeout = timeout if timeout is not None else self._settings.command_timeout
        # Timers, not a supervising task per run: the common run pays for nothing.
        timers: list[asyncio.TimerHandle] = []
        if strategy is IntegrationState.RICH:
            self._submit_rich(run, command)
            timers.append(
                self._loop.call_later(
                    self._settings.command_start_timeout, self._start_overdue, run
                )
            )
        else:
            guess = GuessedRun(run, command)
            self._spawn_task(drive(self, guess, self._settings.none_quiet_timeout))
        if timeout is not None:
            timers.append(self._loop.call_later(timeout, self._timed_out, run))
        if timers:
            run.add_done_callback(lambda: _cancel_all(timers))
        try:
            await run.wait_started()
        except asyncio.CancelledError:
            # The caller gave up while the command was starting: it must not run on.
            await asyncio.shield(self._interrupt(run, RunState.CANCELLED))
            raise
        return run

    async def _wait_for_prompt(self) -> None:
        """Wait until the shell shows a prompt; nudge it with Ctrl-C if it does not."""
        if self._at_prompt():
            return
        for attempt in range(2):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(
                    self._prompt_event.wait(), self._settings.command_start_timeout
                )
                if self._at_prompt() or self._closed:
                    return
            if attempt == 0 and not self._closed:
                self._write(b"\x03")
        if not self._at_prompt():
            log.warning("terminal %s: no prompt came; submitting anyway", self.id)
            self._phase = Phase.PROMPT

    def _at_prompt(self) -> bool:
        # A method, not an inline test: the phase changes while we await.
        return self._phase is Phase.PROMPT

    def _submit_rich(self, run: TerminalRun, command: str) -> None:
        self._since_submission.clear()
        self._prompt_event.clear()
        self._phase = Phase.SUBMITTED
        lines = command.split("\n")
        data = command.encode("utf-8", "surrogateescape")
        if len(lines) == 1:
            self._write(data + b"\r")
        elif self._bracketed_paste:
            self._write(b"\x1b[200~" + data + b"\x1b[201~\r")
        else:
            self._submission = Submission.TYPING_LINES
            self._spawn_task(self._type_lines(run, lines))

    async def _type_lines(self, run: TerminalRun, lines: list[str]) -> None:
        """No bracketed paste: type line by line, each after the shell asked for it.

        The shell asks for the next line either with its continuation prompt (G) or,
        when the previous line was a complete command, with a new prompt (B).
        """
        for index, line in enumerate(lines):
            if run.done or self._closed:
                return
            last = index == len(lines) - 1
            self._continuation_event.clear()
            self._prompt_event.clear()
            if last:
                self._submission = Submission.IDLE
            if self._phase in (Phase.PROMPT, Phase.AWAITING_PROMPT):
                self._phase = Phase.SUBMITTED
            self._write(line.encode("utf-8", "surrogateescape") + b"\r")
            if last:
                return
            waiters = [
                asyncio.ensure_future(self._continuation_event.wait()),
                asyncio.ensure_future(self._prompt_event.wait()),
                asyncio.ensure_future(run.wait()),
            ]
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()

    # -- what heuristic.drive needs (strategy none) -------------------------------

    def _write(self, data: bytes) -> None:
        self._pty.write(data)

    def _interrupt_command(self) -> bool:
        if not foreground_processes(self._pty.fd, self._pty.pid):
            return False
        self._send_interrupt()
        return True

    def _submit_guessed(self, guess: GuessedRun) -> None:
        self._since_submission.clear()
        self._guess = guess
        self._phase = Phase.SUBMITTED
        self._write(guess.command.encode("utf-8", "surrogateescape") + b"\r")

    def _screen_since_submission(self) -> bytes:
        return bytes(self._since_submission)

    def _end_guessed(self, guess: GuessedRun, output: bytes, cwd: str | None) -> None:
        if cwd is not None:
            self._set_cwd(cwd)
        self._phase = Phase.PROMPT
        self._prompt_event.set()
        self._finish_current(self._ending_or(RunState.COMPLETED), output=output, note=guess.NOTE)

    # -- commands that do not start, and stopping ---------------------------------

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
        reached_the_shell = not self._send_interrupt()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.wait(), grace)
        if not run.done and reached_the_shell and foreground_processes(self._pty.fd, self._pty.pid):
            # The Ctrl-C came between the command's start (C) and its taking the
            # terminal, so the shell got it: the command, in the foreground now,
            # gets its own before anything harder.
            self._send_interrupt()
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

    def _send_interrupt(self) -> bool:
        """SIGINT to the foreground job, as Ctrl-C would, even if the tty is raw.

        Returns whether a command's process group got it (else the shell did).
        """
        pgrp = self._pty.foreground_process_group()
        if pgrp > 0 and pgrp != self._pty.pid:
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGINT)
            return True
        # The shell runs it itself (builtins, a loop): Ctrl-C reaches the shell.
        self._write(b"\x03")
        return False

    async def kill(self) -> None:
        run = self.current_run
        if run is not None:
            await self._interrupt(run, RunState.CANCELLED)

    async def write(self, data: str | bytes) -> None:
        if self._closed:
            raise TerminalClosedError(f"terminal {self.id} is closed")
        self._write(data.encode("utf-8") if isinstance(data, str) else data)

    def resize(self, cols: int, rows: int) -> None:
        if cols <= 0 or rows <= 0:
            raise ValueError(f"terminal size must be positive, got {cols}x{rows}")
        if not self._closed and not self._pty.closed:
            self._pty.setwinsize(rows, cols)
            self._changed()

    # -- ending -------------------------------------------------------------------

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
        self._pty.close()
        status, signum = self._pty.exit_status, self._pty.exit_signal
        leftovers = tagged_processes(TERMINAL_TAG_VARIABLE, self._tag)
        if leftovers:
            await end_processes(leftovers, self._settings.kill_grace, signals=(signal.SIGTERM,))
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


def _cancel_all(timers: list[asyncio.TimerHandle]) -> None:
    for timer in timers:
        timer.cancel()


def _with_exports(env: Mapping[str, str], command: str) -> str:
    """Prefix ``export NAME='value'`` for each variable (persisting in the shell)."""
    parts = []
    for name, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"invalid environment variable name {name!r}")
        quoted = "'" + value.replace("'", "'\\''") + "'"
        parts.append(f"export {name}={quoted}")
    return "; ".join([*parts, command]) if parts else command
