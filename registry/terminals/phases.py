"""The marker phase machine: what a shell's verified markers say about it.

A shell with our integration reports itself in OSC 633 markers; fed through
:class:`~registry.markers.MarkerParser`, the verified ones move the terminal through
its phases:

``STARTING`` -> ``PROMPT`` (a verified B: the prompt is up) -> ``SUBMITTED`` (command
written) -> ``OUTPUT`` (C: output starts) -> ``ENDED`` (D: exit code) ->
``AWAITING_PROMPT`` (P;Cwd: the run is complete, cwd known) -> ``PROMPT`` (B) ...

and settle its integration (``rich`` on the first B; ``none`` when none comes in
time), its live cwd, which bytes are a run's output, and when a run is complete.
Beside the phase, :class:`Submission` says what ``start()`` is doing with its
command, which changes what some markers mean.

Only markers carrying this terminal's nonce count, so a program that prints
``ESC]633;D`` cannot end a run and one that prints ``ESC]633;P;Cwd=/etc`` cannot move
the terminal.  Silence is never taken for an ending: only D ends a rich run.

:class:`PhaseMachine` is the part of :class:`~registry.terminals.shell.ShellTerminal`
that reads; shell.py adds the PTY, submission, stopping and closing.
"""

from __future__ import annotations

import abc
import asyncio
import enum
import logging
import signal
import time
from collections.abc import Callable
from typing import ClassVar

from ..config import Settings
from ..errors import SpawnError
from ..markers import Marker, MarkerParser
from ..output import strip_escape_sequences
from ..run import RunState, TerminalRun
from .base import IntegrationState, Terminal
from .heuristic import GuessedRun, OutputActivity, screen_output

__all__ = ["Phase", "PhaseMachine", "Submission"]

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
    TYPED = "typed"  #: typed at the prompt (write()), not run yet: what shows is echo


#: The phases in which a command is running (submitted, or printing output).
_COMMAND_PHASES = frozenset({Phase.SUBMITTED, Phase.OUTPUT})


class PhaseMachine(Terminal):
    """A shell terminal as its output and markers describe it; writing is the
    subclass's (:meth:`_write`)."""

    def __init__(self, terminal_id: int, cwd: str, settings: Settings, nonce: str | None) -> None:
        """``nonce`` is what verified markers carry; None for a shell started without
        our integration (strategy ``none`` from the start)."""
        super().__init__(terminal_id, cwd, settings.replay_cap)
        self._settings = settings
        self._parser = MarkerParser(nonce)
        self._integrated = nonce is not None
        self._phase_now = Phase.STARTING
        self._submission = Submission.IDLE
        #: Strategy none: the run in progress, whose end heuristic.py will guess.
        self._guess: GuessedRun | None = None
        self._integration = IntegrationState.PENDING
        self._integration_seen = False
        #: Why the shell's integration was lost during a run (its hooks were removed,
        #: another shell exec'd); from then on its markers are not believed.
        self._integration_lost: str | None = None
        #: The line editor may still hold the last line (see _complete_rich_run).
        self._line_may_hold_text = False
        self._bracketed_paste = False
        self._verified_cwd = False
        self._last_command_line: str | None = None
        #: What the screen showed since the current command was typed (its echo, its
        #: output, the next prompt): the output where markers cannot delimit it.
        self._since_submission = bytearray()
        self._activity = OutputActivity()
        self._prompt_event = asyncio.Event()
        self._continuation_event = asyncio.Event()
        self._ready: asyncio.Future[IntegrationState] = asyncio.get_running_loop().create_future()

    @abc.abstractmethod
    def _write(self, data: bytes) -> None:
        """Type ``data`` into the shell."""

    # -- reported state -----------------------------------------------------------

    @property
    def phase(self) -> Phase:
        return self._phase

    @property
    def _phase(self) -> Phase:
        return self._phase_now

    @_phase.setter
    def _phase(self, phase: Phase) -> None:
        # Every move goes through here, so a change of "a command is running" is
        # never missed (the wait-state watcher looks when it happens).
        was = self._phase_now in _COMMAND_PHASES
        self._phase_now = phase
        if was != (phase in _COMMAND_PHASES):
            self._command_running_changed()

    def _command_running(self) -> bool:
        """A command line was written and its end has not been reported: the shell
        reading the terminal now is ``read``, not its prompt."""
        return self._phase_now in _COMMAND_PHASES

    def _command_running_changed(self) -> None:
        """Hook: :meth:`_command_running` changed."""

    def _command_output_starts(self) -> None:
        """Hook: a command's own output starts here (after its C marker)."""

    def _integration_lost_during_run(self, why: str) -> None:
        """The shell is back at a prompt of its own without its markers: end the run
        with an unknown exit code and a note; later runs go without (strategy none)."""
        self._integration_lost = why
        self._integration = IntegrationState.NONE
        run = self.current_run
        if run is not None:
            # Its last line is the shell's prompt, not the command's output.
            output = run.output
            cut = output.rfind(b"\n") + 1
            if cut < len(output):
                run.replace_output(output[:cut])
        self._phase = Phase.PROMPT
        self._prompt_event.set()
        note = f"shell integration was lost: {why}; the exit code is unknown, and later "
        note += "commands in this terminal run without integration (strategy none)"
        self._finish_current(self._ending_or(RunState.COMPLETED), note=note)
        self._changed()

    @property
    def integration(self) -> IntegrationState:
        return self._integration

    @property
    def busy(self) -> bool:
        return self.current_run is not None or self._submission is Submission.CLAIMED

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
        if not self._integrated:
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
        idle = run is None and phase is Phase.PROMPT and self._submission is Submission.IDLE
        self._output(data, run, idle=idle and self._integration is IntegrationState.RICH)

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
        if not marker.verified or self._integration_lost is not None:
            return
        handler = self._MARKER_HANDLERS.get(marker.code)
        if handler is not None:
            handler(self, marker)

    def _on_prompt_end(self, marker: Marker) -> None:  # B
        if self._phase is Phase.OUTPUT and self._guess is None and self.current_run is not None:
            # Our prompt, while a command was running and no end was reported: its
            # prompt hooks are gone (PROMPT_COMMAND replaced, precmd_functions=()).
            self._integration_lost_during_run(
                "the shell showed its prompt without reporting the command's end (its "
                "prompt hooks were changed: PROMPT_COMMAND, precmd_functions)"
            )
            return
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
            self._command_output_starts()
            run.mark_started()
        elif phase is Phase.PROMPT and run is None and self._submission is not Submission.CLAIMED:
            # Typed into the terminal through write(): it is a run all the same, and
            # the terminal is busy until it ends.
            run = TerminalRun(
                self.id,
                self._last_command_line or "",
                self._settings.run_output_cap,
                typed=True,
            )
            self._phase = Phase.OUTPUT
            self._command_output_starts()
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
                if self._submission is Submission.TYPED:  # the line was taken or dropped
                    self._submission = Submission.IDLE
                self._verified_cwd = True
                self._set_cwd(value)
            elif key == "BracketedPaste":
                self._bracketed_paste = value == "on"
            elif key == "IntegrationStarting":
                self._integration_seen = True
            elif key == "JobNotices" and value:  # bash's, taken before it printed them
                self._output(value.replace("\n", "\r\n").encode(), None, idle=True)
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

    _MARKER_HANDLERS: ClassVar[dict[str, Callable[[PhaseMachine, Marker], None]]] = {
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
            # Nothing ran: a syntax error, an empty or comment line.  Some line editors
            # (fish's) keep such a line for the user to fix: the next command must not
            # be typed after it.
            self._line_may_hold_text = True
            self._finish_current(
                self._ending_or(RunState.COMPLETED),
                output=screen_output(bytes(self._since_submission), drop_last_line=False),
                note="the shell ran nothing (no command-start marker: a syntax error, "
                "or an empty or comment line); output is what the screen showed",
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

    # -- a command that did not start ---------------------------------------------

    def _abandon_input(self, state: RunState, note: str, *, keep_screen: bool = True) -> None:
        """End a run whose command never started: clear the input line (Ctrl-U, Ctrl-C),
        await the next prompt, and keep what the screen showed as its output."""
        self._write(b"\x15\x03")
        self._phase = Phase.AWAITING_PROMPT
        screen = bytes(self._since_submission)
        output = screen_output(screen, drop_last_line=False) if keep_screen else None
        self._finish_current(state, output=output, note=note)

    # -- the shell is gone ----------------------------------------------------------

    def _shell_gone(self, status: int | None, signum: int | None) -> None:
        """The shell has exited (``status``) or was killed (``signum``): end the run,
        fail a start-up still awaited, wake every waiter, and close."""
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
