"""Observer lists: who hears a subject's events, and delivery that never breaks it.

A terminal's read path and the registry both tell observers what happened; an
observer that raises is logged and skipped, so one faulty listener (a client that
vanished, say) never stops the output reaching the others.

Events are method calls checked by the type checker, not names looked up at run
time: ``listeners.call(lambda listener: listener.on_change(terminal))``, so a
misspelt event fails ``mypy`` instead of logging an error while serving.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
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

    def call(self, event: Callable[[L], object]) -> None:
        """``event(listener)`` for each listener, in subscription order."""
        for listener in list(self._items):
            try:
                event(listener)
            except Exception:
                log.exception("listener %s failed", listener)
