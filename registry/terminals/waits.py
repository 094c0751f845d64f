"""A PTY terminal's wait-state: its screen model, its watcher, and who awaits them.

:class:`WaitTracking` is the part of a shell terminal that knows whether the
command waits for input, a password or a key in a full-screen program
(:mod:`registry.waiting`).  The terminal tells it four things, in the order they
happen: each chunk of output (markers removed), each write of ours, when a
command's own output starts (so the prompt line never comes from the echoed
command line), and when "a command is running" changes.  It keeps:

* the :class:`~registry.screen.ScreenModel` (modes, the cursor row) and the
  :class:`~registry.waiting.WaitWatcher` that decides;
* when a look last confirmed the state, and when we last wrote: a waiting state
  confirmed before our last write may be stale -- the write may have answered it --
  so :meth:`fresh` leaves it out until the watcher has looked again (it does, 100 ms
  after the write's echo went quiet).  ``terminal/wait`` resolves on fresh states
  only, never on the one the answer was written to;
* an event set after every look, which :meth:`until_waiting` waits on.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Sequence

from ..keys import key_bytes
from ..screen import ScreenModel
from ..waiting import Check, TerminalState, WaitState, WaitWatcher, WatchSettings

__all__ = ["WaitTracking"]

#: Bytes of screen kept to tell the shell's prompt (a prompt is a line or two).
_PROMPT_TAIL = 2048

#: States in which a command waits for someone (what ``yieldOnInput`` yields on).
_WAITING = frozenset(
    {
        TerminalState.WAITING_FOR_INPUT,
        TerminalState.WAITING_FOR_PASSWORD,
        TerminalState.FULL_SCREEN,
    }
)


class WaitTracking:
    """One PTY's wait-state. Create inside the event loop; :meth:`close` at the end."""

    def __init__(
        self,
        master_fd: int,
        shell_pid: int,
        size: tuple[int, int],
        command_running: Callable[[], bool],
        on_change: Callable[[WaitState], None],
        settings: WatchSettings | None = None,
    ) -> None:
        cols, rows = size
        self.screen = ScreenModel(cols, rows)
        self._command_running = command_running
        self._on_change = on_change
        self._last_write = -math.inf
        self._confirmed = -math.inf
        self._looked = asyncio.Event()
        self._echo_pending = False
        self._closed = False
        #: The screen's tail when the last command was typed: its cursor row was the
        #: shell's own prompt (rendered only when asked).
        self._before_command = b""
        self._watcher = WaitWatcher(
            master_fd,
            shell_pid,
            self.screen,
            command_running,
            self._changed,
            settings=settings,
            on_check=self._checked,
        )

    @property
    def state(self) -> WaitState:
        """The watcher's latest verdict (may lag the terminal by one look)."""
        return self._watcher.state

    # -- what the terminal tells us ---------------------------------------------------

    def output(self, data: bytes) -> None:
        """Output arrived (markers removed), in order with :meth:`command_started`."""
        if self._echo_pending:
            newline = data.find(b"\n")
            if newline >= 0:
                # The echoed command line ends here: the command's output follows.
                self.screen.feed(data[: newline + 1])
                self.screen.mark_command_start()
                self._echo_pending = False
                data = data[newline + 1 :]
        self.screen.feed(data)
        self._watcher.note_output()

    def wrote(self) -> None:
        """We wrote to the PTY: a command line, an answer, keys."""
        self._last_write = time.monotonic()
        self._watcher.note_write()

    def echo_follows(self) -> None:
        """A command line was typed without markers to delimit it (strategy none): its
        output starts after the echo's line break."""
        self._echo_pending = True

    def command_started(self) -> None:
        """The command's own output starts here (a C marker)."""
        self._echo_pending = False
        self.screen.mark_command_start()

    def command_changed(self) -> None:
        """Whether a command is running changed (the marker phase moved)."""
        self._watcher.note_command()

    def resize(self, cols: int, rows: int) -> None:
        self.screen.resize(cols, rows)

    def remember_prompt(self) -> None:
        """A command line is about to be typed at the shell's prompt: keep the screen's
        tail (cheap) so that the prompt can be told later (:meth:`shell_prompt`)."""
        self._before_command = self.screen.recent()[-_PROMPT_TAIL:]

    def shell_prompt(self) -> str:
        """The cursor row when the last command was typed: the shell's own prompt."""
        cols, rows = self.screen.size
        screen = ScreenModel(cols, rows)
        screen.feed(self._before_command)
        return screen.prompt_line()

    def line_editor_reads(self) -> bool:
        """The terminal is in raw mode (no canonical input): a line editor (the
        shell's own, a REPL's) reads it, not a plain ``read``."""
        modes = self._watcher.probe.terminal_modes()
        return modes is not None and not modes[1]

    def key_bytes(self, keys: Sequence[str]) -> bytes:
        """``keys`` as this terminal expects them: arrows in its cursor-key mode,
        Backspace as its erase character."""
        erase = self._watcher.probe.erase_character()
        return key_bytes(keys, application_cursor=self.screen.application_cursor, erase=erase)

    # -- what waiters ask -------------------------------------------------------------

    def fresh(self) -> WaitState | None:
        """The waiting state, if a look made since our last write says so."""
        state = self._watcher.state
        if state.state in _WAITING and self._confirmed >= self._last_write:
            return state
        return None

    async def until_waiting(self) -> WaitState:
        """Return the state once :meth:`fresh` has one (cancel to stop waiting)."""
        while True:
            state = self.fresh()
            if state is not None and self._command_running():
                return state
            if self._closed:
                await asyncio.get_running_loop().create_future()  # never: cancel it
            self._looked.clear()
            await self._looked.wait()

    def close(self) -> None:
        self._closed = True
        self._watcher.close()
        self._looked.set()

    # -- from the watcher ---------------------------------------------------------------

    def _checked(self, check: Check) -> None:
        # Called before the watcher applies the verdict; waiters woken by the event
        # run later, when the state is the new one.
        if check.decision.state is not None:
            self._confirmed = check.at
        self._looked.set()

    def _changed(self, state: WaitState) -> None:
        self._on_change(state)
