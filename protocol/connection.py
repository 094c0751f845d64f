"""One client: its pygls server and protocol, its read loop, its lifecycle.

Each connection (stdio, or one accepted on the Unix socket) gets a pygls
``LanguageServer`` of its own (:class:`ConnectionServer`), so ``initialize`` /
``shutdown`` / ``exit`` and ``$/cancelRequest`` behave as every LSP client expects
and replies never cross between clients; all of them share the hub's registry
(:class:`Shared`).

What is not stock pygls here, and why (docs/protocol.md, implementation notes):

* reading goes through :class:`~protocol.transport.MessageFramer` and
  :meth:`ConnectionProtocol.receive` instead of ``pygls.io_.run_async``: framing
  errors resynchronise, malformed JSON gets ``-32700``, invalid requests ``-32600``,
  requests with no ``params`` are answered, bad params get ``-32602`` naming the
  field;
* params stay plain dicts (see :mod:`protocol.types`) and handlers structure them;
* ``exit`` ends its connection, not the process (unless it is the stdio owner);
  requests after ``shutdown`` are answered with an error instead of silence;
  internal errors carry no traceback;
* our own results are plain JSON already and go out without cattrs walking them.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import time
from collections.abc import Callable, Generator
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol, lsp_method

from registry.config import Settings
from registry.registry import PROVIDERS, TerminalRegistry
from registry.shell import SHELL_KINDS

from . import methods
from .dispatch import FastDispatch
from .errors import ErrorCode
from .framing import FramingError, MessageFramer
from .messages import Refusal, as_rpc_error, check
from .notifications import Fanout
from .options import settings_for
from .scope import Scope
from .transport import CONGESTED_BYTES, MAX_QUEUED_BYTES, StreamWriterAdapter
from .types import converter_factory

__all__ = [
    "PROTOCOL_VERSION",
    "SERVER_NAME",
    "Connection",
    "ConnectionProtocol",
    "ConnectionServer",
    "QueueLimits",
    "Shared",
]

log = logging.getLogger(__name__)

SERVER_NAME = "terminal-registry"
#: While a client's output is held back: how often to look whether it has read again.
MISSED_RECHECK = 0.05
PROTOCOL_VERSION = 1


@functools.cache
def server_version() -> str:
    """This package's version (read from its metadata once: a millisecond each time)."""
    try:
        return version("terminal-registry")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout
        return "0+unknown"


#: How long a look for the shells on PATH is reused: every ``initialize`` reports
#: them, and looking takes about a millisecond -- a CLI call pays it each time.
SHELLS_REUSED_FOR = 30.0
_shells_seen: tuple[float, list[str]] | None = None


def available_shells() -> list[str]:
    """Shells on this machine we have integration for, found on PATH (a shell
    installed meanwhile shows within :data:`SHELLS_REUSED_FOR` seconds)."""
    import os
    import shutil

    global _shells_seen
    now = time.monotonic()
    if _shells_seen is not None and now - _shells_seen[0] < SHELLS_REUSED_FOR:
        return list(_shells_seen[1])
    found: list[str] = []
    for kind in SHELL_KINDS:
        path = shutil.which(kind)
        if path:
            found.append(os.path.realpath(path))
    _shells_seen = (now, found)
    return list(found)


@dataclass(frozen=True)
class QueueLimits:
    """How much may wait for one client (see :mod:`protocol.transport`)."""

    congested: int = CONGESTED_BYTES
    limit: int = MAX_QUEUED_BYTES


@dataclass
class Shared:
    """What every connection shares: the registry, the fan-out, the hub's callbacks."""

    registry: TerminalRegistry
    fanout: Fanout
    settings: Settings
    #: Called once the stdio owner names its process in ``initialize``.
    watch_parent: Callable[[int], None]


class ConnectionProtocol(FastDispatch, LanguageServerProtocol):
    """One connection's protocol: pygls dispatch, our reading and lifecycle."""

    _server: ConnectionServer
    #: A ``shutdown`` request arrived (pygls's ``_shutdown`` says it was answered).
    _shutdown_asked = False

    # -- reading ------------------------------------------------------------------

    def receive(self, frame: bytes | FramingError) -> None:
        """Handle one framed message (or framing error) from the client.

        Every message gets an answer, or -- a notification that cannot be handled --
        a logged drop (:func:`protocol.messages.check`); nothing a client sends
        raises out of here.
        """
        verdict = check(
            frame,
            shutting_down=self._shutdown,
            initialized=self._server.connection.is_initialized,
        )
        scope = self._server.connection.scope
        if scope is not None and not isinstance(verdict, Refusal):
            verdict = scope.admit(verdict, self._server.registry.task_of)
        if isinstance(verdict, Refusal):
            if verdict.answer:
                self._reply_error(verdict.msg_id, verdict.code, verdict.message)
            else:
                log.info("dropped a message: %s", verdict.message)
            return
        self._dispatch(verdict, verdict.get("id"))

    def _dispatch(self, data: dict[str, Any], msg_id: Any) -> None:
        try:
            message = self.structure_message(data)
        except JsonRpcException as error:
            if msg_id is not None:
                self._reply_error(msg_id, error.code, _params_error(data, error))
            return
        self.handle_message(message)

    # -- writing ------------------------------------------------------------------
    # Messages whose payload is already plain JSON (all of ours) go out as dicts:
    # pygls would wrap them in attrs classes and have cattrs walk every value back.

    def notify(self, method: str, params: Any | None = None) -> None:
        self._send_data({"method": method, "jsonrpc": "2.0", "params": params})

    def _send_handler_result(self, future: Any, *, msg_id: Any) -> None:
        """A handler's exception becomes the error of its code (see :func:`as_rpc_error`)."""
        error = None if future.cancelled() else future.exception()
        if error is None or isinstance(error, JsonRpcException):
            super()._send_handler_result(future, msg_id=msg_id)
            return
        self._request_futures.pop(msg_id, None)
        answer = as_rpc_error(error)
        if answer.code == ErrorCode.InternalError:
            log.error("request %s failed", msg_id, exc_info=error)
        self._reply_error(msg_id, answer.code, answer.message)

    def _reply_error(self, msg_id: Any, code: int, message: str) -> None:
        # Written as plain JSON so that "id" is always there, null when unknown
        # (JSON-RPC 2.0, section 5); pygls would leave a null id out.
        error = {"code": int(code), "message": message}
        self._send_data({"jsonrpc": "2.0", "id": msg_id, "error": error})

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: lsp.ResponseError | None = None
    ) -> None:
        if error is None and _is_plain(result):
            self._result_types.pop(msg_id, None)
            self._send_data({"id": msg_id, "jsonrpc": "2.0", "result": result})
            return
        if error is not None:
            # pygls attaches the server's traceback in ``data`` (file paths and all):
            # not for clients.
            self._reply_error(msg_id, error.code, error.message)
            return
        super()._send_response(msg_id, result, error)

    # -- lifecycle ----------------------------------------------------------------

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(
        self, params: lsp.InitializeParams
    ) -> Generator[Any, Any, lsp.InitializeResult]:
        server = self._server
        server.settings, warnings = settings_for(
            server.shared.settings, params.initialization_options
        )
        result: lsp.InitializeResult = yield from super().lsp_initialize(params)
        info: dict[str, Any] = {
            "version": PROTOCOL_VERSION,
            "providers": list(PROVIDERS),
            "shells": available_shells(),
        }
        if (scope := server.connection.scope) is not None:
            # Said up front, so a client inside a terminal (an agent's MCP face) uses
            # that task rather than learning it from a refusal.
            info["scope"] = {"taskId": scope.task_id, "terminalId": scope.terminal_id}
        result.capabilities.experimental = {"terminalRegistry": info}
        server.connection.initialized(params.process_id)
        for warning in warnings:
            server.window_log_message(
                lsp.LogMessageParams(type=lsp.MessageType.Warning, message=warning)
            )
        return result

    @lsp_method(lsp.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """Noted on arrival: pygls marks a shutdown only once its handlers are done,
        and an ``exit`` right behind the request (a replayed session, a client that
        does not wait for the answer) is still the clean exit that was asked for."""
        self._shutdown_asked = True
        yield from super().lsp_shutdown(*args)

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """``exit`` ends this connection; only the stdio owner's ends the server.

        (pygls's own calls ``sys.exit()``, which would end every connection.)
        """
        clean = self._shutdown or self._shutdown_asked
        self._server.connection.exit(clean=clean)
        yield from ()


class ConnectionServer(LanguageServer):
    """A pygls LanguageServer for one connection; handlers get it as ``ls``."""

    def __init__(self, shared: Shared, connection: Connection) -> None:
        self.shared = shared
        self.connection = connection
        #: This connection's own settings: the server's, with its initializationOptions.
        self.settings = dataclasses.replace(shared.settings)
        super().__init__(
            SERVER_NAME,
            server_version(),
            text_document_sync_kind=lsp.TextDocumentSyncKind.None_,
            protocol_cls=ConnectionProtocol,
            converter_factory=converter_factory,
        )

    @property
    def registry(self) -> TerminalRegistry:
        return self.shared.registry

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Request errors are answered to the requester; the rest go to our log, not
        # to a pop-up in every client.
        log.warning("server error (%s): %s", getattr(source, "__name__", source), error)


class Connection:
    """One client: its pygls server, its framer, its transport."""

    def __init__(
        self,
        shared: Shared,
        name: str,
        reader: asyncio.StreamReader,
        transport: asyncio.WriteTransport,
        *,
        owner: bool,
        limits: QueueLimits | None = None,
    ) -> None:
        self.name = name
        self.owner = owner
        self.is_initialized = False
        self.client_pid: int | None = None
        #: The process and user at the other end, as the kernel says (socket peer
        #: credentials; for stdio, the process that started us).
        self.peer_pid: int | None = None
        self.peer_uid: int | None = None
        #: Set when the client runs inside one of our terminals: it acts for that
        #: terminal's task only (:mod:`protocol.scope`).
        self.scope: Scope | None = None
        self.exit_code = 0
        self._shared = shared
        self._reader = reader
        limits = limits or QueueLimits()
        self._writer = StreamWriterAdapter(
            transport,
            congested=limits.congested,
            limit=limits.limit,
            on_overflow=self._overflowed,
        )
        #: Per terminal, characters of output this client missed while congested.
        self._missed: dict[int, int] = {}
        self._missed_timer: asyncio.TimerHandle | None = None
        self._done = asyncio.Event()
        self.server = ConnectionServer(shared, self)
        self.server.protocol.set_writer(self._writer)

    @property
    def protocol(self) -> ConnectionProtocol:
        return self.server.protocol  # type: ignore[return-value]

    def initialized(self, client_pid: int | None) -> None:
        self.is_initialized = True
        self.client_pid = client_pid
        if self.owner and client_pid:
            self._shared.watch_parent(client_pid)

    def notify(self, method: str, params: Any) -> None:
        if not self.is_initialized or self._done.is_set():
            return
        if self.scope is not None and not self.scope.hears(
            method, params, self._shared.registry.task_of
        ):
            return
        if method == methods.DID_WRITE:
            # Output is what a client that does not read piles up: held back while
            # congested, and the next didWrite says how much was missed (a mirror
            # repaints with terminal/replay).
            terminal_id = params["terminalId"]
            if self._writer.congested(len(params["data"])):
                self._missed[terminal_id] = self._missed.get(terminal_id, 0) + len(params["data"])
                self._watch_congestion()
                return
            missed = self._missed.pop(terminal_id, None)
            if missed:
                params = {**params, "missed": missed}
        elif method == methods.DID_CLOSE:
            self._missed.pop(params["terminalId"], None)
        self.protocol.notify(method, params)

    def _watch_congestion(self) -> None:
        """Tell a client what it missed once it has read again, even if its terminals
        print nothing more (else it would never learn to repaint).  The kernel says
        nothing when a client drains its socket, so while output is held back the
        queue is looked at every :data:`MISSED_RECHECK` seconds."""
        if self._missed_timer is None and not self._done.is_set():
            loop = asyncio.get_running_loop()
            self._missed_timer = loop.call_later(MISSED_RECHECK, self._report_missed)

    def _report_missed(self) -> None:
        self._missed_timer = None
        if self._done.is_set() or not self._missed:
            return
        if self._writer.congested():
            self._watch_congestion()
            return
        for terminal_id in list(self._missed):
            params = {"terminalId": terminal_id, "data": "", "runId": None}
            self.notify(methods.DID_WRITE, params)

    def _overflowed(self) -> None:
        log.warning("%s: the client does not read what it asked for: disconnected", self.name)
        self._done.set()

    async def serve(self) -> None:
        """Read and dispatch until the client goes away or says ``exit``."""
        framer = MessageFramer()
        read = asyncio.ensure_future(self._read_loop(framer))
        done = asyncio.ensure_future(self._done.wait())
        try:
            await asyncio.wait([read, done], return_when=asyncio.FIRST_COMPLETED)
        finally:
            read.cancel()
            done.cancel()
            self._done.set()
            self._writer.close()

    async def _read_loop(self, framer: MessageFramer) -> None:
        while not self._done.is_set():
            try:
                data = await self._reader.read(65536)
            except (ConnectionError, OSError):
                return
            if not data:
                return
            for frame in framer.feed(data):
                try:
                    self.protocol.receive(frame)
                except Exception:
                    # A defect of ours, not the client's: log it, answer, keep serving.
                    log.exception("%s: a message could not be handled", self.name)
                    self.protocol._reply_error(
                        None, ErrorCode.InternalError, "internal error: the message was dropped"
                    )

    def exit(self, clean: bool) -> None:
        self.exit_code = 0 if clean else 1
        self._done.set()

    def close(self) -> None:
        self._done.set()


def _is_plain(value: Any) -> bool:
    """JSON-ready already: None, a primitive, or a dict or list (ours build those)."""
    return value is None or isinstance(value, (dict, list, str, int, float, bool))


def _params_error(data: dict[str, Any], error: JsonRpcException) -> str:
    method = data.get("method", "")
    detail = error.message or "invalid params"
    if isinstance(error, JsonRpcInvalidRequest):
        return detail
    return f"invalid params for {method}: {detail}" if method else detail
