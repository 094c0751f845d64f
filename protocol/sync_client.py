"""A blocking client for scripts: :class:`~protocol.client.RegistryClient` on a
private event loop thread, every method waiting for its answer.

::

    with SyncRegistryClient.spawn() as client:         # or .connect(socket_path)
        result = client.run("pytest -q", cwd="/repo", task_id="t1")
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, TypeVar

from . import types as wire
from .client import EnvironmentDetails, RegistryClient

__all__ = ["SyncRegistryClient"]

T = TypeVar("T")


class SyncRegistryClient:
    """Blocking wrapper for scripts: the asyncio client on a private loop thread."""

    def __init__(self, client_factory: Callable[[], Coroutine[Any, Any, RegistryClient]]) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._client = self._call(client_factory())

    @classmethod
    def spawn(cls, settings: Mapping[str, Any] | None = None) -> SyncRegistryClient:
        return cls(lambda: RegistryClient.spawn(settings))

    @classmethod
    def connect(cls, socket_path: str) -> SyncRegistryClient:
        return cls(lambda: RegistryClient.connect(socket_path))

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def run(self, command: str, **kwargs: Any) -> wire.RunResult:
        return self._call(self._client.run(command, **kwargs))

    def acquire(self, cwd: str, *args: Any, **kwargs: Any) -> wire.TerminalInfo:
        """As :meth:`RegistryClient.acquire` (``limits=``, ``host=``, ``container=``)."""
        return self._call(self._client.acquire(cwd, *args, **kwargs))

    def write(self, terminal_id: int, data: str) -> None:
        self._call(self._client.write(terminal_id, data))

    def wait(self, **kwargs: Any) -> wire.RunResult:
        return self._call(self._client.wait(**kwargs))

    def send_keys(self, terminal_id: int, keys: list[str]) -> None:
        self._call(self._client.send_keys(terminal_id, keys))

    def kill(self, terminal_id: int) -> None:
        self._call(self._client.kill(terminal_id))

    def list(self, task_id: str | None = None, busy: bool | None = None) -> list[wire.TerminalInfo]:
        return self._call(self._client.list(task_id, busy))

    def output(self, terminal_id: int) -> str:
        return self._call(self._client.output(terminal_id))

    def release(self, task_id: str) -> None:
        self._call(self._client.release(task_id))

    def environment_details(
        self, task_id: str | None = None, cooldown_timeout: float | None = None
    ) -> EnvironmentDetails:
        return self._call(self._client.environment_details(task_id, cooldown_timeout))

    def close(self) -> None:
        try:
            self._call(self._client.close())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._loop.close()

    def __enter__(self) -> SyncRegistryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
