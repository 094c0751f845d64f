"""The hub: one registry, the connections that share it, and the server's lifecycle.

Only wiring lives here: the hub creates the :class:`~registry.registry.TerminalRegistry`
and the :class:`~protocol.notifications.Fanout` that tells every client what happens
in it, accepts connections on stdio and a Unix socket (:mod:`protocol.listen`),
registers :data:`protocol.handlers.HANDLERS` on each, and ends everything when the
server stops: on ``shutdown``/``exit`` or stdin closing (stdio owner), on
SIGTERM/SIGINT/SIGHUP, or when the process that started it goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import stat
from typing import Any

from registry.config import Settings
from registry.keeper import Keeper
from registry.registry import TerminalRegistry

from .audit import AuditFile
from .audit_trail import AuditTrail
from .connection import Connection, QueueLimits, Shared
from .handlers import HANDLERS
from .listen import check_socket_directory, claim_stdio, peer_credentials, socket_accepts
from .notifications import Fanout
from .scope import scope_of
from .stdio import open_stdio

__all__ = ["SOCKET_VARIABLE", "Hub"]

log = logging.getLogger(__name__)

SOCKET_VARIABLE = "TERMINAL_REGISTRY_SOCKET"


class Hub:
    """The registry, its connections, and the server's lifecycle."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        limits: QueueLimits | None = None,
        keeper: Keeper | None = None,
        audit: AuditFile | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.limits = limits or QueueLimits()
        self.keeper = keeper
        self.registry = TerminalRegistry(self.settings, keeper=keeper)
        self.audit = AuditTrail(audit) if audit is not None else None
        if self.audit is not None:
            self.registry.subscribe(self.audit)
        self.connections: set[Connection] = set()
        self.fanout = Fanout(self.registry, lambda: self.connections)
        self.registry.subscribe(self.fanout)
        self._shared = Shared(self.registry, self.fanout, self.settings, self.watch_parent)
        self._stopped = asyncio.Event()
        self._exit_code = 0
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
        try:
            if socket_path:
                await self.serve_socket(socket_path)
            if stdio:
                # Opened here, not in the task: a stdio that cannot be served is the
                # caller's error to report (serve exits 2 naming it), not a hang.
                reader, transport = await open_stdio(*claim_stdio(), limit=2**24)
                self._spawn(self.serve_stdio(reader, transport))
            await self._stopped.wait()
        finally:
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
        self.fanout.flush_all()
        await self.registry.close()
        if self.keeper is not None:
            # Every terminal ended its processes: nothing is left for the watchdog.
            self.keeper.close()
        if self.audit is not None:
            self.audit.close()
        for connection in list(self.connections):
            connection.close()
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Any) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _connect(
        self,
        name: str,
        reader: asyncio.StreamReader,
        transport: asyncio.WriteTransport,
        *,
        owner: bool,
    ) -> Connection:
        connection = Connection(
            self._shared, name, reader, transport, owner=owner, limits=self.limits
        )
        for method, handler in HANDLERS.items():
            connection.server.feature(method)(handler)
        self.connections.add(connection)
        return connection

    async def serve_stdio(
        self, reader: asyncio.StreamReader, transport: asyncio.WriteTransport
    ) -> None:
        connection = self._connect("stdio", reader, transport, owner=True)
        connection.peer_pid, connection.peer_uid = os.getppid(), os.getuid()
        exit_code = 1
        try:
            await connection.serve()
            exit_code = connection.exit_code
        finally:
            self.connections.discard(connection)
            # The IDE's pipe closed or it said exit (or serving it failed, logged by
            # asyncio): the server's job is done either way, never left hanging.
            self.stop(exit_code)

    async def serve_socket(self, path: str, *, export: bool = False) -> None:
        """Listen on ``path`` too; with ``export``, terminals are told where (the variable
        ``TERMINAL_REGISTRY_SOCKET``), so that agents inside them can reach it."""
        path = os.path.abspath(path)
        check_socket_directory(os.path.dirname(path))
        if os.path.lexists(path):
            if not stat.S_ISSOCK(os.lstat(path).st_mode):
                raise OSError(f"{path} exists and is not a socket: not removing it")
            if socket_accepts(path):
                raise OSError(f"socket {path} is in use by another server")
            os.unlink(path)  # a stale socket of a server that is gone
        self._socket_server = await asyncio.start_unix_server(self._accept, path)
        os.chmod(path, 0o600)
        self._socket_path = path
        if self.keeper is not None:
            self.keeper.add_cleanup(path)  # a dead server's socket is removed too
        if export:
            # Terminals started from now on are told where this registry is.
            os.environ[SOCKET_VARIABLE] = path
        else:
            # Not asked: no terminal of ours names a socket (not even one inherited).
            os.environ.pop(SOCKET_VARIABLE, None)
        log.info("serving on %s", path)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = peer_credentials(writer.get_extra_info("socket"))
        if peer is not None and peer.uid != os.getuid():
            log.warning("refused a connection from uid %s", peer.uid)
            writer.close()
            return
        transport = writer.transport
        assert isinstance(transport, asyncio.WriteTransport)
        connection = self._connect(f"socket:{id(writer)}", reader, transport, owner=False)
        if peer is not None:
            connection.peer_pid, connection.peer_uid = peer.pid, peer.uid
            connection.scope = scope_of(self.registry, peer.pid)
        try:
            await connection.serve()
        finally:
            self.connections.discard(connection)

    # -- the client that started us ---------------------------------------------------

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
