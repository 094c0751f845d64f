"""The shell provider: a real shell in a real PTY, driven by its OSC 633 markers.

:class:`ShellTerminal` is a :class:`~registry.terminals.shell_process.ShellProcess`
(the shell on an :class:`~registry.terminals.pty.AsyncPty`, with what the
:class:`~registry.terminals.phases.PhaseMachine` makes of its markers), started with
what :mod:`~registry.terminals.children` gives every child.  This module adds:

* submission: a command typed in one write (``command\r``), as a bracketed paste
  when it has several lines and the shell's line editor takes one, else line by
  line, each after the shell asked for it; a command that never starts is
  abandoned; without integration :mod:`~registry.terminals.heuristic` drives it;
* input: what a client or a person types reaches the shell as it is.

Stopping commands and ending the shell are :mod:`~registry.terminals.shell_process`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
from collections.abc import Mapping

from ..config import Settings
from ..errors import SpawnError, TerminalClosedError
from ..limits import Limits
from ..run import RunState, TerminalRun
from ..shell import prepare_launch, write_private
from ..shell.syntax import LONG_COMMAND_BYTES, source_line, with_exports
from .base import IntegrationState, existing_directory
from .children import NOWHERE, TERMINAL_TAG_VARIABLE, Placement, agent_environment, new_tag
from .heuristic import GuessedRun, drive
from .phases import Phase, Submission
from .pty import AsyncPty, spawn_child
from .shell_process import ShellProcess

__all__ = ["Phase", "ShellTerminal", "Submission"]

log = logging.getLogger(__name__)


class ShellTerminal(ShellProcess):
    """A shell in a PTY. Create with :meth:`spawn`; close with :meth:`close`."""

    provider = "shell"

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
        placement: Placement = NOWHERE,
        integration: bool = True,
    ) -> ShellTerminal:
        """Start a shell in ``cwd``. Returns at once; :meth:`ready` awaits start-up.

        Raises :class:`InvalidCwdError` for a cwd that is not a directory and
        :class:`SpawnError` when the shell cannot be started.
        """
        settings = settings or Settings()
        cwd = existing_directory(cwd)
        shell = shell or settings.default_shell
        nonce = secrets.token_hex(16)
        tag = new_tag(terminal_id)
        environ = os.environ if env is None else {**os.environ, **env}
        base = agent_environment(environ, term="xterm-256color")
        base.update(placement.env)
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
                preexec_fn=placement.preexec(),
            )
        except OSError as error:
            launch.cleanup()
            raise SpawnError(f"cannot start shell {launch.shell!r}: {error}") from error
        pty = AsyncPty(child)
        terminal = cls(terminal_id, cwd, settings, launch, nonce, tag, pty)
        terminal._placement = placement
        pty.start_reading(terminal._on_data, terminal._on_eof)
        terminal._spawn_task(terminal._detect_integration())
        return terminal

    #: What the registry's provider table calls: :meth:`spawn`, with our integration.
    create = spawn

    # -- commands -----------------------------------------------------------------

    async def start(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        *,
        limits: Limits | None = None,
    ) -> TerminalRun:
        self._check_can_start()
        self._submission = Submission.CLAIMED
        try:
            await self.ready()
            # Its integration may have been lost since (a run found its hooks gone).
            strategy = self._integration
            await self._wait_for_prompt()
            if self._closed:
                raise TerminalClosedError(f"terminal {self.id} is closed")
            command = command.replace("\r\n", "\n").rstrip("\n")
            if env:
                command = with_exports(env, command)
            run = TerminalRun(self.id, command, self._settings.run_output_cap)
            self._begin_run(run)
            self._watch_limits(run, limits, shell_pid=self._pty.pid)
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
        self._waits.remember_prompt()
        self._since_submission.clear()
        self._prompt_event.clear()
        self._phase = Phase.SUBMITTED
        data = command.encode("utf-8", "surrogateescape")
        if len(data) > LONG_COMMAND_BYTES and self.scratch is not None:
            command = self._through_a_file(run, data)
            data = command.encode("utf-8", "surrogateescape")
        lines = command.split("\n")
        if self._line_may_hold_text:
            # Ctrl-U first: the line editor kept the last line (fish does, after a
            # syntax error), and ours would be typed after it.
            self._line_may_hold_text = False
            self._write(b"\x15")
        self._launch.next_line_is_ours()
        if len(lines) == 1:
            self._write(data + b"\r")
        elif self._bracketed_paste:
            self._write(b"\x1b[200~" + data + b"\x1b[201~\r")
        else:
            self._submission = Submission.TYPING_LINES
            self._spawn_task(self._type_lines(run, lines))

    def _through_a_file(self, run: TerminalRun, data: bytes) -> str:
        """A long command goes into a private file the shell sources; removed at the end."""
        assert self.scratch is not None
        path = os.path.join(self.scratch, f"command-{run.id}")
        write_private(path, data.decode("utf-8", "surrogateescape"))
        run.add_done_callback(lambda: _remove(path))
        return source_line(self._launch.kind, path)

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

    def _submit_guessed(self, guess: GuessedRun) -> None:
        self._since_submission.clear()
        self._guess = guess
        self._phase = Phase.SUBMITTED
        self._waits.echo_follows()
        self._write(guess.command.encode("utf-8", "surrogateescape") + b"\r")

    def _screen_since_submission(self) -> bytes:
        return bytes(self._since_submission)

    def _recent_screen(self) -> bytes:
        return self.replay(4096)

    def _end_guessed(self, guess: GuessedRun, output: bytes, cwd: str | None) -> None:
        if cwd is not None:
            self._set_cwd(cwd)
        self._phase = Phase.PROMPT
        self._prompt_event.set()
        self._finish_current(self._ending_or(RunState.COMPLETED), output=output, note=guess.NOTE)

    # -- input ----------------------------------------------------------------------

    async def write(self, data: str | bytes) -> None:
        if self._closed:
            raise TerminalClosedError(f"terminal {self.id} is closed")
        if self.current_run is None and self._submission is Submission.IDLE:
            self._submission = Submission.TYPED  # its echo is no background job's output
        self._write(data.encode("utf-8") if isinstance(data, str) else data)


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _cancel_all(timers: list[asyncio.TimerHandle]) -> None:
    for timer in timers:
        timer.cancel()
