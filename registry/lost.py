"""Remote terminals whose connection was lost, remembered for their successors.

A remote shell (ssh, a container) dies with its connection, and its state with it:
variables, functions, jobs.  The registry keeps a short note of each such terminal
(its provider, target, task and last verified cwd) so that the next run on it -- by
its id, or the next run of its task on that target -- opens a new terminal where it
stood, and that run's note says what was lost.
"""

from __future__ import annotations

from dataclasses import dataclass

from .terminals.base import Terminal

__all__ = ["LostTerminal", "LostTerminals"]

#: Lost terminals remembered (the oldest are forgotten first).
KEPT = 64


@dataclass(frozen=True)
class LostTerminal:
    """Enough of a lost terminal to open its successor."""

    terminal_id: int
    provider: str
    target: str | None
    cwd: str
    task_id: str | None
    reason: str

    def note(self, successor: int) -> str:
        """What the successor's first run says."""
        return (
            f"{self.reason}: the shell state of terminal {self.terminal_id} (variables, "
            f"functions, jobs) was lost; this is terminal {successor}, in {self.cwd}"
        )


class LostTerminals:
    """The registry's notes of lost terminals, each taken at most once."""

    def __init__(self) -> None:
        self._by_id: dict[int, LostTerminal] = {}

    def remember(self, terminal: Terminal, task_id: str | None) -> None:
        """A terminal closed: noted if it was its connection that ended it."""
        if terminal.lost is not None:
            where = (terminal.provider, terminal.target, terminal.cwd)
            self.add(LostTerminal(terminal.id, *where, task_id, terminal.lost))

    def add(self, lost: LostTerminal) -> None:
        self._by_id[lost.terminal_id] = lost
        while len(self._by_id) > KEPT:
            del self._by_id[next(iter(self._by_id))]

    def take(self, terminal_id: int) -> LostTerminal | None:
        """The note of terminal ``terminal_id`` if it was lost (now forgotten)."""
        return self._by_id.pop(terminal_id, None)

    def take_for(
        self, task_id: str | None, provider: str, target: str | None
    ) -> LostTerminal | None:
        """The note of a terminal the task lost on that target, if any (now forgotten)."""
        for terminal_id, lost in self._by_id.items():
            if (lost.task_id, lost.provider, lost.target) == (task_id, provider, target):
                del self._by_id[terminal_id]
                return lost
        return None
