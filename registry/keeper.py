"""The keeper: a running registry's side of owning processes, so that they end with it.

A registry given a :class:`Keeper` (the server always gives one) places every
terminal's processes -- the server's tag in their environment, a cgroup of the
terminal's own where the machine allows one (:mod:`registry.cgroups`) -- and keeps
the record (:mod:`registry.ownership`) that a watchdog (:mod:`registry.watchdog`)
reaps from the moment the server dies, however it dies.  On start it reaps what a
dead predecessor left; on a clean close it discards its record and lets the
watchdog go.
"""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable

from .cgroups import Cgroup, CgroupSupport, detect
from .ownership import (
    SERVER_TAG_VARIABLE,
    OwnershipRecord,
    Reaped,
    default_state_directory,
    live_tags,
    reap_stale,
)
from .terminals.base import Terminal
from .terminals.children import Placement
from .watchdog import Watchdog
from .watchdog import start as start_watchdog

__all__ = ["Keeper"]

log = logging.getLogger(__name__)

#: A server's cgroup is named this plus its tag.
_GROUP_PREFIX = "terminal-registry-"


class Keeper:
    """Places terminals' processes and keeps the record of them."""

    def __init__(
        self,
        record: OwnershipRecord,
        cgroups: CgroupSupport | None,
        group: Cgroup | None,
        watchdog: Watchdog | None,
    ) -> None:
        self.record = record
        self.cgroups = cgroups
        self._group = group
        self._watchdog = watchdog
        self._placements: dict[int, Placement] = {}
        #: What the predecessors' records left, reaped when this keeper started.
        self.reaped: list[Reaped] = []

    @classmethod
    def start(
        cls,
        state_directory: str | None = None,
        *,
        watchdog: bool = True,
    ) -> Keeper:
        """Reap dead predecessors, write this server's record, start its watchdog."""
        directory = state_directory or default_state_directory()
        reaped = reap_stale(directory)
        tag = secrets.token_hex(8)
        record = OwnershipRecord.create(directory, tag)
        support = detect()
        if support is not None:
            live = {f"{_GROUP_PREFIX}{tag}" for tag in live_tags(directory)}
            support.sweep(_GROUP_PREFIX, keep=live | {f"{_GROUP_PREFIX}{tag}"})
        group = support.create(f"{_GROUP_PREFIX}{tag}") if support is not None else None
        if group is not None:
            record.cgroup = dict(group.paths)
            record.save()
        dog = start_watchdog(record.path) if watchdog else None
        keeper = cls(record, support, group, dog)
        keeper.reaped = reaped
        for result in reaped:
            log.warning("reaped a dead server's leftovers: %s", result.describe())
        return keeper

    @property
    def tag(self) -> str:
        return self.record.tag

    def describe(self) -> str:
        """What ends this server's processes: for logs and reports."""
        how = self.cgroups.describe() if self.cgroups else "no cgroup (tags and groups only)"
        dog = f"watchdog {self._watchdog.pid}" if self._watchdog else "no watchdog"
        return f"{how}; {dog}; record {self.record.path}"

    # -- terminals ------------------------------------------------------------------

    def placement(self, terminal_id: int) -> Placement:
        """Where a new terminal's processes go."""
        group = None
        if self.cgroups is not None:
            group = self.cgroups.create(f"{_GROUP_PREFIX}{self.tag}", f"t{terminal_id}")
        placement = Placement({SERVER_TAG_VARIABLE: self.tag}, group)
        self._placements[terminal_id] = placement
        return placement

    def cgroup_members(self, terminal_id: int) -> Callable[[], set[int]] | None:
        """How to list the processes in a terminal's cgroup; None without one."""
        placement = self._placements.get(terminal_id)
        if placement is None or placement.cgroup is None:
            return None
        return placement.cgroup.members

    def adopt(self, terminal: Terminal) -> None:
        """Write a started terminal into the record."""
        placement = self._placements.get(terminal.id)
        group = placement.cgroup if placement is not None else None
        self.record.add_terminal(
            terminal.id,
            tag=terminal.tag,
            pid=terminal.pid,
            scratch=terminal.scratch,
            cgroup=dict(group.paths) if group is not None else None,
        )

    def forget(self, terminal_id: int) -> None:
        """A terminal closed (and ended its processes): out of the record."""
        placement = self._placements.pop(terminal_id, None)
        if placement is not None and placement.cgroup is not None:
            # Empty by now: the terminal ended its processes and waited for them.
            placement.cgroup.remove()
        self.record.remove_terminal(terminal_id)

    def note_groups(self, terminal_id: int, groups: set[int], sessions: set[int]) -> None:
        self.record.note_groups(terminal_id, groups, sessions)

    def add_cleanup(self, path: str) -> None:
        """A file to remove if the server dies (its socket, its pid file)."""
        if path not in self.record.cleanup:
            self.record.cleanup.append(path)
            self.record.save()

    # -- ending ---------------------------------------------------------------------

    def close(self) -> None:
        """The registry closed every terminal: nothing is left to reap."""
        for terminal_id in list(self._placements):
            self.forget(terminal_id)
        if self._group is not None:
            self._group.remove()
        self.record.discard()
        if self._watchdog is not None:
            self._watchdog.stand_down()
            self._watchdog = None
