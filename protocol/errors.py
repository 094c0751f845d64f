"""The protocol's error codes and the exceptions that carry them, on both sides.

A handler raises one of these (or an engine exception the server maps onto one); the
server answers with its code and message; a client raises the class of the code it
got back.  So server and clients share one table, and
``vscode-client/src/protocol.ts`` mirrors it (``ErrorCode``).

Every message names what was wrong; none carries a traceback.  This module imports
nothing of the project's, so the CLI and the clients can use it without loading the
engine.
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "ERRORS",
    "ConnectionLostError",
    "ErrorCode",
    "InternalError",
    "InvalidParamsError",
    "InvalidRequestError",
    "MethodNotFoundError",
    "ParseError",
    "RegistryError",
    "RequestCancelledError",
    "SpawnFailedError",
    "TerminalBusyError",
    "UnknownTerminalError",
    "error_for",
]


class ErrorCode(IntEnum):
    """JSON-RPC error codes (names as in the TypeScript mirror)."""

    ParseError = -32700
    InvalidRequest = -32600
    MethodNotFound = -32601
    InvalidParams = -32602
    InternalError = -32603
    RequestCancelled = -32800
    UnknownTerminal = -32001
    TerminalBusy = -32002
    SpawnFailed = -32003
    #: LSP's code for a request before ``initialize``; the same number as TerminalBusy
    #: (the message says which), an alias, so not one of the table's own codes.
    ServerNotInitialized = -32002


class RegistryError(Exception):
    """An error response: its code and a message that names what was wrong."""

    code: int = ErrorCode.InternalError

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code is not None:
            self.code = code


class ParseError(RegistryError):
    code = ErrorCode.ParseError


class InvalidRequestError(RegistryError):
    code = ErrorCode.InvalidRequest


class MethodNotFoundError(RegistryError):
    code = ErrorCode.MethodNotFound


class InvalidParamsError(RegistryError):
    code = ErrorCode.InvalidParams


class InternalError(RegistryError):
    code = ErrorCode.InternalError


class RequestCancelledError(RegistryError):
    code = ErrorCode.RequestCancelled


class UnknownTerminalError(RegistryError):
    code = ErrorCode.UnknownTerminal


class TerminalBusyError(RegistryError):
    code = ErrorCode.TerminalBusy


class SpawnFailedError(RegistryError):
    code = ErrorCode.SpawnFailed


#: The exception class of each code.
ERRORS: dict[int, type[RegistryError]] = {
    cls.code: cls
    for cls in (
        ParseError,
        InvalidRequestError,
        MethodNotFoundError,
        InvalidParamsError,
        InternalError,
        RequestCancelledError,
        UnknownTerminalError,
        TerminalBusyError,
        SpawnFailedError,
    )
}


class ConnectionLostError(ConnectionError):
    """No answer will come: the connection to the server ended (it was stopped or died)."""

    def __init__(self, method: str) -> None:
        super().__init__(f"{method}: the terminal-registry server has gone")


def error_for(code: int, message: str) -> RegistryError:
    """The exception for an error response (a plain RegistryError for unknown codes)."""
    return ERRORS.get(code, RegistryError)(message, code)
