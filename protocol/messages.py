"""What a connection accepts, and what a failure becomes: pure decisions, no I/O.

:func:`check` takes one framed message as it came off the wire and returns either
the decoded message, to dispatch, or a :class:`Refusal`: the error to answer with
(``"id": null`` when the message's own id is unusable), or a drop to log for a
notification that cannot be answered.  :func:`as_rpc_error` maps what a handler
raised -- one of our protocol errors, or one of the engine's -- to the error its
client gets.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from registry import errors as engine

from . import methods
from .errors import (
    ErrorCode,
    InternalError,
    InvalidParamsError,
    RegistryError,
    SpawnFailedError,
    TerminalBusyError,
    UnknownTerminalError,
)
from .framing import FramingError

__all__ = ["Refusal", "as_rpc_error", "check"]

#: What a client may send before ``initialize``.
_BEFORE_INITIALIZE = frozenset({methods.INITIALIZE, methods.EXIT})


@dataclass(frozen=True)
class Refusal:
    """A message not to dispatch: answered with ``code`` (if ``answer``), else dropped."""

    code: int
    message: str
    msg_id: Any = None
    answer: bool = True


def check(
    frame: bytes | FramingError, *, shutting_down: bool, initialized: bool
) -> dict[str, Any] | Refusal:
    """The decoded message if it may be dispatched; else why not."""
    if isinstance(frame, FramingError):
        return Refusal(ErrorCode.ParseError, frame.message)
    try:
        data = json.loads(frame)
    except RecursionError:
        # Not a ValueError: json gives up on deep nesting by recursing too far.
        return Refusal(ErrorCode.ParseError, "malformed JSON: nested too deeply")
    except ValueError as error:
        return Refusal(ErrorCode.ParseError, f"malformed JSON: {error}")
    if isinstance(data, list):
        return Refusal(ErrorCode.InvalidRequest, "batch requests are not supported")
    if not isinstance(data, dict):
        return Refusal(ErrorCode.InvalidRequest, "a message must be a JSON object")
    msg_id = data.get("id")
    if msg_id is not None and not _valid_id(msg_id):
        return Refusal(ErrorCode.InvalidRequest, "id must be a string or an integer")
    if data.get("jsonrpc") != "2.0":
        return Refusal(ErrorCode.InvalidRequest, 'jsonrpc must be "2.0"', msg_id)
    method = data.get("method")
    if method is None:
        if "id" in data and ("result" in data or "error" in data):
            return data  # a response to one of our requests
        return Refusal(ErrorCode.InvalidRequest, "a request needs a method", msg_id)
    if not isinstance(method, str):
        return Refusal(ErrorCode.InvalidRequest, "method must be a string", msg_id)
    is_request = "id" in data
    if shutting_down and method != methods.EXIT:
        return Refusal(
            ErrorCode.InvalidRequest, "the server is shutting down", msg_id, answer=is_request
        )
    if not initialized and method not in _BEFORE_INITIALIZE:
        # LSP: requests before initialize get ServerNotInitialized; notifications
        # are dropped.
        return Refusal(
            ErrorCode.ServerNotInitialized,
            f"the server is not initialized: send {methods.INITIALIZE} first"
            if is_request
            else f"{method} before {methods.INITIALIZE}",
            msg_id,
            answer=is_request,
        )
    if method == methods.CANCEL_REQUEST and not _valid_cancel(data.get("params")):
        return Refusal(
            ErrorCode.InvalidParams,
            f"a {method} without a valid id: {data.get('params')!r:.200}",
            answer=False,
        )
    return data


def as_rpc_error(error: BaseException) -> RegistryError:
    """The protocol error an exception raised while handling a request becomes."""
    if isinstance(error, RegistryError):
        return error
    if isinstance(error, engine.UnknownTerminalError):
        return UnknownTerminalError(str(error))
    if isinstance(error, (engine.TerminalBusyError, engine.TerminalClosedError)):
        # A closed terminal cannot take the request any more than a busy one can.
        return TerminalBusyError(str(error))
    if isinstance(error, engine.SpawnError):
        return SpawnFailedError(str(error))
    if isinstance(error, (engine.InvalidCwdError, ValueError)):
        return InvalidParamsError(str(error))
    return InternalError(f"internal error: {type(error).__name__}: {error}")


def _valid_id(value: Any) -> bool:
    """JSON-RPC ids we accept: strings and integers (no booleans, floats, objects)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _valid_cancel(params: Any) -> bool:
    return isinstance(params, dict) and _valid_id(params.get("id"))
