"""Where terminals stand, and which one a task gets: the two-tier choice.

:class:`PlaceIndex` indexes entries by (provider, normalised live cwd) and follows
them when they ``cd``, so a lookup only looks at the terminals standing in that one
directory (1,000 terminals answer as fast as 10).  :func:`choose` is the tier rule
over those, pure: no await, so choosing and binding happen in one step of the loop.
"""

from __future__ import annotations

from collections.abc import Iterable

from .entry import TerminalEntry, normalise_path

__all__ = ["PlaceIndex", "choose"]


def choose(
    candidates: Iterable[TerminalEntry], task_id: str | None, reuse: str = "idle"
) -> TerminalEntry | None:
    """Tier 1 (the task's own idle terminal), else tier 2 as far as ``reuse`` allows.

    ``reuse`` is "idle" (a released terminal, else another task's idle one),
    "released" (only one no task holds) or "never".  A terminal just handed to
    another task and not used yet is never taken from it.
    """
    second: TerminalEntry | None = None
    unbound: TerminalEntry | None = None
    for entry in candidates:
        terminal = entry.terminal
        if terminal.busy or terminal.closed:
            continue
        if entry.task_id == task_id:
            return entry  # tier 1
        if entry.claimed and entry.claimed_by != task_id:
            continue  # just handed to another task, not used yet
        if entry.task_id is None and unbound is None:
            unbound = entry
        elif entry.task_id is not None and second is None:
            second = entry
    if reuse == "never":
        return None
    if reuse == "released":
        return unbound
    return unbound or second  # tier 2


class PlaceIndex:
    """Entries by (provider, normalised live cwd), in the order they were added."""

    def __init__(self) -> None:
        self._places: dict[tuple[str, str], dict[int, TerminalEntry]] = {}

    def at(self, provider: str, key: str) -> Iterable[TerminalEntry]:
        return (self._places.get((provider, key)) or {}).values()

    def add(self, entry: TerminalEntry) -> None:
        where = (entry.terminal.provider, entry.key)
        self._places.setdefault(where, {})[entry.terminal.id] = entry

    def remove(self, entry: TerminalEntry) -> None:
        where = (entry.terminal.provider, entry.key)
        bucket = self._places.get(where)
        if bucket is not None:
            bucket.pop(entry.terminal.id, None)
            if not bucket:
                del self._places[where]

    def follow(self, entry: TerminalEntry) -> None:
        """The terminal may have moved (``cd``): re-file it under its live cwd."""
        key = normalise_path(entry.terminal.cwd)
        if key != entry.key:
            self.remove(entry)
            entry.key = key
            self.add(entry)
