"""A raw JSON-RPC peer for end-to-end tests: the real server process over its real
transport, spoken to byte for byte (so malformed input can be sent as it is)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import psutil

from protocol.framing import FramingError, MessageFramer

SERVER = [sys.executable, "-m", "protocol.cli", "serve"]
TIMEOUT = 30.0


def frame(body: bytes) -> bytes:
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


class RawPeer:
    """Messages in, messages out; notifications kept in arrival order."""

    def __init__(self, reader: asyncio.StreamReader, writer: Any) -> None:
        self._reader = reader
        self._writer = writer
        self._framer = MessageFramer()
        self._inbox: list[dict[str, Any]] = []
        self.notifications: list[dict[str, Any]] = []
        self._ids = 0

    def send_raw(self, data: bytes) -> None:
        self._writer.write(data)

    def send(self, message: dict[str, Any]) -> None:
        self.send_raw(frame(json.dumps(message).encode()))

    def request(self, method: str, params: Any = None, *, with_params: bool = True) -> int:
        self._ids += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self._ids, "method": method}
        if with_params:
            message["params"] = params
        self.send(message)
        return self._ids

    def notify(self, method: str, params: Any = None) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    async def _next(self) -> dict[str, Any]:
        while not self._inbox:
            data = await asyncio.wait_for(self._reader.read(65536), TIMEOUT)
            if not data:
                raise EOFError("the server closed the connection")
            for item in self._framer.feed(data):
                assert not isinstance(item, FramingError), item
                self._inbox.append(json.loads(item))
        return self._inbox.pop(0)

    async def response(self, msg_id: int | None) -> dict[str, Any]:
        """The response with this id (None: an error response without an id)."""
        while True:
            message = await self._next()
            if "method" in message and "id" not in message:
                self.notifications.append(message)
                continue
            if message.get("id") == msg_id:
                return message
            if "method" in message:  # a request from the server: not expected here
                continue
            raise AssertionError(f"unexpected response {message} while waiting for {msg_id}")

    async def call(self, method: str, params: Any = None) -> Any:
        reply = await self.response(self.request(method, params))
        assert "error" not in reply, reply
        return reply["result"]

    async def error(self, method: str, params: Any = None) -> dict[str, Any]:
        reply = await self.response(self.request(method, params))
        assert "error" in reply, reply
        return dict(reply["error"])

    async def notification(self, method: str, **match: Any) -> dict[str, Any]:
        """The first notification (seen or next) named ``method`` with matching params."""
        index = 0
        while True:
            while index < len(self.notifications):
                note = self.notifications[index]
                index += 1
                params = note.get("params") or {}
                if note["method"] == method and all(params.get(k) == v for k, v in match.items()):
                    return dict(params)
            message = await self._next()
            if "id" in message and "method" not in message:
                raise AssertionError(f"unexpected response {message}")
            self.notifications.append(message)

    async def initialize(self, options: dict[str, Any] | None = None) -> dict[str, Any]:
        result = await self.call(
            "initialize",
            {"processId": os.getpid(), "capabilities": {}, "initializationOptions": options},
        )
        self.notify("initialized", {})
        return dict(result)


def _server_log() -> Any:
    """Where the server's stderr goes: $TR_SERVER_LOG when debugging, else nowhere."""
    path = os.environ.get("TR_SERVER_LOG")
    return open(path, "ab") if path else asyncio.subprocess.DEVNULL


class StdioServer(RawPeer):
    """``terminal-registry serve --stdio`` as a child process."""

    process: asyncio.subprocess.Process

    @classmethod
    async def start(cls, *extra: str) -> StdioServer:
        process = await asyncio.create_subprocess_exec(
            *SERVER,
            "--stdio",
            *(["--log-level", "DEBUG"] if os.environ.get("TR_SERVER_LOG") else []),
            *extra,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=_server_log(),
        )
        assert process.stdout is not None
        assert process.stdin is not None
        peer = cls(process.stdout, process.stdin)
        peer.process = process
        return peer

    def descendants(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            return []

    async def stop(self) -> int:
        if self.process.returncode is None:
            with contextlib.suppress(EOFError, ConnectionError, AssertionError, TimeoutError):
                await self.response(self.request("shutdown"))
            with contextlib.suppress(ConnectionError):
                self.notify("exit")
            try:
                await asyncio.wait_for(self.process.wait(), TIMEOUT)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode or 0


async def serve_socket(path: Any, *extra: str) -> asyncio.subprocess.Process:
    """``terminal-registry serve --socket PATH``, returned once it listens."""
    read_end, write_end = os.pipe()
    process = await asyncio.create_subprocess_exec(
        *SERVER,
        "--socket",
        str(path),
        *extra,
        "--ready-fd",
        str(write_end),
        pass_fds=(write_end,),
        stdin=asyncio.subprocess.DEVNULL,
        stderr=_server_log(),
    )
    os.close(write_end)
    ready = await asyncio.to_thread(os.read, read_end, 16)
    os.close(read_end)
    assert ready.startswith(b"ready"), ready
    return process


async def connect_socket(path: str) -> RawPeer:
    reader, writer = await asyncio.open_unix_connection(path)
    return RawPeer(reader, writer)


def alive(procs: list[psutil.Process]) -> list[psutil.Process]:
    living = []
    for proc in procs:
        try:
            if proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE:
                living.append(proc)
        except psutil.Error:
            continue
    return living


def tokened_sleeps(token: str) -> list[psutil.Process]:
    """The `sleep`s whose argument ends with ``.<token>``: a test's own, found by the tag
    it put in their argv, never by name across the machine."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if cmdline[:1] == ["sleep"] and cmdline[1:2] and cmdline[1].endswith(f".{token}"):
            found.append(proc)
    return found


@contextlib.asynccontextmanager
async def serving(options: dict[str, Any] | None = None) -> AsyncIterator[StdioServer]:
    """A server over stdio, initialised with ``options``; shut down after."""
    peer = await StdioServer.start()
    await peer.initialize(options)
    yield peer
    await peer.stop()
