"""The writer behind each connection: batched, never blocking the loop, bounded.

pygls frames outgoing messages (``JsonRPCProtocol._send_data``) and hands them to a
writer; reading is ours (:mod:`protocol.framing`, fed by
:class:`protocol.connection.Connection`).

A client that stops reading must not grow the server without bound (measured before
this bound: ~1.9 KB per unread response, 940 MB in 40 s).  What waits for a client
is capped twice: past :data:`CONGESTED_BYTES` the connection is *congested* (its
output notifications are held back by the connection, which tells the client what
it missed once it reads again); past :data:`MAX_QUEUED_BYTES` the client is dropped
-- that connection only, never the others.
"""

from __future__ import annotations

import asyncio
import fcntl
import sys
import termios
from collections.abc import Callable

__all__ = ["CONGESTED_BYTES", "MAX_QUEUED_BYTES", "StreamWriterAdapter"]

#: Queued for a client beyond this, its output notifications are held back.  Small on
#: purpose: an answer waits behind everything queued before it (measured with 50
#: terminals printing ``yes``: a 4 MiB mark held a 1 ms request back ~1.3 s), and a
#: mirror cannot repaint from more than a terminal's replay buffer (256 KiB) anyway.
CONGESTED_BYTES = 256 * 1024
#: Queued for a client beyond this, it is disconnected.
MAX_QUEUED_BYTES = 64 * 1024 * 1024


class StreamWriterAdapter:
    """pygls's writer interface over an asyncio transport: writes never block the loop.

    Messages written during one turn of the event loop go out in one ``write`` at
    its end: a command's run produces a burst of notifications and a response, and
    one system call (and one wake-up of the client) for all of them is cheaper than
    one each.  A client that stops reading makes the transport buffer grow rather
    than stalling the server for every other client.
    """

    def __init__(
        self,
        transport: asyncio.WriteTransport,
        *,
        congested: int = CONGESTED_BYTES,
        limit: int = MAX_QUEUED_BYTES,
        on_overflow: Callable[[], None] | None = None,
    ) -> None:
        self._transport = transport
        self._chunks: list[bytes] = []
        self._pending = 0
        self._loop = asyncio.get_running_loop()
        self._congested_at = congested
        self._limit = limit
        self._on_overflow = on_overflow
        # Unread bytes in the kernel: SIOCOUTQ (= TIOCOUTQ) for a socket, FIONREAD
        # on a pipe (Linux answers it on either end).
        sock = transport.get_extra_info("socket")
        pipe = transport.get_extra_info("pipe")
        self._fd = -1
        self._unread_request = termios.TIOCOUTQ
        if sock is not None:
            self._fd = sock.fileno()
        elif pipe is not None and hasattr(pipe, "fileno"):
            self._fd = pipe.fileno()
            self._unread_request = termios.FIONREAD

    @property
    def queued(self) -> int:
        """Bytes written but not yet taken by the client: ours, the transport's, and
        what sits in the kernel's socket or pipe buffer (hundreds of KiB on a Unix
        socket: an answer waits behind those too)."""
        return self._pending + self._transport.get_write_buffer_size() + self._in_kernel()

    def _in_kernel(self) -> int:
        if self._fd < 0:
            return 0
        try:
            data = fcntl.ioctl(self._fd, self._unread_request, b"\0\0\0\0")
        except OSError:
            self._fd = -1  # not a socket or pipe that says: count without it
            return 0
        return int.from_bytes(data, sys.byteorder, signed=True)

    def congested(self, adding: int = 0) -> bool:
        """Whether ``adding`` more bytes would leave more than the congestion mark queued."""
        return self.queued + adding > self._congested_at

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            return
        if not self._chunks:
            self._loop.call_soon(self._flush)
        self._chunks.append(data)
        self._pending += len(data)
        if self.queued > self._limit:
            self._overflow()

    def _flush(self) -> None:
        chunks, self._chunks = self._chunks, []
        self._pending = 0
        if chunks and not self._transport.is_closing():
            self._transport.write(b"".join(chunks))

    def _overflow(self) -> None:
        self._chunks.clear()
        self._pending = 0
        self._transport.abort()  # what is queued would never be read: drop it
        if self._on_overflow is not None:
            self._on_overflow()

    def close(self) -> None:
        self._flush()
        if not self._transport.is_closing():
            self._transport.close()
