"""The JSON-RPC server: the registry over stdio and a Unix socket, on pygls.

Shape (as in pygls / jedi-language-server): one :class:`RegistryServer` owns the
:class:`~registry.registry.TerminalRegistry` and the connections; each connection is
a pygls ``LanguageServer`` of its own (so ``initialize``/``shutdown``/``exit`` and
``$/cancelRequest`` behave as every LSP client expects, and replies never cross
between clients), and the handlers in :mod:`protocol.handlers` are thin calls into
the registry.

What is not stock pygls, and why (``../shared/notes/pygls-2.1-facts.md``):

* reading goes through :class:`~protocol.transport.MessageFramer` and
  :meth:`RegistryProtocol.receive` instead of ``pygls.io_.run_async``: framing
  errors resynchronise, malformed JSON gets ``-32700``, invalid requests ``-32600``,
  requests with no ``params`` are answered, bad params get ``-32602`` naming the
  field;
* params stay plain dicts (pygls would make namedtuples of them) and are structured
  by :func:`protocol.types.structure_params`;
* ``exit`` ends its connection, not the process (unless it is the stdio owner);
  requests after ``shutdown`` are answered with an error instead of silence;
  internal errors carry no traceback;
* stdio: the protocol reads and writes private copies of fds 0 and 1; the real fd 0
  becomes /dev/null and fd 1 points at stderr, so a stray print or a child that
  inherits them cannot corrupt the stream;
* the socket accepts only its own user (peer credentials), in a 0700 directory.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import Generator
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import cattrs
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcException, JsonRpcInvalidRequest
from pygls.lsp.server import LanguageServer
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    LanguageServerProtocol,
    lsp_method,
)

from registry.config import Settings
from registry.output import IncrementalText
from registry.registry import PROVIDERS, RegistryListener, TerminalRegistry
from registry.run import TerminalRun
from registry.shell import SHELL_KINDS
from registry.terminals.base import Terminal

from . import types as wire
from .errors import INVALID_REQUEST, PARSE_ERROR
from .options import apply_options
from .transport import FramingError, MessageFramer, StreamWriterAdapter, socket_accepts

__all__ = ["PROTOCOL_VERSION", "SERVER_NAME", "Connection", "RegistryServer"]

log = logging.getLogger(__name__)

SERVER_NAME = "terminal-registry"
PROTOCOL_VERSION = 1
#: didWrite coalescing window: at most one notification per terminal per this long.
DID_WRITE_INTERVAL = 0.02
SOCKET_VARIABLE = "TERMINAL_REGISTRY_SOCKET"


def server_version() -> str:
    try:
        return version("terminal-registry")
    except PackageNotFoundError:  # pragma: no cover - running from a checkout
        return "0+unknown"


def converter_factory() -> cattrs.Converter:
    """lsprotocol's converter plus ours, with params and results kept as plain JSON."""
    conv = wire.converter
    conv.register_structure_hook(
        JsonRPCRequestMessage,
        lambda obj, cls: cls(
            id=obj["id"], method=obj["method"], jsonrpc=obj["jsonrpc"], params=obj.get("params")
        ),
    )
    conv.register_structure_hook(
        JsonRPCNotification,
        lambda obj, cls: cls(
            method=obj["method"], jsonrpc=obj["jsonrpc"], params=obj.get("params")
        ),
    )
    conv.register_structure_hook(
        JsonRPCResponseMessage,
        lambda obj, cls: cls(id=obj["id"], jsonrpc=obj["jsonrpc"], result=obj.get("result")),
    )
    return conv


def available_shells() -> list[str]:
    """Shells on this machine we have integration for, from /etc/shells and PATH."""
    import shutil

    found: list[str] = []
    for kind in SHELL_KINDS:
        path = shutil.which(kind)
        if path:
            found.append(os.path.realpath(path))
    return found


class RegistryProtocol(LanguageServerProtocol):
    """One connection's protocol: pygls dispatch, our reading and lifecycle."""

    _server: RegistryLanguageServer

    # -- reading ------------------------------------------------------------------

    def receive(self, frame: bytes | FramingError) -> None:
        """Handle one framed message (or framing error) from the client."""
        if isinstance(frame, FramingError):
            self._reply_error(None, PARSE_ERROR, frame.message)
            return
        try:
            data = json.loads(frame)
        except ValueError as error:
            self._reply_error(None, PARSE_ERROR, f"malformed JSON: {error}")
            return
        if isinstance(data, list):
            self._reply_error(None, INVALID_REQUEST, "batch requests are not supported")
            return
        if not isinstance(data, dict):
            self._reply_error(None, INVALID_REQUEST, "a message must be a JSON object")
            return
        msg_id = data.get("id")
        if msg_id is not None and (isinstance(msg_id, bool) or not isinstance(msg_id, (int, str))):
            self._reply_error(None, INVALID_REQUEST, "id must be a string or a number")
            return
        if data.get("jsonrpc") != "2.0":
            self._reply_error(msg_id, INVALID_REQUEST, 'jsonrpc must be "2.0"')
            return
        method = data.get("method")
        if method is None:
            if "id" in data and ("result" in data or "error" in data):
                self._dispatch(data, msg_id)  # a response to one of our requests
            else:
                self._reply_error(msg_id, INVALID_REQUEST, "a request needs a method")
            return
        if not isinstance(method, str):
            self._reply_error(msg_id, INVALID_REQUEST, "method must be a string")
            return
        if self._shutdown and method != lsp.EXIT:
            if "id" in data:
                self._reply_error(msg_id, INVALID_REQUEST, "the server is shutting down")
            return
        self._dispatch(data, msg_id)

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

    def handle_message(self, message: Any) -> None:
        """pygls's dispatch, minus its runtime-checkable Protocol ``isinstance`` tests.

        Our reader already knows what each message is (it built it), and those
        checks were the single largest cost of a small request.
        """
        ctx = contextvars.copy_context()
        if isinstance(message, JsonRPCRequestMessage) or (
            hasattr(message, "id") and hasattr(message, "method")
        ):
            ctx.run(self._handle_request, message.id, message.method, message.params)
        elif hasattr(message, "method"):
            ctx.run(self._handle_notification, message.method, message.params)
        elif hasattr(message, "error"):
            ctx.run(self._handle_response, message.id, None, message.error)
        else:
            ctx.run(self._handle_response, message.id, message.result)

    def _reply_error(self, msg_id: Any, code: int, message: str) -> None:
        self._send_response(msg_id, error=lsp.ResponseError(code=code, message=message))

    def _send_response(
        self, msg_id: Any, result: Any | None = None, error: lsp.ResponseError | None = None
    ) -> None:
        if error is None and _is_plain(result):
            self._result_types.pop(msg_id, None)
            self._send_data({"id": msg_id, "jsonrpc": "2.0", "result": result})
            return
        if error is not None and isinstance(error.data, dict) and "traceback" in error.data:
            # pygls attaches the server's traceback (file paths and all): not for clients.
            error = lsp.ResponseError(code=error.code, message=error.message)
        super()._send_response(msg_id, result, error)

    # -- lifecycle ----------------------------------------------------------------

    @lsp_method(lsp.INITIALIZE)
    def lsp_initialize(
        self, params: lsp.InitializeParams
    ) -> Generator[Any, Any, lsp.InitializeResult]:
        hub = self._server.hub
        warnings = apply_options(hub.settings, params.initialization_options)
        result: lsp.InitializeResult = yield from super().lsp_initialize(params)
        result.capabilities.experimental = {
            "terminalRegistry": {
                "version": PROTOCOL_VERSION,
                "providers": list(PROVIDERS),
                "shells": available_shells(),
            }
        }
        self._server.connection.initialized(params.process_id)
        for warning in warnings:
            self._server.window_log_message(
                lsp.LogMessageParams(type=lsp.MessageType.Warning, message=warning)
            )
        return result

    @lsp_method(lsp.EXIT)
    def lsp_exit(self, *args: Any) -> Generator[Any, Any, None]:
        """``exit`` ends this connection; only the stdio owner's ends the server.

        (pygls's own calls ``sys.exit()``, which would end every connection.)
        """
        self._server.connection.exit(clean=self._shutdown)
        yield from ()


class RegistryLanguageServer(LanguageServer):
    """A pygls LanguageServer for one connection, sharing the hub's registry."""

    def __init__(self, hub: RegistryServer, connection: Connection) -> None:
        self.hub = hub
        self.connection = connection
        super().__init__(
            SERVER_NAME,
            server_version(),
            text_document_sync_kind=lsp.TextDocumentSyncKind.None_,
            protocol_cls=RegistryProtocol,
            converter_factory=converter_factory,
        )

    def report_server_error(self, error: Exception, source: Any) -> None:
        # Request errors are answered to the requester; the rest go to our log, not
        # to a pop-up in every client.
        log.warning("server error (%s): %s", getattr(source, "__name__", source), error)


class Connection:
    """One client: its pygls server, its framer, its transport."""

    def __init__(
        self,
        hub: RegistryServer,
        name: str,
        reader: asyncio.StreamReader,
        transport: asyncio.WriteTransport,
        *,
        owner: bool,
    ) -> None:
        self.hub = hub
        self.name = name
        self.owner = owner
        self.is_initialized = False
        self.client_pid: int | None = None
        self._reader = reader
        self._writer = StreamWriterAdapter(transport)
        self._done = asyncio.Event()
        self.exit_code = 0
        self.server = RegistryLanguageServer(hub, self)
        self.server.protocol.set_writer(self._writer)
        from .handlers import register_handlers

        register_handlers(self.server)

    @property
    def protocol(self) -> RegistryProtocol:
        return self.server.protocol  # type: ignore[return-value]

    def initialized(self, client_pid: int | None) -> None:
        self.is_initialized = True
        self.client_pid = client_pid
        if self.owner and client_pid:
            self.hub.watch_parent(client_pid)

    def notify(self, method: str, params: Any) -> None:
        if self.is_initialized and not self._done.is_set():
            self.protocol.notify(method, params)

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
            self.hub.connection_closed(self)

    async def _read_loop(self, framer: MessageFramer) -> None:
        while not self._done.is_set():
            try:
                data = await self._reader.read(65536)
            except (ConnectionError, OSError):
                return
            if not data:
                return
            for frame in framer.feed(data):
                self.protocol.receive(frame)

    def exit(self, clean: bool) -> None:
        self.exit_code = 0 if clean else 1
        self._done.set()

    def close(self) -> None:
        self._done.set()


class RegistryServer(RegistryListener):
    """The registry, its connections, and the notifications that reach all of them."""

    def __init__(self, settings: Settings | None = None) -> None:
        self.settings = settings or Settings()
        self.registry = TerminalRegistry(self.settings)
        self.registry.subscribe(self)
        self.connections: set[Connection] = set()
        self._stopped = asyncio.Event()
        self._exit_code = 0
        self._writes = _WriteCoalescer(self)
        self._socket_server: asyncio.AbstractServer | None = None
        self._socket_path: str | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    # -- serving ------------------------------------------------------------------

    async def run(self, *, stdio: bool, socket_path: str | None) -> int:
        """Serve until the stdio client leaves (or ``stop()``); then close everything."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.stop)
        if socket_path:
            await self.serve_socket(socket_path)
        if stdio:
            self._spawn(self.serve_stdio())
        await self._stopped.wait()
        await self.close()
        return self._exit_code

    def stop(self, exit_code: int = 0) -> None:
        self._exit_code = exit_code
        self._stopped.set()

    async def close(self) -> None:
        if self._socket_server is not None:
            self._socket_server.close()
            with contextlib.suppress(OSError):
                if self._socket_path:
                    os.unlink(self._socket_path)
        self._writes.flush_all()
        await self.registry.close()
        for connection in list(self.connections):
            connection.close()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def serve_stdio(self) -> None:
        loop = asyncio.get_running_loop()
        in_fd, out_fd = _claim_stdio()
        reader = asyncio.StreamReader(limit=2**24)
        await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(in_fd, "rb", 0)
        )
        transport, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(out_fd, "wb", 0))
        connection = Connection(self, "stdio", reader, transport, owner=True)
        self.connections.add(connection)
        await connection.serve()
        # The IDE's pipe closed or it said exit: the server's job is done.
        self.stop(connection.exit_code)

    async def serve_socket(self, path: str) -> None:
        path = os.path.abspath(path)
        _check_socket_directory(os.path.dirname(path))
        if os.path.exists(path):
            if socket_accepts(path):
                raise OSError(f"socket {path} is in use by another server")
            os.unlink(path)
        self._socket_server = await asyncio.start_unix_server(self._accept, path)
        os.chmod(path, 0o600)
        self._socket_path = path
        # Terminals started from now on can reach this registry.
        os.environ[SOCKET_VARIABLE] = path
        log.info("serving on %s", path)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        sock = writer.get_extra_info("socket")
        peer_uid = _peer_uid(sock)
        if peer_uid is not None and peer_uid != os.getuid():
            log.warning("refused a connection from uid %s", peer_uid)
            writer.close()
            return
        transport = writer.transport
        assert isinstance(transport, asyncio.WriteTransport)
        connection = Connection(self, f"socket:{id(writer)}", reader, transport, owner=False)
        self.connections.add(connection)
        await connection.serve()

    def connection_closed(self, connection: Connection) -> None:
        self.connections.discard(connection)

    def watch_parent(self, pid: int) -> None:
        """Shut down when the process that started us goes away."""
        if pid == os.getpid():
            return
        self._spawn(self._watch_parent(pid))

    async def _watch_parent(self, pid: int) -> None:
        import psutil

        from registry.processes import wait_gone

        try:
            proc = psutil.Process(pid)
        except psutil.Error:
            self.stop(1)
            return
        while not self._stopped.is_set():
            if not await wait_gone([proc], 3600.0):
                log.info("client process %s is gone: shutting down", pid)
                self.stop(1)
                return

    # -- notifications --------------------------------------------------------------

    def flush_writes(self, terminal_id: int) -> None:
        """Send a terminal's gathered didWrite now (before a replay answer)."""
        self._writes.flush(terminal_id)

    def broadcast(self, method: str, params: Any) -> None:
        for connection in list(self.connections):
            connection.notify(method, params)

    def info(self, terminal: Terminal) -> wire.TerminalInfo:
        entry = self.registry.entry(terminal.id)
        return wire.TerminalInfo(
            id=terminal.id,
            provider=terminal.provider,
            task_id=entry.task_id,
            cwd=terminal.cwd,
            busy=terminal.busy,
            hot=entry.hot.is_hot(),
            shell_integration=terminal.integration.value,
            shell=terminal.shell,
            pid=terminal.pid,
            last_command=terminal.last_command,
        )

    def on_open(self, terminal: Terminal) -> None:
        self.broadcast("terminal/didOpen", wire.unstructure(self.info(terminal)))

    def on_change(self, terminal: Terminal) -> None:
        if not terminal.closed:
            self.broadcast("terminal/didChange", wire.unstructure(self.info(terminal)))

    def on_close(self, terminal: Terminal) -> None:
        self._writes.flush(terminal.id)
        self.broadcast("terminal/didClose", wire.unstructure(wire.DidCloseParams(terminal.id)))

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        self._writes.add(terminal.id, run.id if run is not None else None, data)

    def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
        # No flush here: output without a run (prompt, echo) may keep gathering; the
        # run's own output starts a new didWrite anyway (its runId differs).
        params = wire.DidStartRunParams(terminal.id, run.id, run.command_line)
        self.broadcast("terminal/didStartRun", wire.unstructure(params))

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        self._writes.flush(terminal.id)
        params = wire.DidEndRunParams(terminal.id, run.id, run.state.value, run.exit_code)
        self.broadcast("terminal/didEndRun", wire.unstructure(params))


class _WriteCoalescer:
    """didWrite at most once per terminal per interval; nothing dropped, order kept."""

    def __init__(self, hub: RegistryServer, interval: float = DID_WRITE_INTERVAL) -> None:
        self._hub = hub
        self._interval = interval
        self._pending: dict[int, tuple[int | None, bytearray, asyncio.TimerHandle]] = {}
        self._decoders: dict[int, IncrementalText] = {}

    def add(self, terminal_id: int, run_id: int | None, data: bytes) -> None:
        pending = self._pending.get(terminal_id)
        if pending is not None and pending[0] != run_id:
            self.flush(terminal_id)
            pending = None
        if pending is None:
            timer = asyncio.get_running_loop().call_later(self._interval, self.flush, terminal_id)
            self._pending[terminal_id] = (run_id, bytearray(data), timer)
        else:
            pending[1].extend(data)

    def flush(self, terminal_id: int) -> None:
        pending = self._pending.pop(terminal_id, None)
        if pending is None:
            return
        run_id, data, timer = pending
        timer.cancel()
        decoder = self._decoders.setdefault(terminal_id, IncrementalText())
        text = decoder.decode(bytes(data))
        if text:
            params = wire.DidWriteParams(terminal_id, text, run_id)
            self._hub.broadcast("terminal/didWrite", wire.unstructure(params))

    def flush_all(self) -> None:
        for terminal_id in list(self._pending):
            self.flush(terminal_id)


# -- helpers ------------------------------------------------------------------------------


def _is_plain(value: Any) -> bool:
    """JSON-ready already: None, a primitive, or a dict or list (ours build those)."""
    return value is None or isinstance(value, (dict, list, str, int, float, bool))


def _params_error(data: dict[str, Any], error: JsonRpcException) -> str:
    method = data.get("method", "")
    detail = error.message or "invalid params"
    if isinstance(error, JsonRpcInvalidRequest):
        return detail
    return f"invalid params for {method}: {detail}" if method else detail


def _claim_stdio() -> tuple[int, int]:
    """Private copies of fds 0 and 1 for the protocol; the real ones made harmless."""
    sys.stdout.flush()
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)
    return in_fd, out_fd


def _check_socket_directory(directory: str) -> None:
    """The socket's directory must be ours and closed to others (0700)."""
    if not os.path.isdir(directory):
        os.makedirs(directory, mode=0o700, exist_ok=True)
    info = os.stat(directory)
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PermissionError(f"socket directory {directory} belongs to another user")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise PermissionError(
            f"socket directory {directory} is open to other users "
            f"(mode {stat.S_IMODE(info.st_mode):o}); it must be 0700"
        )


def _peer_uid(sock: socket.socket | None) -> int | None:
    """The connecting process's uid (Linux SO_PEERCRED); None where unknown."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    import struct

    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)
