"""The Python client for agents: typed methods over a JSON-RPC link (:mod:`protocol.link`).

::

    async with await RegistryClient.spawn() as client:        # or .connect(socket_path)
        result = await client.run("pytest -q", cwd="/repo", task_id="t1")
        print(result.exit_code, result.cwd, result.output)
        print((await client.environment_details("t1")).markdown)

A command that asks is answered, not waited out: ``run(..., yield_on_input=True)``,
``write`` or ``send_keys``, then ``wait`` (docs/waiting.md).
Every method mirrors a request of docs/protocol.md; errors raise the exception of their
code (:class:`UnknownTerminalError`, :class:`TerminalBusyError` ...).
Notifications arrive through :meth:`RegistryClient.notifications` (an async
iterator) or callbacks registered with :meth:`RegistryClient.on`.  Cancelling the
task awaiting :meth:`RegistryClient.run` sends ``$/cancelRequest``, which interrupts
the command.  :class:`protocol.sync_client.SyncRegistryClient` wraps it all for
scripts.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from . import methods
from . import types as wire
from .errors import (
    ConnectionLostError,
    InvalidParamsError,
    MethodNotFoundError,
    RegistryError,
    RequestCancelledError,
    SpawnFailedError,
    TerminalBusyError,
    UnknownTerminalError,
)
from .link import Link
from .stream import Notification, NotificationStream

__all__ = [
    "ConnectionLostError",
    "EnvironmentDetails",
    "InvalidParamsError",
    "MethodNotFoundError",
    "Notification",
    "NotificationStream",
    "RegistryClient",
    "RegistryError",
    "RequestCancelledError",
    "SpawnFailedError",
    "TerminalBusyError",
    "UnknownTerminalError",
]


# -- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EnvironmentDetails:
    markdown: str
    terminals: list[wire.TerminalInfo]


_NOTIFICATIONS = (*methods.NOTIFICATIONS, methods.LOG_MESSAGE, methods.PROGRESS)


def _cwd(cwd: str | None, host: str | None, container: str | None) -> str | None:
    """A local cwd made absolute here, not by a server that may stand elsewhere; a
    remote one is the target's, taken as given."""
    remote = host is not None or container is not None
    return cwd if remote or cwd is None else os.path.abspath(cwd)


class RegistryClient:
    """An asyncio client of a terminal-registry server."""

    def __init__(self) -> None:
        self._client = Link(self._closed_by_server)
        self._queues: list[asyncio.Queue[Notification | None]] = []
        self._callbacks: dict[str, list[Callable[[Any], None]]] = {}
        self._spawned = False
        self.server_info: dict[str, Any] = {}
        self.capabilities: dict[str, Any] = {}
        for method in _NOTIFICATIONS:
            self._client.feature(method)(self._make_receiver(method))

    # -- connecting ---------------------------------------------------------------

    @classmethod
    async def spawn(
        cls,
        settings: Mapping[str, Any] | None = None,
        command: list[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> RegistryClient:
        """Start ``terminal-registry serve --stdio`` and initialise it."""
        client = cls()
        argv = command or [sys.executable, "-m", "protocol.cli", "serve", "--stdio"]
        await client._client.start_io(*argv, env=dict(env) if env is not None else None)
        client._spawned = True
        await client._initialize(settings)
        return client

    @classmethod
    async def connect(
        cls, socket_path: str, settings: Mapping[str, Any] | None = None
    ) -> RegistryClient:
        """Connect to ``terminal-registry serve --socket PATH`` and initialise."""
        client = cls()
        await client._client.start_unix(socket_path)
        await client._initialize(settings)
        return client

    async def _initialize(self, settings: Mapping[str, Any] | None) -> None:
        result = await self._request(
            methods.INITIALIZE,
            {
                "processId": os.getpid(),
                "capabilities": {},
                "clientInfo": {"name": "terminal-registry-python"},
                "initializationOptions": dict(settings or {}),
            },
        )
        self.server_info = result.get("serverInfo") or {}
        self.capabilities = (result.get("capabilities") or {}).get("experimental") or {}
        self._client.protocol.notify(methods.INITIALIZED, {})

    async def close(self) -> None:
        """``shutdown`` and ``exit``: a spawned server ends; a socket server goes on."""
        if self._client.stopped:
            return
        try:
            await asyncio.wait_for(self._request(methods.SHUTDOWN, None), 30)
            self._client.protocol.notify(methods.EXIT, None)
        except (RegistryError, ConnectionError, RuntimeError, TimeoutError):
            pass
        if self._spawned and self._client._server is not None:
            try:
                await asyncio.wait_for(self._client._server.wait(), 30)
            except TimeoutError:
                self._client._server.kill()
        await self._client.stop()  # type: ignore[no-untyped-call]
        self._client.lost()

    async def __aenter__(self) -> RegistryClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    # -- requests -------------------------------------------------------------------

    async def _request(self, method: str, params: Any) -> Any:
        return await self._client.request(method, params)

    async def acquire(
        self,
        cwd: str,
        task_id: str | None = None,
        provider: str = "shell",
        *,
        limits: wire.Limits | None = None,
        host: str | None = None,
        container: str | None = None,
    ) -> wire.TerminalInfo:
        """A terminal for the task in ``cwd`` (on ``host`` or in ``container`` when
        given); ``limits`` become the terminal's own."""
        params: dict[str, Any] = {
            "cwd": _cwd(cwd, host, container),
            "taskId": task_id,
            "provider": provider,
        }
        params.update({k: v for k, v in {"host": host, "container": container}.items() if v})
        if limits is not None:
            params["limits"] = wire.unstructure(limits)
        return _terminal(await self._request(methods.ACQUIRE, params))

    async def run(
        self,
        command: str,
        *,
        terminal_id: int | None = None,
        cwd: str | None = None,
        task_id: str | None = None,
        provider: str | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        background: bool = False,
        work_done_token: str | int | None = None,
        limits: wire.Limits | None = None,
        yield_on_input: bool = False,
        host: str | None = None,
        container: str | None = None,
    ) -> wire.RunResult:
        """Run a command (on ``host`` or in ``container`` when given); ``timeout`` in
        seconds. With ``background``, returns once started; with ``yield_on_input``,
        once it waits for input (``waiting_for``) or ends.  ``limits``: this run's
        resource limits (``wire.Limits(memory_mb=256)``)."""
        params: dict[str, Any] = {"command": command, "background": background}
        optional = {
            "yieldOnInput": True if yield_on_input else None,
            "terminalId": terminal_id,
            "cwd": _cwd(cwd, host, container),
            "host": host,
            "container": container,
            "taskId": task_id,
            "provider": provider,
            "timeoutMs": round(timeout * 1000) if timeout is not None else None,
            "env": dict(env) if env is not None else None,
            "workDoneToken": work_done_token,
            "limits": wire.unstructure(limits) if limits is not None else None,
        }
        params.update({k: v for k, v in optional.items() if v is not None})
        result = await self._request(methods.RUN, params)
        return wire.converter.structure(result, wire.RunResult)

    async def wait(
        self,
        *,
        run_id: int | None = None,
        terminal_id: int | None = None,
        timeout: float | None = None,
        yield_on_input: bool = True,
    ) -> wire.RunResult:
        """Until the run ends (by id, or a terminal's current run), or it waits for input
        (unless ``yield_on_input`` is False), or ``timeout`` seconds have passed: then
        ``state`` is ``running``.  Cancelling stops the waiting, not the command."""
        timeout_ms = round(timeout * 1000) if timeout is not None else None
        optional = {"runId": run_id, "terminalId": terminal_id, "timeoutMs": timeout_ms}
        params: dict[str, Any] = {"yieldOnInput": yield_on_input}
        params.update({k: v for k, v in optional.items() if v is not None})
        result = await self._request(methods.WAIT, params)
        return wire.converter.structure(result, wire.RunResult)

    async def send_keys(self, terminal_id: int, keys: list[str]) -> None:
        """Named keys: ``["q"]``, ``["C-c"]``, ``["Escape", ":q!", "Enter"]``."""
        await self._request(methods.SEND_KEYS, {"terminalId": terminal_id, "keys": list(keys)})

    async def write(self, terminal_id: int, data: str) -> None:
        await self._request(methods.WRITE, {"terminalId": terminal_id, "data": data})

    async def resize(self, terminal_id: int, cols: int, rows: int) -> None:
        params = {"terminalId": terminal_id, "cols": cols, "rows": rows}
        await self._request(methods.RESIZE, params)

    async def kill(self, terminal_id: int, run_id: int | None = None) -> None:
        """End the running command; with ``run_id``, only if that run is the one running."""
        params: dict[str, Any] = {"terminalId": terminal_id}
        if run_id is not None:
            params["runId"] = run_id
        await self._request(methods.KILL, params)

    async def close_terminal(self, terminal_id: int) -> None:
        await self._request(methods.CLOSE, {"terminalId": terminal_id})

    async def list(
        self, task_id: str | None = None, busy: bool | None = None
    ) -> list[wire.TerminalInfo]:
        params = {k: v for k, v in {"taskId": task_id, "busy": busy}.items() if v is not None}
        return [_terminal(t) for t in await self._request(methods.LIST, params)]

    async def get(self, terminal_id: int) -> wire.TerminalInfo:
        return _terminal(await self._request(methods.GET, {"terminalId": terminal_id}))

    async def output(
        self, terminal_id: int, *, run_id: int | None = None, peek: bool = False
    ) -> str:
        """Output not retrieved yet (of one run, with ``run_id``); marked retrieved unless
        ``peek``."""
        params: dict[str, Any] = {"terminalId": terminal_id}
        if run_id is not None:
            params["runId"] = run_id
        if peek:
            params["peek"] = True
        result = await self._request(methods.OUTPUT, params)
        return str(result["output"])

    async def replay(self, terminal_id: int, max_bytes: int | None = None) -> str:
        params: dict[str, Any] = {"terminalId": terminal_id}
        if max_bytes is not None:
            params["maxBytes"] = max_bytes
        return str((await self._request(methods.REPLAY, params))["data"])

    async def release(self, task_id: str) -> None:
        await self._request(methods.RELEASE, {"taskId": task_id})

    async def environment_details(
        self,
        task_id: str | None = None,
        cooldown_timeout: float | None = None,
        *,
        peek: bool = False,
    ) -> EnvironmentDetails:
        """The report; with ``peek`` its output is not marked retrieved."""
        params: dict[str, Any] = {}
        if task_id is not None:
            params["taskId"] = task_id
        if cooldown_timeout is not None:
            params["cooldownTimeoutMs"] = round(cooldown_timeout * 1000)
        if peek:
            params["peek"] = True
        result = await self._request(methods.ENVIRONMENT_DETAILS, params)
        return EnvironmentDetails(result["markdown"], [_terminal(t) for t in result["terminals"]])

    # -- notifications --------------------------------------------------------------

    def on(self, method: str, callback: Callable[[Any], None]) -> None:
        """Call ``callback(params)`` for every notification named ``method``."""
        self._callbacks.setdefault(method, []).append(callback)

    def notifications(self) -> NotificationStream:
        """Every notification from now on (subscribed at this call), in order.

        ``async for note in client.notifications(): ...`` -- ends when the
        connection does; ``aclose()`` unsubscribes.
        """
        queue: asyncio.Queue[Notification | None] = asyncio.Queue()
        self._queues.append(queue)
        return NotificationStream(self._queues, queue)

    def _make_receiver(self, method: str) -> Callable[[Any], None]:
        def receive(params: Any) -> None:
            for callback in self._callbacks.get(method, []):
                callback(params)
            for queue in self._queues:
                queue.put_nowait(Notification(method, params))

        return receive

    @property
    def connected(self) -> bool:
        """False once the connection has ended (the server closed it or went away)."""
        return self._client.connected

    def _closed_by_server(self) -> None:
        for queue in self._queues:
            queue.put_nowait(None)


def _terminal(data: Any) -> wire.TerminalInfo:
    return wire.converter.structure(data, wire.TerminalInfo)
