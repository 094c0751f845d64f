"""The stdio connection's two ends as asyncio objects, whatever fds 0 and 1 are.

An editor gives the server pipes, which asyncio polls.  A person may give it anything
else: a recorded session replayed from a file (``serve --stdio < session``), answers
written to a file, ``/dev/null``.  epoll refuses regular files (EPERM) and so does it
``/dev/null``, and asyncio's pipe transports refuse regular files outright -- before
this module the server was left hung on such a start.  Those ends get transports of
their own here: reads in a worker thread (a regular file's read does not wait for
anyone), writes written through (a disk write is not held up by a reader).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import stat
from typing import Any

__all__ = ["open_stdio"]

_READ_SIZE = 2**16


def _pollable(fd: int) -> bool:
    """Whether epoll accepts ``fd`` (pipes, sockets, terminals; not files, /dev/null)."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return False
    poller = select.epoll()
    try:
        poller.register(fd, select.EPOLLIN)
    except PermissionError:
        return False
    finally:
        poller.close()
    return True


class _ThreadReadTransport(asyncio.ReadTransport):
    """Reads ``fd`` in the loop's executor and hands the data to ``protocol``.

    Flow control is asyncio's own: the stream reader pauses us past its limit.
    """

    def __init__(self, fd: int, protocol: asyncio.Protocol) -> None:
        super().__init__()
        self._fd = fd
        self._protocol = protocol
        self._reading = asyncio.Event()
        self._reading.set()
        self._closing = False
        protocol.connection_made(self)
        self._pump = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        error: Exception | None = None
        try:
            while not self._closing:
                await self._reading.wait()
                data = await loop.run_in_executor(None, os.read, self._fd, _READ_SIZE)
                if not data:
                    if not self._protocol.eof_received():
                        self.close()
                    return
                self._protocol.data_received(data)
        except OSError as exc:
            error = exc
        finally:
            self._closing = True
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._protocol.connection_lost(error)

    def pause_reading(self) -> None:
        self._reading.clear()

    def resume_reading(self) -> None:
        self._reading.set()

    def is_reading(self) -> bool:
        return self._reading.is_set() and not self._closing

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        # A read under way ends by itself (a file's read does not block); the next
        # turn of the pump sees this and stops.
        self._closing = True
        self._reading.set()


class _FileWriteTransport(asyncio.WriteTransport):
    """Writes through to ``fd`` (a regular file: a write there is never held up)."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def get_write_buffer_size(self) -> int:
        return 0

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            os.close(self._fd)

    def abort(self) -> None:
        self.close()

    def can_write_eof(self) -> bool:
        return False

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return default


async def open_stdio(
    in_fd: int, out_fd: int, *, limit: int
) -> tuple[asyncio.StreamReader, asyncio.WriteTransport]:
    """A stream reader over ``in_fd`` and a write transport over ``out_fd`` (both ours)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    protocol = asyncio.StreamReaderProtocol(reader)
    if _pollable(in_fd):
        await loop.connect_read_pipe(lambda: protocol, os.fdopen(in_fd, "rb", 0))
    else:
        _ThreadReadTransport(in_fd, protocol)
    transport: asyncio.WriteTransport
    if stat.S_ISREG(os.fstat(out_fd).st_mode):
        transport = _FileWriteTransport(out_fd)
    else:
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(out_fd, "wb", 0))
    return reader, transport
