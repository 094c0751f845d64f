"""Notifications as the asyncio client hands them out: one at a time, in order.

:meth:`protocol.client.RegistryClient.notifications` subscribes a queue and returns
a :class:`NotificationStream` over it; the client puts every notification in every
subscribed queue, and None when the connection ends.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

__all__ = ["Notification", "NotificationStream"]


@dataclass(frozen=True)
class Notification:
    method: str
    params: Any


class NotificationStream:
    """An async iterator of notifications, subscribed from its creation."""

    def __init__(
        self,
        queues: list[asyncio.Queue[Notification | None]],
        queue: asyncio.Queue[Notification | None],
    ) -> None:
        self._queues = queues
        self._queue = queue

    def __aiter__(self) -> NotificationStream:
        return self

    async def __anext__(self) -> Notification:
        item = await self._queue.get()
        if item is None:
            await self.aclose()
            raise StopAsyncIteration
        return item

    async def aclose(self) -> None:
        if self._queue in self._queues:
            self._queues.remove(self._queue)
