"""A small blocking client over a Unix socket: what the CLI speaks through.

The CLI starts once per command a person or an agent types, so its start-up is the
cost that matters: this client needs only the standard library's ``_socket`` and
``json`` and our import-free tables (:mod:`protocol.methods`,
:mod:`protocol.errors`, :mod:`protocol.framing`) -- no asyncio, no pygls, no
lsprotocol, no attrs (together ~0.5 s of imports; see bench/bench_cli.py).  Agents
written in Python use the asyncio client, :mod:`protocol.client`.

Results and notifications are the plain JSON of docs/protocol.md.  Notifications
that arrive while a request waits for its answer go to the callbacks registered
with :meth:`BlockingClient.on`, in order.
"""

from __future__ import annotations

import _socket
import contextlib
import json
import os
from collections.abc import Callable
from typing import Any

from . import methods
from .errors import error_for
from .framing import FramingError, MessageFramer, frame

__all__ = ["BlockingClient", "ConnectionLost"]


class ConnectionLost(ConnectionError):
    """The server closed the connection (or never answered)."""


class BlockingClient:
    """One connection to a server's Unix socket, initialised on :meth:`connect`."""

    def __init__(self, sock: _socket.socket) -> None:
        self._sock = sock
        self._framer = MessageFramer()
        self._answers: dict[int, dict[str, Any]] = {}
        #: Requests whose answers nobody collects (keys typed through to a terminal).
        self._forgotten: set[int] = set()
        self._ids = 0
        self._callbacks: dict[str, list[Callable[[Any], None]]] = {}
        self.capabilities: dict[str, Any] = {}

    @classmethod
    def connect(cls, path: str, settings: dict[str, Any] | None = None) -> BlockingClient:
        """Connect to ``path`` and ``initialize``; OSError if nothing listens there."""
        # ``_socket``, the C module ``socket`` wraps: its socket has every call used
        # here, and importing ``socket`` itself (its enums of constants, selectors)
        # took ~4 ms, 7% of Python's own start-up, on every CLI call.
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            raise
        client = cls(sock)
        result = client.request(
            methods.INITIALIZE,
            {
                "processId": os.getpid(),
                "capabilities": {},
                "clientInfo": {"name": "terminal-registry-cli"},
                "initializationOptions": settings or {},
            },
        )
        client.capabilities = (result.get("capabilities") or {}).get("experimental") or {}
        client.notify(methods.INITIALIZED, {})
        return client

    def close(self) -> None:
        """Leave: the server ends this connection (a socket server goes on serving)."""
        with contextlib.suppress(OSError):
            self._sock.close()

    def __enter__(self) -> BlockingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- sending ------------------------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        self._sock.sendall(frame(json.dumps(message).encode()))

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    def send_request(self, method: str, params: Any) -> int:
        """Send a request without waiting; :meth:`answer` collects its answer."""
        self._ids += 1
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids

    def send_and_forget(self, method: str, params: Any) -> None:
        """Send a request whose answer is dropped when it arrives."""
        self._forgotten.add(self.send_request(method, params))

    def request(self, method: str, params: Any) -> Any:
        """Send a request and return its result; an error answer raises its exception."""
        return self.answer(self.send_request(method, params))

    def answer(self, msg_id: int) -> Any:
        """Wait for the answer to ``msg_id`` (dispatching notifications meanwhile)."""
        while msg_id not in self._answers:
            self.pump()
        reply = self._answers.pop(msg_id)
        if "error" in reply:
            error = reply["error"] or {}
            raise error_for(int(error.get("code", 0)), str(error.get("message", "")))
        return reply.get("result")

    # -- receiving ----------------------------------------------------------------

    def on(self, method: str, callback: Callable[[Any], None]) -> None:
        """Call ``callback(params)`` for every notification named ``method``."""
        self._callbacks.setdefault(method, []).append(callback)

    def pump(self) -> None:
        """Read once (blocking) and handle what arrived. ConnectionLost at end of stream."""
        data = self._sock.recv(1 << 20)
        if not data:
            raise ConnectionLost("the server closed the connection")
        for item in self._framer.feed(data):
            if isinstance(item, FramingError):
                raise ConnectionLost(f"the server sent a malformed message: {item.message}")
            message = json.loads(item)
            if "method" in message and "id" not in message:
                for callback in self._callbacks.get(message["method"], []):
                    callback(message.get("params"))
            elif "id" in message and "method" not in message:
                if message["id"] in self._forgotten:
                    self._forgotten.discard(message["id"])
                else:
                    self._answers[message["id"]] = message
            # A request from the server: we offer no capabilities it could use.

    def fileno(self) -> int:
        """For ``select``: readable when :meth:`pump` will not block."""
        return self._sock.fileno()
