"""The shell provider: a real shell in a real PTY, driven by its OSC 633 markers.

The shell runs on an :class:`~registry.terminals.pty.AsyncPty`, started with what
:mod:`~registry.terminals.children` gives every child.  Its output is fed through
:class:`~registry.markers.MarkerParser`, and the verified markers drive a small
phase machine:

``STARTING`` -> ``PROMPT`` (a verified B: the prompt is up) -> ``SUBMITTED`` (command
written) -> ``OUTPUT`` (C: output starts) -> ``ENDED`` (D: exit code) ->
``AWAITING_PROMPT`` (P;Cwd: the run is complete, cwd known) -> ``PROMPT`` (B) ...

Beside the phase, :class:`Submission` says what ``start()`` is doing with its
command: holding the terminal until a prompt comes, or typing a multi-line command
line by line.

Only markers carrying this terminal's nonce count, so a program that prints
``ESC]633;D`` cannot end a run and one that prints ``ESC]633;P;Cwd=/etc`` cannot move
the terminal.  Silence is never taken for an ending: only D ends a rich run.
Without integration (strategy ``none``) :mod:`~registry.terminals.heuristic` drives
each run and guesses its end.

Stopping escalates: a command gets SIGINT (Ctrl-C), then SIGTERM, then SIGKILL; a
closing terminal's shell, its tree and every process carrying its tag get SIGHUP,
then SIGTERM, then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import re
import secrets
import signal
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, ClassVar

import psutil

from ..config import Settings
from ..errors import SpawnError, TerminalClosedError
from ..markers import Marker, MarkerParser
from ..output import strip_escape_sequences
from ..processes import (
    descendants,
    end_processes,
    foreground_processes,
    tagged_processes,
    wait_gone,
)
from ..run import RunState, TerminalRun
from ..shell import ShellLaunch, prepare_launch
from .base import IntegrationState, Terminal, existing_directory
from .children import TERMINAL_TAG_VARIABLE, agent_environment, new_tag, reset_signals
from .heuristic import GuessedRun, OutputActivity, drive, screen_output
from .pty import AsyncPty

__all__ = ["Phase", "ShellTerminal", "Submission"]

log = logging.getLogger(__name__)


class Phase(enum.Enum):
    """Where the shell stands, as its verified markers say."""

    STARTING = "starting"
    PROMPT = "prompt"
    SUBMITTED = "submitted"
    OUTPUT = "output"
    ENDED = "ended"
    #: The run is over and the shell has said where it stands (P;Cwd), or we
    #: abandoned the input line; its next prompt has not come yet.
    AWAITING_PROMPT = "awaiting-prompt"
    CLOSED = "closed"


class Submission(enum.Enum):
    """What ``start()`` is doing with its command, beside the shell's :class:`Phase`."""

    #: Nothing in hand: no command, or the whole command line has been written.
    IDLE = "idle"
    #: start() holds the terminal while it waits for a prompt; no run exists yet.
    CLAIMED = "claimed"
    #: A multi-line command typed line by line (no bracketed paste); lines remain.
    TYPING_LINES = "typing-lines"


class ShellTerminal(Terminal):
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
        super().__init__(terminal_id, cwd, settings.replay_cap)
        self._settings = settings
        self._launch = launch
        self._tag = tag
        self._pty = pty
        self._parser = MarkerParser(nonce if launch.integrated else None)
        self._loop = asyncio.get_running_loop()
        self._phase = Phase.STARTING
        self._submission = Submission.IDLE
        #: Strategy none: the run in progress, whose end heuristic.py will guess.
        self._guess: GuessedRun | None = None
        self._integration = IntegrationState.PENDING
        self._integration_seen = False
        self._bracketed_paste = False
        self._verified_cwd = False
        self._last_command_line: str | None = None
        #: What the screen showed since the current command was typed (its echo, its
        #: output, the next prompt): the output where markers cannot delimit it.
        self._since_submission = bytearray()
        self._activity = OutputActivity()
        self._prompt_event = asyncio.Event()
        self._continuation_event = asyncio.Event()
        self._ready: asyncio.Future[IntegrationState] = self._loop.create_future()
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
        base[TERMINAL_TAG_VARIABLE] = tag
        launch = prepare_launch(
            shell, base, nonce, integration=integration, login=settings.login_shell
        )
        try:
            pty = AsyncPty.spawn(
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
        terminal = cls(terminal_id, cwd, settings, launch, nonce, tag, pty)
        pty.start_reading(terminal._on_data, terminal._on_eof)
        terminal._spawn_task(terminal._detect_integration())
        return terminal

    @classmethod
    async def create(
        cls,
        terminal_id: int,
        cwd: str,
        settings: Settings | None = None,
        *,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> ShellTerminal:
        """:meth:`spawn` with our integration: what the registry's provider table calls."""
        return await cls.spawn(terminal_id, cwd, settings, shell=shell, env=env)

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
    def integration(self) -> IntegrationState:
        return self._integration

    @property
    def busy(self) -> bool:
        return self.current_run is not None or self._submission is Submission.CLAIMED

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def size(self) -> tuple[int, int]:
        """(cols, rows) of the PTY."""
        if self._closed or self._pty.closed:
            return (self._settings.cols, self._settings.rows)
        rows, cols = self._pty.getwinsize()
        return (cols, rows)

    async def ready(self) -> IntegrationState:
        """Wait for start-up: ``rich`` or ``none``. Raises SpawnError if it died."""
        return await asyncio.shield(self._ready)

    async def _detect_integration(self) -> None:
        """rich once a verified B arrives; none after the idle or absolute window.

        Once our script has said it is starting (``P;IntegrationStarting``), a quiet
        spell only means the user's rc is slow: then the absolute window alone
        applies.
        """
        settings = self._settings
        absolute_deadline = time.monotonic() + settings.integration_absolute_timeout
        if not self._launch.integrated:
            await self._activity.quiet(settings.none_quiet_timeout, absolute_deadline)
            self._settle_integration(IntegrationState.NONE)
            return
        while not self._ready.done():
            now = time.monotonic()
            deadline = absolute_deadline
            if not self._integration_seen:
                idle_deadline = self._activity.last + settings.integration_idle_timeout
                deadline = min(deadline, idle_deadline)
            if now >= deadline:
                break
            await self._activity.next_output(deadline - now)
        if not self._ready.done():
            log.info("terminal %s: no shell integration, strategy none", self.id)
            self._settle_integration(IntegrationState.NONE)

    def give_up_integration(self) -> None:
        """Stop waiting for integration: strategy ``none`` (a late B still upgrades)."""
        if self._integration is IntegrationState.PENDING:
            self._settle_integration(IntegrationState.NONE)

    def _settle_integration(self, state: IntegrationState) -> None:
        if self._closed or (self._ready.done() and self._integration == state):
            return
        self._integration = state
        if self._phase is Phase.STARTING:
            self._phase = Phase.PROMPT
            self._prompt_event.set()
        if not self._ready.done():
            self._ready.set_result(state)
        self._changed()

    # -- reading ------------------------------------------------------------------

    def _on_data(self, data: bytes) -> None:
        self._activity.output()
        for event in self._parser.feed(data):
            if isinstance(event, bytes):
                self._on_bytes(event)
            else:
                self._on_marker(event)

    def _on_bytes(self, data: bytes) -> None:
        phase = self._phase
        run = self.current_run
        if phase is Phase.OUTPUT and run is not None:
            run.append(data)
        elif phase is Phase.SUBMITTED:
            self._since_submission += data
            if self._guess is not None and run is not None:
                run.append(data)
            else:
                run = None  # the echo of what we typed, not the command's output
        else:
            run = None
        self._output(data, run)

    def _on_marker(self, marker: Marker) -> None:
        if marker.family != "633":
            # Other families carry no nonce: a cwd from them is taken only while no
            # verified source exists and no command is printing output.
            cwd = marker.cwd
            if cwd and not self._verified_cwd:
                if self._phase in (Phase.PROMPT, Phase.AWAITING_PROMPT, Phase.STARTING):
                    self._set_cwd(cwd)
                elif self._guess is not None:
                    # Strategy none: whether it came with the prompt is known later.
                    self._guess.cwd_reported(cwd, len(self._since_submission))
            return
        if not marker.verified:
            return
        handler = self._MARKER_HANDLERS.get(marker.code)
        if handler is not None:
            handler(self, marker)

    def _on_prompt_end(self, marker: Marker) -> None:  # B
        if self._integration is not IntegrationState.RICH and self._phase in (
            Phase.STARTING,
            Phase.PROMPT,
            Phase.AWAITING_PROMPT,
            Phase.ENDED,
        ):
            self._settle_integration(IntegrationState.RICH)
        if self._phase is Phase.ENDED and self._submission is not Submission.TYPING_LINES:
            self._complete_rich_run()
        if self._phase in (Phase.STARTING, Phase.AWAITING_PROMPT, Phase.ENDED, Phase.PROMPT):
            self._phase = Phase.PROMPT
            self._prompt_event.set()

    def _on_command_line(self, marker: Marker) -> None:  # E
        self._last_command_line = marker.command_line
        run = self.current_run
        if run is not None and run.typed and marker.command_line and run.output_bytes == 0:
            # bash reports C (from PS0) just before E: name the typed run now.
            run.command_line = marker.command_line

    def _on_output_start(self, marker: Marker) -> None:  # C
        run = self.current_run
        phase = self._phase
        if phase in (Phase.SUBMITTED, Phase.ENDED, Phase.AWAITING_PROMPT) and run is not None:
            self._phase = Phase.OUTPUT
            run.mark_started()
        elif phase is Phase.PROMPT and run is None and self._submission is Submission.IDLE:
            # Typed into the terminal through write(): it is a run all the same, and
            # the terminal is busy until it ends.
            run = TerminalRun(
                self.id,
                self._last_command_line or "",
                self._settings.run_output_cap,
                typed=True,
            )
            self._phase = Phase.OUTPUT
            self._prompt_event.clear()
            run.mark_started()
            self._begin_run(run)

    def _on_command_end(self, marker: Marker) -> None:  # D
        run = self.current_run
        # D in SUBMITTED: the command ran but its C never came (the user's rc made
        # PS0 read-only, say). The verified exit code still stands.
        if self._phase in (Phase.OUTPUT, Phase.SUBMITTED) and run is not None:
            run.exit_code = marker.exit_code
            self._phase = Phase.ENDED

    def _on_property(self, marker: Marker) -> None:  # P
        has_cwd = False
        for field in marker.args:
            key, _, value = field.partition("=")
            if key == "Cwd" and value:
                has_cwd = True
                self._verified_cwd = True
                self._set_cwd(value)
            elif key == "BracketedPaste":
                self._bracketed_paste = value == "on"
            elif key == "IntegrationStarting":
                self._integration_seen = True
        if not has_cwd or self._submission is Submission.TYPING_LINES:
            if has_cwd and self._phase in (Phase.SUBMITTED, Phase.ENDED):
                self._phase = Phase.AWAITING_PROMPT
            return
        if self._phase is Phase.ENDED:
            self._complete_rich_run()
            self._phase = Phase.AWAITING_PROMPT
        elif self._phase is Phase.SUBMITTED and self.current_run is not None:
            # Back at a prompt without a C: nothing ran (an empty or comment line, a
            # syntax error, or hooks broken by the user's rc).
            self._complete_rich_run()
            self._phase = Phase.AWAITING_PROMPT

    def _on_continuation_prompt(self, marker: Marker) -> None:  # G
        self._continuation_event.set()
        run = self.current_run
        typing = self._submission is Submission.TYPING_LINES
        if self._phase is Phase.SUBMITTED and not typing and run is not None:
            # The whole command was typed and the shell still wants more: it is
            # incomplete (an unclosed quote or block). Abandon the input line.
            self._abandon_input(
                RunState.FAILED, "the command is incomplete: the shell asked for more input"
            )

    _MARKER_HANDLERS: ClassVar[dict[str, Callable[[ShellTerminal, Marker], None]]] = {
        "B": _on_prompt_end,
        "E": _on_command_line,
        "C": _on_output_start,
        "D": _on_command_end,
        "P": _on_property,
        "G": _on_continuation_prompt,
    }

    # -- completing runs ----------------------------------------------------------

    def _complete_rich_run(self) -> None:
        run = self.current_run
        if run is None:
            return
        if run.started:
            self._finish_current(self._ending_or(RunState.COMPLETED))
        else:
            self._finish_current(
                self._ending_or(RunState.COMPLETED),
                output=screen_output(bytes(self._since_submission), drop_last_line=False),
                note="no command-start marker came; output is what the screen showed",
            )

    def _finish_current(
        self,
        state: RunState,
        *,
        output: bytes | None = None,
        note: str | None = None,
        exit_code: int | None = None,
    ) -> None:
        run = self.current_run
        if run is None:
            return
        if output is not None:
            run.replace_output(output)
        self._submission = Submission.IDLE
        self._guess = None
        self._since_submission.clear()
        if run.finish(state, exit_code=exit_code, cwd=self._cwd, note=note):
            self._end_run(run)

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

    def _abandon_input(self, state: RunState, note: str, *, keep_screen: bool = True) -> None:
        """End a run whose command never started: clear the input line (Ctrl-U, Ctrl-C),
        await the next prompt, and keep what the screen showed as its output."""
        self._write(b"\x15\x03")
        self._phase = Phase.AWAITING_PROMPT
        screen = bytes(self._since_submission)
        output = screen_output(screen, drop_last_line=False) if keep_screen else None
        self._finish_current(state, output=output, note=note)

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

    def _send_interrupt(self) -> None:
        """SIGINT to the foreground job, as Ctrl-C would, even if the tty is raw."""
        pgrp = self._pty.foreground_process_group()
        if pgrp > 0 and pgrp != self._pty.pid:
            with contextlib.suppress(OSError):
                os.killpg(pgrp, signal.SIGINT)
        else:
            # The shell runs it itself (builtins, a loop): Ctrl-C reaches the shell.
            self._write(b"\x03")

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
        run = self.current_run
        if run is not None:
            if signum is None and status is not None and run.started:
                self._finish_current(
                    self._ending_or(RunState.COMPLETED),
                    exit_code=status,
                    note=f"the shell exited with status {status}",
                )
            else:
                how = f"was killed by {signal.Signals(signum).name}" if signum else "exited"
                self._finish_current(
                    self._ending_or(RunState.FAILED), note=f"the shell {how} during the run"
                )
        self._phase = Phase.CLOSED
        self._launch.cleanup()
        if not self._ready.done():
            code = status if signum is None else -signum
            self._ready.set_exception(
                SpawnError(
                    f"shell {self.shell!r} exited during start-up (status {code}): "
                    + strip_escape_sequences(self.replay().decode("utf-8", "replace"))[-500:]
                )
            )
            self._ready.exception()  # retrieved here: nobody may be waiting
        self._prompt_event.set()
        self._activity.close()
        self._mark_closed()

    async def close(self) -> None:
        """End the shell and everything it started; remove our temporary files."""
        if self._closed:
            return
        if self._finalizing is None:
            self._end_as(RunState.CANCELLED, unless_ending=True)
            # SIGHUP first, as when a terminal window closes: the shell passes it on
            # to its jobs. Then SIGTERM, then SIGKILL.
            procs = self._shell_processes()
            await end_processes(procs, self._settings.kill_grace, signals=(signal.SIGHUP,))
        if self._finalizing is None:
            # The EOF has not been seen (or never will be): finalise directly.
            self._pty.stop_reading()
            self._finalizing = asyncio.ensure_future(self._finalize())
        await asyncio.shield(self._finalizing)
        for task in list(self._tasks):
            task.cancel()

    def _shell_processes(self) -> list[psutil.Process]:
        """The shell, its descendants and every process carrying the terminal's tag."""
        procs: dict[int, psutil.Process] = {}
        with contextlib.suppress(psutil.Error):
            procs[self._pty.pid] = psutil.Process(self._pty.pid)
        for proc in [
            *descendants(self._pty.pid),
            *tagged_processes(TERMINAL_TAG_VARIABLE, self._tag),
        ]:
            procs.setdefault(proc.pid, proc)
        return list(procs.values())


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
