"""pygls's dispatch of a message read, without its ``isinstance`` tests.

``JsonRPCProtocol.handle_message`` tells requests, notifications, answers and errors
apart with ``isinstance`` against runtime-checkable Protocols: on Python 3.11 each
test recomputes the Protocol's attributes, about 40 µs, and a notification takes
two, an answer three.  Those tests were the largest cost of a small request on the
server, and of every notification a client hears (a client of a busy server hears
every terminal's).  The messages are pygls's own attrs classes, built by its
``structure_message``, so their fields say what they are.

Shared by the server's connections (:mod:`protocol.connection`) and the Python
client (:mod:`protocol.client`); imports nothing of the server.
"""

from __future__ import annotations

import contextvars
from typing import Any

from pygls.protocol import JsonRPCProtocol

__all__ = ["ClientProtocol", "FastDispatch"]


class FastDispatch:
    """Mixin for a ``JsonRPCProtocol``: dispatch a structured message by its fields."""

    _handle_request: Any
    _handle_notification: Any
    _handle_response: Any

    def handle_message(self, message: Any) -> None:
        ctx = contextvars.copy_context()
        if hasattr(message, "method"):
            if hasattr(message, "id"):
                ctx.run(self._handle_request, message.id, message.method, message.params)
            else:
                ctx.run(self._handle_notification, message.method, message.params)
        elif hasattr(message, "error"):
            ctx.run(self._handle_response, message.id, None, message.error)
        else:
            ctx.run(self._handle_response, message.id, message.result)


class ClientProtocol(FastDispatch, JsonRPCProtocol):
    """The client's protocol: pygls's, with :class:`FastDispatch`."""
