"""Strategy ``none``: running commands in a shell whose integration never came up.

Without markers nothing says where a command's output starts or where it ends, so
the end is guessed, and the run's note says so:

* the end: no output for ``none_quiet_timeout`` and a last line that is the
  shell's prompt -- the one it showed just before the command was typed, whatever its
  shape (a virtualenv's ``(venv) ``), or any line that looks like a prompt (it ends
  in ``$ # % > ❯ »``: the prompt may show the new cwd) -- a command that goes quiet
  on such a line is taken for finished;
* the output: what the screen showed since the command was typed, less the first
  line (the echo of what we typed) and the last (the prompt);
* the cwd: an unverified one (OSC 7 or 1337) counts only if it came with the prompt
  line, not in the middle of the command's output.

:func:`drive` runs one command so; it needs a few things of the shell terminal,
named by :class:`GuessingShell`.  The same screen trimming serves the rich strategy
when a command's start marker never came (:func:`screen_output`).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from typing import Protocol

from ..output import strip_escape_sequences
from ..run import TerminalRun

__all__ = [
    "GuessedRun",
    "GuessingShell",
    "OutputActivity",
    "drive",
    "ends_at_prompt",
    "last_line",
    "screen_output",
]

_PROMPT_LIKE = re.compile(r"[$#%>❯»]\s*$")


def screen_output(screen: bytes, drop_last_line: bool) -> bytes:
    """Output from what the screen showed: the echoed command line (and the prompt) cut.

    Used where markers could not delimit the output (strategy none, a command whose
    start marker never came).  The first line is the echo of what we typed.
    """
    start = screen.find(b"\n") + 1 if b"\n" in screen else len(screen)
    end = len(screen)
    if drop_last_line:
        last_newline = screen.rfind(b"\n")
        end = last_newline + 1 if last_newline >= start else start
    return screen[start:end]


def _lines(screen: bytes) -> list[str]:
    text = strip_escape_sequences(screen.decode("utf-8", "replace"))
    return [line.split("\r")[-1] for line in text.replace("\r\n", "\n").split("\n")]


def last_line(screen: bytes) -> str:
    """The line the cursor is on, as shown (escapes and overwritten text gone)."""
    return _lines(screen)[-1]


def ends_at_prompt(screen: bytes, prompt: str = "") -> bool:
    """The screen has moved past the echoed command line and now shows a prompt:
    ``prompt`` (the one learned before the command), or one that looks like one."""
    lines = _lines(screen)
    if len(lines) < 2:
        return False
    last = lines[-1]
    return (bool(prompt.strip()) and last.rstrip() == prompt.rstrip()) or (
        _PROMPT_LIKE.search(last) is not None
    )


class OutputActivity:
    """When a terminal's output last arrived, and waits for the next or for quiet."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self._event = asyncio.Event()
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def output(self) -> None:
        """Output arrived now."""
        self.last = time.monotonic()
        self._event.set()

    def close(self) -> None:
        """No more output will come: wake every waiter, for good."""
        self._closed = True
        self._event.set()

    async def next_output(self, timeout: float | None = None) -> None:
        """Return when output arrives (or on close), or after ``timeout`` seconds."""
        if self._closed:
            return
        self._event.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._event.wait(), timeout)

    async def quiet(self, window: float, deadline: float | None = None) -> None:
        """Return once no output has arrived for ``window`` seconds (or at deadline)."""
        while not self._closed:
            now = time.monotonic()
            wake = self.last + window
            if deadline is not None:
                wake = min(wake, deadline)
            if now >= wake:
                return
            await self.next_output(wake - now)


class GuessedRun:
    """One command run by heuristics: what it needs remembered until its end is guessed."""

    NOTE = "no shell integration: the end was guessed from quiet and a prompt"

    def __init__(self, run: TerminalRun, command: str) -> None:
        self.run = run
        self.command = command
        self._cwd: tuple[str, int] | None = None

    def cwd_reported(self, cwd: str, at: int) -> None:
        """An unverified cwd came ``at`` bytes into the screen.  Whether it came with
        the prompt or with the output is only known once the end is guessed."""
        self._cwd = (cwd, at)

    def outcome(self, screen: bytes) -> tuple[bytes, str | None]:
        """The run's output and, if one came with the prompt line, its cwd."""
        output = screen_output(screen, drop_last_line=True)
        if self._cwd is None:
            return output, None
        cwd, at = self._cwd
        return output, cwd if at >= screen.rfind(b"\n") + 1 else None


class GuessingShell(Protocol):
    """What :func:`drive` needs of the shell terminal (``ShellTerminal``) it drives."""

    @property
    def _activity(self) -> OutputActivity: ...

    def _interrupt_command(self) -> bool:
        """SIGINT to a command still running in the foreground; False if none runs."""

    def _write(self, data: bytes) -> None:
        """Write ``data`` to the shell as typed input."""

    def _submit_guessed(self, guess: GuessedRun) -> None:
        """Type the command: the screen starts afresh and the run's output with it."""

    def _screen_since_submission(self) -> bytes:
        """What the screen showed since the command was typed."""

    def _recent_screen(self) -> bytes:
        """The most recent output (what the screen shows now, at its end)."""

    def _end_guessed(self, guess: GuessedRun, output: bytes, cwd: str | None) -> None:
        """The end is guessed: finish the run with this output (and cwd, if any)."""


async def drive(shell: GuessingShell, guess: GuessedRun, window: float) -> None:
    """Clean the prompt, type the command, then wait for ``window`` of quiet on a
    prompt-like line."""
    activity = shell._activity
    if shell._interrupt_command():
        # Something still runs (the last guess was early): interrupt it first.
        await activity.quiet(window)
    # Ctrl-U clears a half-typed line; Ctrl-C at an idle prompt would race the
    # shell's SIGINT handling against the command we type next.
    shell._write(b"\x15")
    await activity.quiet(window)
    # The shell's prompt, as it stands now: the line a finished command returns to.
    prompt = last_line(shell._recent_screen()[-4096:])
    shell._submit_guessed(guess)
    run = guess.run
    while not run.done and not activity.closed:
        await activity.quiet(window)
        if ends_at_prompt(shell._screen_since_submission(), prompt):
            break
        await activity.next_output()
    if run.done:
        return
    output, cwd = guess.outcome(shell._screen_since_submission())
    shell._end_guessed(guess, output, cwd)
