"""The writer behind each connection: batched, never blocking the event loop.

pygls frames outgoing messages (``JsonRPCProtocol._send_data``) and hands them to a
writer; reading is ours (:mod:`protocol.framing`, fed by
:class:`protocol.connection.Connection`).
"""

from __future__ import annotations

import asyncio

__all__ = ["StreamWriterAdapter"]


class StreamWriterAdapter:
    """pygls's writer interface over an asyncio transport: writes never block the loop.

    Messages written during one turn of the event loop go out in one ``write`` at
    its end: a command's run produces a burst of notifications and a response, and
    one system call (and one wake-up of the client) for all of them is cheaper than
    one each.  A client that stops reading makes the transport buffer grow rather
    than stalling the server for every other client.
    """

    def __init__(self, transport: asyncio.WriteTransport) -> None:
        self._transport = transport
        self._chunks: list[bytes] = []
        self._loop = asyncio.get_running_loop()

    def write(self, data: bytes) -> None:
        if self._transport.is_closing():
            return
        if not self._chunks:
            self._loop.call_soon(self._flush)
        self._chunks.append(data)

    def _flush(self) -> None:
        chunks, self._chunks = self._chunks, []
        if chunks and not self._transport.is_closing():
            self._transport.write(b"".join(chunks))

    def close(self) -> None:
        self._flush()
        if not self._transport.is_closing():
            self._transport.close()
