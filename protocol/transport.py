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
from collections.abc import Callable

__all__ = ["CONGESTED_BYTES", "MAX_QUEUED_BYTES", "StreamWriterAdapter"]

#: Queued for a client beyond this, its output notifications are held back.
CONGESTED_BYTES = 4 * 1024 * 1024
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

    @property
    def queued(self) -> int:
        """Bytes written but not yet taken by the client."""
        return self._pending + self._transport.get_write_buffer_size()

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
