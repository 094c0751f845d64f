"""stdin and stdout for the MCP SDK's stdio transport, read and written on the event loop.

The SDK's ``stdio_server()`` does MCP's framing (a JSON-RPC message per line) over two
async text files, by default ``anyio.wrap_file`` around the standard streams -- which
hands every line read and every write and flush to a worker thread.  A tool call then
pays three thread hand-offs, about 2 ms of a 5-7 ms call on this project's loaded
2-core VM (bench/bench_mcp.py), and a read blocked in its thread keeps the server
from ever finishing while stdin stays open.  ``stdio_server(stdin=..., stdout=...)``
takes any object that reads lines and writes text; these two are asyncio pipe
streams, so the framing stays the SDK's.

As the SDK's default does (and our JSON-RPC server, :func:`~protocol.listen.claim_stdio`),
the streams are private copies of fds 0 and 1; the real fd 0 becomes /dev/null and fd 1
points at stderr, so nothing else can write into the protocol stream.
"""

from __future__ import annotations

import asyncio
import os

from .listen import claim_stdio

__all__ = ["LineReader", "TextWriter", "open_stdio"]

#: A line longer than this is dropped (answered as a parse error), not buffered.
MAX_LINE = 64 * 1024 * 1024


class LineReader:
    """Lines of text from a pipe: ``async for line in reader`` (ends at EOF)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> LineReader:
        return self

    async def __anext__(self) -> str:
        try:
            line = await self._reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as error:
            line = error.partial  # the last line, without its newline, then EOF
        except asyncio.LimitOverrunError as error:
            await self._skip_line(error.consumed)
            return "{oversized message dropped}\n"  # not JSON: the SDK reports it
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")

    async def _skip_line(self, consumed: int) -> None:
        await self._reader.readexactly(consumed)
        while True:
            try:
                await self._reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as error:
                await self._reader.readexactly(error.consumed)
            except asyncio.IncompleteReadError:
                return


class TextWriter:
    """Text to a pipe; ``flush`` waits while the reader is behind (flow control)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> int:
        self._writer.write(text.encode("utf-8"))
        return len(text)

    async def flush(self) -> None:
        await self._writer.drain()


async def open_stdio() -> tuple[LineReader, TextWriter]:
    """Claim fds 0 and 1 and wrap private copies of them."""
    loop = asyncio.get_running_loop()
    in_fd, out_fd = claim_stdio()
    reader = asyncio.StreamReader(limit=MAX_LINE, loop=loop)
    await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader, loop=loop), os.fdopen(in_fd, "rb", 0)
    )
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader(loop=loop), loop=loop),
        os.fdopen(out_fd, "wb", 0),
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    return LineReader(reader), TextWriter(writer)
