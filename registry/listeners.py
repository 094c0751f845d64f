"""Observer lists: who hears a subject's events, and delivery that never breaks it.

A terminal's read path and the registry both tell observers what happened; an
observer that raises is logged and skipped, so one faulty listener (a client that
vanished, say) never stops the output reaching the others.
"""

from __future__ import annotations

import contextlib
import logging
from typing import Generic, TypeVar

__all__ = ["Listeners"]

log = logging.getLogger(__name__)

L = TypeVar("L")


class Listeners(Generic[L]):
    def __init__(self) -> None:
        self._items: list[L] = []

    def add(self, listener: L) -> None:
        self._items.append(listener)

    def remove(self, listener: L) -> None:
        with contextlib.suppress(ValueError):
            self._items.remove(listener)

    def emit(self, event: str, *args: object) -> None:
        """Call ``listener.<event>(*args)`` on each, in subscription order."""
        for listener in list(self._items):
            try:
                getattr(listener, event)(*args)
            except Exception:
                log.exception("listener %s failed on %s", listener, event)
