"""The protocol's names: every request and notification method, in one table.

The server registers its handlers under these names and every client sends them
(the asyncio client, the CLI, the MCP face); ``vscode-client/src/protocol.ts``
mirrors them, and ``tests/test_protocol_table.py`` holds the two together.  The
parameter and result types of each method are in :data:`protocol.types.REQUESTS`.

This module imports nothing: the CLI's start-up pays nothing for it.
"""

from __future__ import annotations

__all__ = [
    "ACQUIRE",
    "CANCEL_REQUEST",
    "CLOSE",
    "DID_CHANGE",
    "DID_CLOSE",
    "DID_END_RUN",
    "DID_OPEN",
    "DID_START_RUN",
    "DID_WRITE",
    "ENVIRONMENT_DETAILS",
    "EXIT",
    "GET",
    "INITIALIZE",
    "INITIALIZED",
    "KILL",
    "LIST",
    "LOG_MESSAGE",
    "NOTIFICATIONS",
    "OUTPUT",
    "PROGRESS",
    "RELEASE",
    "REPLAY",
    "REQUESTS",
    "RESIZE",
    "RUN",
    "SEND_KEYS",
    "SHUTDOWN",
    "WAIT",
    "WRITE",
]

# -- requests (client -> server) -----------------------------------------------------------

ACQUIRE = "terminal/acquire"
RUN = "terminal/run"
WRITE = "terminal/write"
RESIZE = "terminal/resize"
KILL = "terminal/kill"
CLOSE = "terminal/close"
LIST = "terminal/list"
OUTPUT = "terminal/output"
GET = "terminal/get"
REPLAY = "terminal/replay"
RELEASE = "terminal/release"
ENVIRONMENT_DETAILS = "environment/details"
WAIT = "terminal/wait"
SEND_KEYS = "terminal/sendKeys"

#: Every request of ours, in docs/protocol.md's order.
REQUESTS = (
    ACQUIRE,
    RUN,
    WRITE,
    RESIZE,
    KILL,
    CLOSE,
    LIST,
    OUTPUT,
    GET,
    REPLAY,
    RELEASE,
    ENVIRONMENT_DETAILS,
    WAIT,
    SEND_KEYS,
)

# -- notifications (server -> every client) ------------------------------------------------

DID_OPEN = "terminal/didOpen"
DID_CHANGE = "terminal/didChange"
DID_CLOSE = "terminal/didClose"
DID_START_RUN = "terminal/didStartRun"
DID_WRITE = "terminal/didWrite"
DID_END_RUN = "terminal/didEndRun"

#: Every notification of ours, in docs/protocol.md's order.
NOTIFICATIONS = (DID_OPEN, DID_CHANGE, DID_CLOSE, DID_START_RUN, DID_WRITE, DID_END_RUN)

# -- the LSP base protocol and lifecycle, which we speak too -------------------------------

INITIALIZE = "initialize"
INITIALIZED = "initialized"
SHUTDOWN = "shutdown"
EXIT = "exit"
CANCEL_REQUEST = "$/cancelRequest"
PROGRESS = "$/progress"
LOG_MESSAGE = "window/logMessage"
