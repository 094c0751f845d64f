"""An asynchronous PTY: one child process on a pseudo-terminal, driven from the loop.

Spawning goes through pexpect, which forks through ptyprocess: a new PTY, a new
session with the PTY as its controlling terminal, the window size set before exec.
pexpect's blocking ``expect()`` is not used: from then on the master fd is
non-blocking, reads are ``loop.add_reader`` callbacks that hand each chunk to the
owner, and what the PTY does not take at once waits in a queue flushed by
``loop.add_writer``.

No policy lives here: nothing of shells, markers or runs, nor when to signal whom.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import struct
import termios
from collections.abc import Callable, Mapping, Sequence

import pexpect

__all__ = ["READ_SIZE", "AsyncPty", "spawn_child"]

#: Bytes asked for per read: a busy command fills a few reads per loop iteration.
READ_SIZE = 256 * 1024


def spawn_child(
    argv: Sequence[str],
    *,
    env: Mapping[str, str],
    cwd: str,
    rows: int,
    cols: int,
    preexec_fn: Callable[[], None],
) -> pexpect.spawn:
    """Start ``argv`` on a new PTY (echo on), with pexpect's close delays zeroed.

    Raises :class:`OSError` when it cannot start.
    """
    parent = os.getpid()
    try:
        child = pexpect.spawn(
            argv[0],
            list(argv[1:]),
            env=dict(env),
            cwd=cwd,
            dimensions=(rows, cols),
            preexec_fn=preexec_fn,
            echo=True,
        )
    except BaseException as error:
        if os.getpid() != parent:
            # We are the forked child: ptyprocess lets an error between fork and
            # exec (a cwd that vanished, a window size the tty refuses) escape its
            # child branch, and returning from here would run on as a second copy
            # of the server.  Exit as exec failing would.
            os._exit(127)
        if isinstance(error, pexpect.ExceptionPexpect):  # "command not found", mostly
            raise OSError(str(error)) from error
        raise
    # close() sleeps ``delayafterclose`` (0.1 s) after closing the fd and terminate()
    # sleeps ``delayafterterminate`` (0.1 s) between its signals: time.sleep on the
    # loop's thread.  Our callers await the process's exit themselves before closing
    # (processes.wait_gone), so close() has only to reap.  pexpect keeps one pair of
    # delays and ptyprocess, which does the closing, another: zero both.
    child.delayafterclose = 0
    child.delayafterterminate = 0
    child.ptyproc.delayafterclose = 0
    child.ptyproc.delayafterterminate = 0
    return child


class AsyncPty:
    """A child process on a PTY, read and written without blocking the event loop.

    Wrap a child from :func:`spawn_child`, then :meth:`start_reading`; end with
    :meth:`close`.
    """

    def __init__(self, child: pexpect.spawn) -> None:
        self._loop = asyncio.get_running_loop()
        self._child = child
        #: The master side of the PTY.
        self.fd: int = child.child_fd
        #: The child's process id (a session leader: its process group id too).
        self.pid: int = child.pid
        self._pending = bytearray()
        self._reading = False
        self._closed = False
        self.exit_status: int | None = None
        self.exit_signal: int | None = None
        os.set_blocking(self.fd, False)

    @property
    def closed(self) -> bool:
        return self._closed

    # -- reading ------------------------------------------------------------------

    def start_reading(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        """Hand every chunk read to ``on_data``; call ``on_eof`` once the child's side
        is gone (its last process closed the PTY: it exited, or was killed)."""

        def readable() -> None:
            try:
                data = os.read(self.fd, READ_SIZE)
            except BlockingIOError:
                return
            except OSError:
                data = b""  # EIO: Linux's word for end-of-file on a PTY master
            if data:
                on_data(data)
            else:
                self.stop_reading()
                on_eof()

        self._loop.add_reader(self.fd, readable)
        self._reading = True

    def stop_reading(self) -> None:
        if self._reading:
            self._reading = False
            self._loop.remove_reader(self.fd)

    # -- writing ------------------------------------------------------------------

    def write(self, data: bytes) -> None:
        """Write without blocking; what the PTY does not take now goes out later, in
        order.  Writes after the PTY has closed are dropped."""
        if self._closed or not data:
            return
        if self._pending:
            self._pending += data
            return
        try:
            written = os.write(self.fd, data)
        except BlockingIOError:
            written = 0
        except OSError:
            return
        if written < len(data):
            self._pending += data[written:]
            self._loop.add_writer(self.fd, self._flush)

    def _flush(self) -> None:
        try:
            written = os.write(self.fd, self._pending)
        except BlockingIOError:
            return
        except OSError:
            written = len(self._pending)  # the child's side is gone: drop it
        del self._pending[:written]
        if not self._pending:
            self._loop.remove_writer(self.fd)

    # -- the terminal -------------------------------------------------------------

    def getwinsize(self) -> tuple[int, int]:
        """(rows, cols) of the PTY."""
        rows, cols = self._child.getwinsize()
        return (rows, cols)

    def setwinsize(self, rows: int, cols: int) -> None:
        """Resize the PTY; the kernel sends SIGWINCH to its foreground process group."""
        if not self._closed:
            self._child.setwinsize(rows, cols)

    def unread(self) -> int:
        """Bytes the child wrote that we have not read yet (0 when unknown)."""
        try:
            data = fcntl.ioctl(self.fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return 0
        return int(struct.unpack("i", data)[0])

    def foreground_process_group(self) -> int:
        """The PTY's foreground process group; -1 when it cannot be read."""
        try:
            return os.tcgetpgrp(self.fd)
        except OSError:
            return -1

    # -- ending -------------------------------------------------------------------

    def close(self) -> None:
        """Close the master fd and reap the child (SIGKILL if it still lives).

        Callers end the child gracefully first; this only makes sure. Afterwards
        :attr:`exit_status` or :attr:`exit_signal` says how it ended.
        """
        if self._closed:
            return
        self.stop_reading()
        if self._pending:
            self._pending.clear()
            self._loop.remove_writer(self.fd)
        self._closed = True
        with contextlib.suppress(Exception):
            self._child.close(force=True)
        self.exit_status = self._child.exitstatus
        self.exit_signal = self._child.signalstatus
