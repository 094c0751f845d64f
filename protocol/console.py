"""The person's terminal, for the CLI's ``run`` and ``attach``: raw mode, what they
type, its size, and one loop that serves all of it with the server's messages.

:func:`follow` handles the server's messages until ``done()``.  Signal handlers only
wake the loop (a pipe given to ``set_wakeup_fd``), so a Ctrl-C or a resize never
lands in the middle of reading a message.  With a terminal on stdin, :class:`Console`
puts it in raw mode (as ssh does): every key, Ctrl-C included, goes to the registry
terminal as typed, and the registry terminal's own line discipline does the rest.

Standard library only: the CLI starts once per command (see protocol/cli.py).
"""

from __future__ import annotations

import codecs
import contextlib
import os
import select
import signal
import sys
from collections.abc import Callable
from types import FrameType, TracebackType

from .blocking import BlockingClient

__all__ = ["Console", "follow", "say"]


def say(text: str, *, raw: bool = False, fresh_line: bool = False) -> None:
    """One line on stderr, ``[terminal-registry] text``; ``fresh_line``: on a line of
    its own even if the cursor stands after a prompt.  CRLF while raw: no output
    processing then turns LF into a new line."""
    end = "\r\n" if raw else "\n"
    sys.stderr.write(f"{end if fresh_line else ''}[terminal-registry] {text}{end}")
    sys.stderr.flush()


class Console:
    """stdin as a person's terminal: raw while in use, restored after; typed bytes
    decoded as UTF-8 across reads."""

    def __init__(self, fd: int = 0) -> None:
        self.fd = fd
        self.interactive = os.isatty(fd)
        self._saved: list[object] | None = None
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.eof = False

    def __enter__(self) -> Console:
        if self.interactive:
            # Imported only for a person's terminal: an agent's call pipes stdin.
            import termios
            import tty

            self._saved = termios.tcgetattr(self.fd)
            tty.setraw(self.fd, termios.TCSANOW)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._saved is not None:
            import termios

            with contextlib.suppress(termios.error, OSError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)  # type: ignore[arg-type]
            self._saved = None

    @property
    def raw(self) -> bool:
        return self._saved is not None

    def read(self) -> str:
        """What was typed (blocking only if nothing was); "" at end of input."""
        data = os.read(self.fd, 4096)
        if not data:
            self.eof = True
            return self._decoder.decode(b"", final=True)
        return self._decoder.decode(data)

    def size(self) -> tuple[int, int] | None:
        """(cols, rows) of the person's terminal; None when stdin is not one."""
        if not self.interactive:
            return None
        try:
            size = os.get_terminal_size(self.fd)
        except OSError:
            return None
        return (size.columns, size.lines) if size.columns and size.lines else None


def follow(
    client: BlockingClient,
    done: Callable[[], bool],
    interrupt: Callable[[], None],
    *,
    console: Console | None = None,
    typed: Callable[[str], None] | None = None,
    resized: Callable[[], None] | None = None,
) -> None:
    """Handle the server's messages until ``done()``.

    ``interrupt`` is called once per SIGINT; ``typed`` with what the person types on
    ``console`` (until its input ends); ``resized`` on SIGWINCH.
    """
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    caught: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        caught.append(signum)

    previous = {signal.SIGINT: signal.signal(signal.SIGINT, handler)}
    if resized is not None:
        previous[signal.SIGWINCH] = signal.signal(signal.SIGWINCH, handler)
    old_fd = signal.set_wakeup_fd(wake_write)
    try:
        while not done():
            sources = [client.fileno(), wake_read]
            if console is not None and typed is not None and not console.eof:
                sources.append(console.fd)
            readable, _, _ = select.select(sources, [], [])
            if wake_read in readable:
                os.read(wake_read, 512)
            while caught:
                signum = caught.pop(0)
                if signum == signal.SIGWINCH and resized is not None:
                    resized()
                else:
                    interrupt()
            if console is not None and typed is not None and console.fd in readable:
                text = console.read()
                if text or console.eof:
                    typed(text)
            if client.fileno() in readable:
                client.pump()
    finally:
        signal.set_wakeup_fd(old_fd)
        for signum, handling in previous.items():
            signal.signal(signum, handling)
        os.close(wake_read)
        os.close(wake_write)
