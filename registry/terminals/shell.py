"""The shell provider: a real shell in a real PTY, driven by its OSC 633 markers.

The shell is spawned with pexpect (pty, session, controlling terminal, window size);
from then on the master fd is read without blocking on the asyncio loop
(``loop.add_reader``), fed through :class:`~registry.markers.MarkerParser`, and the
verified markers drive a small phase machine:

``STARTING`` -> ``PROMPT`` (a verified B: the prompt is up) -> ``SUBMITTED`` (command
written) -> ``OUTPUT`` (C: output starts) -> ``ENDED`` (D: exit code) -> ``BETWEEN``
(P;Cwd: the run is complete, cwd known) -> ``PROMPT`` (B) ...

Only markers carrying this terminal's nonce count, so a program that prints
``ESC]633;D`` cannot end a run and one that prints ``ESC]633;P;Cwd=/etc`` cannot move
the terminal.  Silence is never taken for an ending: only D ends a rich run.

Without integration (strategy ``none``) runs end on heuristics: quiet plus a
prompt-like last line, with no exit code.
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

import pexpect
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
from .base import TERMINAL_TAG_VARIABLE, IntegrationState, Terminal, existing_directory

__all__ = ["INTERNAL_VARIABLES", "TERMINAL_TAG_VARIABLE", "ShellTerminal"]

log = logging.getLogger(__name__)


_READ_SIZE = 256 * 1024
_PROMPT_LIKE = re.compile(r"[$#%>❯»]\s*$")
_INHERITED_SIGNALS = [
    name
    for name in (
        *("SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGPIPE", "SIGTSTP", "SIGTTIN"),
        *("SIGTTOU", "SIGCHLD", "SIGXFSZ", "SIGUSR1", "SIGUSR2", "SIGALRM"),
    )
    if hasattr(signal, name)
]


class Phase(enum.Enum):
    STARTING = "starting"
    PROMPT = "prompt"
    SUBMITTED = "submitted"
    OUTPUT = "output"
    ENDED = "ended"
    BETWEEN = "between"
    CLOSED = "closed"


def _reset_signals() -> None:
    """In the child before exec: default dispositions, nothing blocked.

    A server started with SIGINT ignored (``nohup ... &``) must not hand that on:
    every command in the terminal would then ignore Ctrl-C.  Python itself ignores
    SIGPIPE, which would turn ``yes | head`` into an error message.
    """
    for name in _INHERITED_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())


#: Our own variables that must not leak from the server's environment into a
#: terminal's (``TERMINAL_REGISTRY_SOCKET`` does pass: it is how agents find us).
INTERNAL_VARIABLES = frozenset(
    {
        "TERMINAL_REGISTRY_NONCE",
        "TERMINAL_REGISTRY_DIR",
        "TERMINAL_REGISTRY_LOGIN",
        "TERMINAL_REGISTRY_USER_ZDOTDIR",
        "TERMINAL_REGISTRY_TERMINAL",
        "TERMINAL_REGISTRY_RUN",
    }
)


def _agent_environment(base: Mapping[str, str]) -> dict[str, str]:
    """The environment a terminal's shell starts with: the base plus agent defaults."""
    env = {k: v for k, v in base.items() if k not in INTERNAL_VARIABLES}
    env["TERM"] = "xterm-256color"
    env["PAGER"] = "cat"
    env["GIT_PAGER"] = "cat"
    env.setdefault("LESS", "-FRX")
    if not any(env.get(k) for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        env["LANG"] = "C.UTF-8"
    for noisy in ("COLUMNS", "LINES"):
        env.pop(noisy, None)
    return env


def _screen_text_output(screen: bytes, drop_last_line: bool) -> bytes:
    """Output from what the screen showed: the echoed command line and the prompt cut.

    Used where markers could not delimit the output (strategy none, a command whose
    start marker never came).  The first line is the echo of what we typed.
    """
    start = screen.find(b"\n") + 1 if b"\n" in screen else len(screen)
    end = len(screen)
    if drop_last_line:
        last_newline = screen.rfind(b"\n")
        end = last_newline + 1 if last_newline >= start else start
    return screen[start:end]


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
    ) -> None:
        super().__init__(terminal_id, cwd, settings.replay_cap)
        self._settings = settings
        self._launch = launch
        self._tag = tag
        self._parser = MarkerParser(nonce if launch.integrated else None)
        self._loop = asyncio.get_running_loop()
        self._child: pexpect.spawn | None = None
        self._fd = -1
        self._pid: int | None = None
        self._phase = Phase.STARTING
        self._integration = IntegrationState.PENDING
        self._integration_seen = False
        self._bracketed_paste = False
        self._verified_cwd = False
        self._last_command_line: str | None = None
        # The command being submitted: set between start() and the run's end.
        self._submitting = False
        self._more_lines = False
        self._none_run = False
        self._none_cwd: tuple[str, int] | None = None
        self._ending_state: RunState | None = None
        self._screen = bytearray()
        self._input = bytearray()
        self._last_output = time.monotonic()
        self._output_event = asyncio.Event()
        self._prompt_event = asyncio.Event()
        self._continuation_event = asyncio.Event()
        self._ready: asyncio.Future[IntegrationState] = self._loop.create_future()
        self._exit_status: int | None = None
        self._exit_signal: int | None = None
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
        tag = f"{os.getpid()}.{terminal_id}.{secrets.token_hex(8)}"
        base = _agent_environment(os.environ if env is None else {**os.environ, **env})
        base[TERMINAL_TAG_VARIABLE] = tag
        launch = prepare_launch(
            shell, base, nonce, integration=integration, login=settings.login_shell
        )
        terminal = cls(terminal_id, cwd, settings, launch, nonce, tag)
        terminal._start_process()
        return terminal

    def _start_process(self) -> None:
        launch = self._launch
        try:
            child = pexpect.spawn(
                launch.argv[0],
                launch.argv[1:],
                env=launch.env,
                cwd=self._cwd,
                dimensions=(self._settings.rows, self._settings.cols),
                preexec_fn=_reset_signals,
                echo=True,
            )
        except (pexpect.ExceptionPexpect, OSError) as error:
            launch.cleanup()
            raise SpawnError(f"cannot start shell {launch.shell!r}: {error}") from error
        # pexpect's own close() sleeps between signals; ours does not block the loop.
        child.delayafterclose = 0
        child.delayafterterminate = 0
        child.ptyproc.delayafterclose = 0
        child.ptyproc.delayafterterminate = 0
        self._child = child
        self._fd = child.child_fd
        self._pid = child.pid
        os.set_blocking(self._fd, False)
        self._loop.add_reader(self._fd, self._on_readable)
        self._spawn_task(self._detect_integration())

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
        return self._pid

    @property
    def integration(self) -> IntegrationState:
        return self._integration

    @property
    def busy(self) -> bool:
        return self.current_run is not None or self._submitting

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def size(self) -> tuple[int, int]:
        """(cols, rows) of the PTY."""
        if self._child is None or self._closed:
            return (self._settings.cols, self._settings.rows)
        rows, cols = self._child.getwinsize()
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
        started = time.monotonic()
        absolute_deadline = started + settings.integration_absolute_timeout
        if not self._launch.integrated:
            await self._quiet(settings.none_quiet_timeout, absolute_deadline)
            self._settle_integration(IntegrationState.NONE)
            return
        while not self._ready.done():
            now = time.monotonic()
            deadline = absolute_deadline
            if not self._integration_seen:
                deadline = min(deadline, self._last_output + settings.integration_idle_timeout)
            if now >= deadline:
                break
            self._output_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._output_event.wait(), deadline - now)
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
        self._notify("on_change")

    # -- reading ------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self._fd, _READ_SIZE)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self._on_eof()
            return
        self._last_output = time.monotonic()
        self._output_event.set()
        for event in self._parser.feed(data):
            if isinstance(event, bytes):
                self._on_bytes(event)
            else:
                self._on_marker(event)

    def _on_bytes(self, data: bytes) -> None:
        self._replay.append(data)
        phase = self._phase
        run = self.current_run
        if phase is Phase.OUTPUT and run is not None:
            run.append(data)
        elif phase is Phase.SUBMITTED:
            self._screen += data
            if self._none_run and run is not None:
                run.append(data)
            else:
                run = None  # the echo of what we typed, not the command's output
        else:
            run = None
        self._notify("on_output", data, run)

    def _on_marker(self, marker: Marker) -> None:
        if marker.family != "633":
            # Other families carry no nonce: a cwd from them is taken only while no
            # verified source exists and no command is printing output.
            cwd = marker.cwd
            if cwd and not self._verified_cwd:
                if self._phase in (Phase.PROMPT, Phase.BETWEEN, Phase.STARTING):
                    self._set_cwd(cwd)
                elif self._none_run:
                    # Strategy none: the end of a run is only guessed later; keep it
                    # and take it then if it came with the prompt, not the output.
                    self._none_cwd = (cwd, len(self._screen))
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
            Phase.BETWEEN,
            Phase.ENDED,
        ):
            self._settle_integration(IntegrationState.RICH)
        if self._phase is Phase.ENDED and not self._more_lines:
            self._complete_rich_run()
        if self._phase in (Phase.STARTING, Phase.BETWEEN, Phase.ENDED, Phase.PROMPT):
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
        if self._phase in (Phase.SUBMITTED, Phase.ENDED, Phase.BETWEEN) and run is not None:
            self._phase = Phase.OUTPUT
            run.mark_started()
        elif self._phase is Phase.PROMPT and run is None and not self._submitting:
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
        if not has_cwd or self._more_lines:
            if has_cwd and self._phase in (Phase.SUBMITTED, Phase.ENDED):
                self._phase = Phase.BETWEEN
            return
        if self._phase is Phase.ENDED:
            self._complete_rich_run()
            self._phase = Phase.BETWEEN
        elif self._phase is Phase.SUBMITTED and self.current_run is not None:
            # Back at a prompt without a C: nothing ran (an empty or comment line, a
            # syntax error, or hooks broken by the user's rc).
            self._complete_rich_run()
            self._phase = Phase.BETWEEN

    def _on_continuation_prompt(self, marker: Marker) -> None:  # G
        self._continuation_event.set()
        run = self.current_run
        if self._phase is Phase.SUBMITTED and not self._more_lines and run is not None:
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
            self._finish_current(self._ending_state or RunState.COMPLETED)
        else:
            self._finish_current(
                self._ending_state or RunState.COMPLETED,
                output=_screen_text_output(bytes(self._screen), drop_last_line=False),
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
        self._more_lines = False
        self._none_run = False
        self._ending_state = None
        self._screen.clear()
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
        self._submitting = True
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
            self._submitting = False
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
            self._spawn_task(self._drive_none(run, command))
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
        self._screen.clear()
        self._prompt_event.clear()
        self._phase = Phase.SUBMITTED
        lines = command.split("\n")
        data = command.encode("utf-8", "surrogateescape")
        if len(lines) == 1:
            self._write(data + b"\r")
        elif self._bracketed_paste:
            self._write(b"\x1b[200~" + data + b"\x1b[201~\r")
        else:
            self._more_lines = True
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
                self._more_lines = False
            if self._phase in (Phase.PROMPT, Phase.BETWEEN):
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

    async def _drive_none(self, run: TerminalRun, command: str) -> None:
        """Heuristic run: clean prompt, type, then wait for quiet and a prompt line.

        Documented as a heuristic: a command that goes quiet while its last line
        looks like a prompt is taken for finished.
        """
        settings = self._settings
        if foreground_processes(self._fd, self._pid or -1):
            # Something still runs (the last guess was early): interrupt it first.
            self._send_interrupt(self._pid or -1)
            await self._quiet(settings.none_quiet_timeout)
        # Ctrl-U clears a half-typed line; Ctrl-C at an idle prompt would race the
        # shell's SIGINT handling against the command we type next.
        self._write(b"\x15")
        await self._quiet(settings.none_quiet_timeout)
        self._screen.clear()
        self._none_run = True
        self._phase = Phase.SUBMITTED
        self._write(command.encode("utf-8", "surrogateescape") + b"\r")
        run.mark_started()
        while not run.done and not self._closed:
            await self._quiet(settings.none_quiet_timeout)
            screen = bytes(self._screen)
            text = strip_escape_sequences(screen.decode("utf-8", "replace"))
            lines = text.replace("\r\n", "\n").split("\n")
            last = lines[-1].split("\r")[-1] if lines else ""
            if len(lines) > 1 and _PROMPT_LIKE.search(last):
                break
            self._output_event.clear()
            await self._output_event.wait()
        if run.done:
            return
        screen = bytes(self._screen)
        output = _screen_text_output(screen, drop_last_line=True)
        if self._none_cwd is not None:
            cwd, at = self._none_cwd
            self._none_cwd = None
            if at >= screen.rfind(b"\n") + 1:  # printed with the prompt line
                self._set_cwd(cwd)
        self._phase = Phase.PROMPT
        self._prompt_event.set()
        self._finish_current(
            self._ending_state or RunState.COMPLETED,
            output=output,
            note="no shell integration: the end was guessed from quiet and a prompt",
        )

    async def _quiet(self, window: float, deadline: float | None = None) -> None:
        """Return once no output has arrived for ``window`` seconds (or at deadline)."""
        while not self._closed:
            now = time.monotonic()
            wake = self._last_output + window
            if deadline is not None:
                wake = min(wake, deadline)
            if now >= wake:
                return
            self._output_event.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._output_event.wait(), wake - now)

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
        self._phase = Phase.BETWEEN
        output = (
            _screen_text_output(bytes(self._screen), drop_last_line=False) if keep_screen else None
        )
        self._finish_current(state, output=output, note=note)

    def _no_start(self, run: TerminalRun) -> None:
        """No C and no prompt after submitting: decide from the processes."""
        if foreground_processes(self._fd, self._pid or -1):
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
        self._ending_state = state
        grace = self._settings.kill_grace
        shell_pid = self._pid or -1
        if not run.started and not self._none_run:
            self._abandon_input(state, "ended before the command started", keep_screen=False)
            return
        self._send_interrupt(shell_pid)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.wait(), grace)
        if not run.done:
            procs = foreground_processes(self._fd, shell_pid)
            if procs:
                await end_processes(procs, grace, signals=(signal.SIGTERM,))
                waited = grace
            else:
                # The shell runs it itself (a builtin loop): only SIGINT reaches it
                # without ending the shell. Ask again and give it longer.
                self._send_interrupt(shell_pid)
                waited = 3 * grace
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(run.wait(), waited)
        if not run.done:
            # The shell itself does not come back: the terminal cannot be trusted.
            log.warning("terminal %s: shell did not return after kill; closing", self.id)
            self._finish_current(state, note="the shell did not return to a prompt")
            await self.close()

    def _send_interrupt(self, shell_pid: int) -> None:
        """SIGINT to the foreground job, as Ctrl-C would, even if the tty is raw."""
        try:
            pgrp = os.tcgetpgrp(self._fd)
        except OSError:
            pgrp = -1
        if pgrp > 0 and pgrp != shell_pid:
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
        if self._child is not None and not self._closed:
            self._child.setwinsize(rows, cols)
            self._notify("on_change")

    def _write(self, data: bytes) -> None:
        """Write without blocking; what the PTY does not take now goes out later."""
        if self._closed or not data:
            return
        if self._input:
            self._input += data
            return
        try:
            written = os.write(self._fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            return
        if written < len(data):
            self._input += data[written:]
            self._loop.add_writer(self._fd, self._flush_input)

    def _flush_input(self) -> None:
        try:
            written = os.write(self._fd, self._input)
        except BlockingIOError:
            return
        except OSError:
            written = len(self._input)
        del self._input[:written]
        if not self._input:
            self._loop.remove_writer(self._fd)

    # -- ending -------------------------------------------------------------------

    def _on_eof(self) -> None:
        """The shell's side of the PTY is gone: the shell exited or was killed."""
        self._loop.remove_reader(self._fd)
        for event in self._parser.flush():
            if isinstance(event, bytes):
                self._on_bytes(event)
        if self._finalizing is None:
            self._finalizing = asyncio.ensure_future(self._finalize())

    async def _finalize(self) -> None:
        """Reap the shell, end the current run, end leftovers, remove temp files."""
        pid = self._pid
        if pid is not None:
            with contextlib.suppress(psutil.Error):
                # Its PTY is closed, so it is on its way out; give it time to finish
                # (under load that can take a while) before pexpect's close forces it.
                await wait_gone([psutil.Process(pid)], max(5.0, self._settings.kill_grace))
        child = self._child
        if child is not None:
            with contextlib.suppress(Exception):
                child.close(force=True)
            self._exit_status = child.exitstatus
            self._exit_signal = child.signalstatus
        leftovers = tagged_processes(TERMINAL_TAG_VARIABLE, self._tag)
        if leftovers:
            await end_processes(leftovers, self._settings.kill_grace, signals=(signal.SIGTERM,))
        run = self.current_run
        if run is not None:
            if self._exit_signal is None and self._exit_status is not None and run.started:
                self._finish_current(
                    self._ending_state or RunState.COMPLETED,
                    exit_code=self._exit_status,
                    note=f"the shell exited with status {self._exit_status}",
                )
            else:
                how = (
                    f"was killed by {signal.Signals(self._exit_signal).name}"
                    if self._exit_signal
                    else "exited"
                )
                self._finish_current(
                    self._ending_state or RunState.FAILED, note=f"the shell {how} during the run"
                )
        self._phase = Phase.CLOSED
        self._launch.cleanup()
        if not self._ready.done():
            status = self._exit_status if self._exit_signal is None else -(self._exit_signal or 0)
            self._ready.set_exception(
                SpawnError(
                    f"shell {self.shell!r} exited during start-up (status {status}): "
                    + strip_escape_sequences(self.replay().decode("utf-8", "replace"))[-500:]
                )
            )
            self._ready.exception()  # retrieved here: nobody may be waiting
        self._prompt_event.set()
        self._output_event.set()
        self._mark_closed()

    async def close(self) -> None:
        """End the shell and everything it started; remove our temporary files."""
        if self._closed:
            return
        if self._finalizing is None and self._pid is not None:
            run = self.current_run
            if run is not None and self._ending_state is None:
                self._ending_state = RunState.CANCELLED
            shell = [p for p in [_process(self._pid)] if p is not None]
            procs = shell + descendants(self._pid)
            procs += [
                p
                for p in tagged_processes(TERMINAL_TAG_VARIABLE, self._tag)
                if p.pid not in {q.pid for q in procs}
            ]
            # SIGHUP first, as when a terminal window closes: the shell passes it on
            # to its jobs. Then SIGTERM, then SIGKILL.
            await end_processes(procs, self._settings.kill_grace, signals=(signal.SIGHUP,))
        if self._finalizing is None:
            # The EOF has not been seen (or never will be): finalise directly.
            self._loop.remove_reader(self._fd)
            self._finalizing = asyncio.ensure_future(self._finalize())
        await asyncio.shield(self._finalizing)
        for task in list(self._tasks):
            task.cancel()


def _cancel_all(timers: list[asyncio.TimerHandle]) -> None:
    for timer in timers:
        timer.cancel()


def _process(pid: int) -> psutil.Process | None:
    try:
        return psutil.Process(pid)
    except psutil.Error:
        return None


def _with_exports(env: Mapping[str, str], command: str) -> str:
    """Prefix ``export NAME='value'`` for each variable (persisting in the shell)."""
    parts = []
    for name, value in env.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise ValueError(f"invalid environment variable name {name!r}")
        quoted = "'" + value.replace("'", "'\\''") + "'"
        parts.append(f"export {name}={quoted}")
    return "; ".join([*parts, command]) if parts else command
