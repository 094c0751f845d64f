"""JSON-RPC errors of PROTOCOL.md, and the mapping from the engine's exceptions.

Each error's message names what was wrong; none carries a traceback (pygls's default
internal error would put one, with file paths, in ``data``).
"""

from __future__ import annotations

from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from registry.errors import (
    InvalidCwdError,
    SpawnError,
    TerminalBusyError,
    TerminalClosedError,
    UnknownTerminalError,
)

__all__ = [
    "INVALID_REQUEST",
    "PARSE_ERROR",
    "SpawnFailed",
    "TerminalBusy",
    "UnknownTerminal",
    "to_rpc_error",
]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


class UnknownTerminal(JsonRpcException):
    CODE = -32001
    MESSAGE = "unknown terminal"


class TerminalBusy(JsonRpcException):
    CODE = -32002
    MESSAGE = "terminal busy"


class SpawnFailed(JsonRpcException):
    CODE = -32003
    MESSAGE = "spawn failed"


def to_rpc_error(error: BaseException) -> JsonRpcException:
    """The JSON-RPC error a handler's exception becomes."""
    if isinstance(error, JsonRpcException):
        return error
    if isinstance(error, UnknownTerminalError):
        return UnknownTerminal(str(error))
    if isinstance(error, (TerminalBusyError, TerminalClosedError)):
        # A closed terminal cannot take the request any more than a busy one can.
        return TerminalBusy(str(error))
    if isinstance(error, SpawnError):
        return SpawnFailed(str(error))
    if isinstance(error, (InvalidCwdError, ValueError)):
        return JsonRpcInvalidParams(str(error))
    return JsonRpcInternalError(f"internal error: {type(error).__name__}: {error}")
