"""The registry's index: terminals by (provider, normalised live cwd), and the choice.

A lookup looks at the terminals standing in that directory only, so 1,000 terminals
answer as fast as 10; the index follows ``cd`` (:meth:`TerminalIndex.moved`).
:meth:`TerminalIndex.find` is the two-tier choice of docs/registry.md: an idle
terminal of the task, else an idle one another task may hand over, as far as the
``reuseAcrossTasks`` setting allows.
"""

from __future__ import annotations

from .entry import TerminalEntry, normalise_path

__all__ = ["TerminalIndex"]


class TerminalIndex:
    """Entries by (provider, normalised live cwd); insertion order kept in a bucket."""

    def __init__(self) -> None:
        self._buckets: dict[tuple[str, str], dict[int, TerminalEntry]] = {}

    def add(self, entry: TerminalEntry) -> None:
        self._buckets.setdefault((entry.terminal.provider, entry.key), {})[entry.terminal.id] = (
            entry
        )

    def remove(self, entry: TerminalEntry) -> None:
        where = (entry.terminal.provider, entry.key)
        bucket = self._buckets.get(where)
        if bucket is not None:
            bucket.pop(entry.terminal.id, None)
            if not bucket:
                del self._buckets[where]

    def moved(self, entry: TerminalEntry) -> None:
        """The terminal may stand elsewhere now (its live cwd changed)."""
        key = normalise_path(entry.terminal.cwd)
        if key != entry.key:
            self.remove(entry)
            entry.key = key
            self.add(entry)

    def find(
        self, provider: str, key: str, task_id: str | None, reuse: str = "idle"
    ) -> TerminalEntry | None:
        """Tier 1, else tier 2 as far as ``reuse`` allows ("idle", "released", "never")."""
        bucket = self._buckets.get((provider, key))
        if not bucket:
            return None
        second: TerminalEntry | None = None
        unbound: TerminalEntry | None = None
        for entry in bucket.values():
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
