"""Control groups for terminals: every process a terminal starts stays findable,
killable and limited, whatever it does to escape.

A process that calls ``setsid``, double-forks and clears its environment (``env -i``)
leaves the shell's tree, its session and its environment tag behind; it cannot leave
its cgroup, which every child inherits across ``fork``.  So where the kernel lets us,
each terminal gets a cgroup of its own: ending the terminal ends everything in it,
and ``pids`` and ``memory`` limits apply to all of it.

Detected, never assumed -- a machine may offer cgroup v2 (delegated by systemd to a
normal user, or as root), v1 controllers (as root; these project's machines are a v1
+ v2 hybrid), both, or nothing writable -- from ``/proc/self/cgroup`` and
``/proc/self/mountinfo``.  New groups are made *below the server's own* in each
hierarchy, so they stay inside whatever the server itself is confined to.

What each hierarchy is used for:

* membership and killing: v2 (``cgroup.kill``, kernel >= 5.14, kills every member
  at once, new forks included) or v1 ``freezer`` (freeze, kill each member, thaw --
  no member can fork while frozen), else v1 ``pids``'s member list;
* ``pids`` limit: v2 with the ``pids`` controller, else v1 ``pids``;
* ``memory`` limit: v2 with the ``memory`` controller, else v1 ``memory``.

All file I/O is small reads and writes under ``/sys/fs/cgroup``; errors become
"unsupported", never a failure to start a terminal.
"""

from __future__ import annotations

import contextlib
import os
import signal
from dataclasses import dataclass, field

__all__ = ["Cgroup", "CgroupSupport", "Hierarchy", "detect"]


@dataclass(frozen=True)
class Hierarchy:
    """One mounted hierarchy and where the server sits in it."""

    #: "v2", or the v1 controller's name ("pids", "memory", "freezer").
    kind: str
    mount: str
    #: The server's own cgroup, as a directory under ``mount``.
    own: str
    #: v2 only: controllers enabled for children (from cgroup.controllers).
    controllers: frozenset[str] = frozenset()

    def path(self, *parts: str) -> str:
        return os.path.join(self.own, *parts)


def _mounts() -> dict[str, tuple[str, str]]:
    """Mounted cgroup hierarchies: key ("v2" or a v1 controller) -> (mount, root)."""
    found: dict[str, tuple[str, str]] = {}
    try:
        with open("/proc/self/mountinfo") as f:
            lines = f.read().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields = left.split()
        rest = right.split()
        if len(fields) < 5 or len(rest) < 3:
            continue
        root, mount = fields[3], fields[4]
        fstype, options = rest[0], rest[2].split(",")
        if fstype == "cgroup2":
            found.setdefault("v2", (mount, root))
        elif fstype == "cgroup":
            for controller in ("pids", "memory", "freezer"):
                if controller in options:
                    found.setdefault(controller, (mount, root))
    return found


def _membership() -> dict[str, str]:
    """The server's own cgroup path per hierarchy key, from /proc/self/cgroup."""
    own: dict[str, str] = {}
    try:
        with open("/proc/self/cgroup") as f:
            lines = f.read().splitlines()
    except OSError:
        return own
    for line in lines:
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            own["v2"] = path
        for controller in controllers.split(","):
            if controller in ("pids", "memory", "freezer"):
                own[controller] = path
    return own


def _writable_dir(path: str) -> bool:
    return os.path.isdir(path) and os.access(path, os.W_OK | os.X_OK)


def _kills_groups(directory: str) -> bool:
    """Whether v2 groups made here have ``cgroup.kill`` (a probe group, removed)."""
    probe = os.path.join(directory, f"terminal-registry-probe-{os.getpid()}")
    try:
        os.mkdir(probe)
    except FileExistsError:
        pass
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(probe, "cgroup.kill"))
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe)


def detect() -> CgroupSupport | None:
    """The hierarchies the server may make groups in; None when there are none."""
    mounts = _mounts()
    own = _membership()
    usable: dict[str, Hierarchy] = {}
    for key, (mount, root) in mounts.items():
        if key not in own:
            continue
        relative = os.path.relpath(own[key], root) if root != "/" else own[key].lstrip("/")
        directory = os.path.normpath(os.path.join(mount, relative))
        if not directory.startswith(mount) or not _writable_dir(directory):
            continue
        controllers: frozenset[str] = frozenset()
        if key == "v2":
            if not _kills_groups(directory):
                continue  # before 5.14 v2 cannot kill a group at once: v1 does better
            # Controllers our children get: those enabled below us, not merely
            # available (enabling them ourselves would break v2's rule that a group
            # with controllers for its children holds no processes -- the server).
            with (
                contextlib.suppress(OSError),
                open(os.path.join(directory, "cgroup.subtree_control")) as f,
            ):
                controllers = frozenset(f.read().split())
        usable[key] = Hierarchy(key, mount, directory, controllers)
    if "v2" not in usable and "freezer" not in usable and "pids" not in usable:
        return None
    return CgroupSupport(usable)


@dataclass
class CgroupSupport:
    """What this machine lets the server do with cgroups."""

    hierarchies: dict[str, Hierarchy]

    @property
    def killer(self) -> str:
        """How a group is ended: "cgroup.kill", "freezer" or "signals"."""
        if "v2" in self.hierarchies:
            return "cgroup.kill"
        return "freezer" if "freezer" in self.hierarchies else "signals"

    def limits(self) -> frozenset[str]:
        """Which limits can be set: a subset of {"pids", "memory"}."""
        v2 = self.hierarchies.get("v2")
        found = set(v2.controllers & {"pids", "memory"}) if v2 is not None else set()
        found |= {key for key in ("pids", "memory") if key in self.hierarchies}
        return frozenset(found)

    def describe(self) -> str:
        kinds = ", ".join(sorted(self.hierarchies))
        return f"cgroups ({kinds}; ends groups by {self.killer})"

    def sweep(self, prefix: str, keep: set[str]) -> list[str]:
        """Remove empty groups named ``prefix...`` below ours, but those in ``keep``.

        A dead server's group can outlast its reaping (the kernel releases a group a
        moment after its last member's exit completes); the next server clears it.
        """
        removed = []
        for hierarchy in self.hierarchies.values():
            with contextlib.suppress(OSError):
                for name in os.listdir(hierarchy.own):
                    path = os.path.join(hierarchy.own, name)
                    if name.startswith(prefix) and name not in keep and os.path.isdir(path):
                        group = Cgroup({hierarchy.kind: path}, self)
                        if not group.members():
                            group.remove()
                            if not os.path.exists(path):
                                removed.append(path)
        return removed

    def create(self, *parts: str) -> Cgroup:
        """Make (or reuse) the group ``parts`` below the server's own, in every hierarchy."""
        paths: dict[str, str] = {}
        for key, hierarchy in self.hierarchies.items():
            path = hierarchy.path(*parts)
            try:
                os.makedirs(path, exist_ok=True)
            except OSError:
                continue
            paths[key] = path
        return Cgroup(paths, self)


@dataclass
class Cgroup:
    """One group, present in one or more hierarchies (key -> directory)."""

    paths: dict[str, str]
    support: CgroupSupport = field(repr=False)

    @classmethod
    def at(cls, paths: dict[str, str]) -> Cgroup:
        """A group known from a record (the watchdog, a successor server)."""
        return cls(paths, CgroupSupport({}))

    def procs_files(self) -> list[str]:
        """The ``cgroup.procs`` files a process writes ``0`` into to join the group."""
        return [os.path.join(path, "cgroup.procs") for path in self.paths.values()]

    def add(self, pid: int) -> None:
        for procs in self.procs_files():
            with contextlib.suppress(OSError), open(procs, "w") as f:
                f.write(str(pid))

    def members(self) -> set[int]:
        found: set[int] = set()
        for procs in self.procs_files():
            with contextlib.suppress(OSError), open(procs) as f:
                found.update(int(line) for line in f.read().split())
        return found

    def kill(self) -> set[int]:
        """SIGKILL every member (no member can fork away meanwhile); returns them."""
        members = self.members()
        v2 = self.paths.get("v2")
        if v2 is not None and os.path.exists(os.path.join(v2, "cgroup.kill")):
            with contextlib.suppress(OSError), open(os.path.join(v2, "cgroup.kill"), "w") as f:
                f.write("1")
            return members
        freezer = self.paths.get("freezer")
        state = os.path.join(freezer, "freezer.state") if freezer else None
        if state is not None:
            with contextlib.suppress(OSError), open(state, "w") as f:
                f.write("FROZEN")
            members = self.members()  # final: nobody forks while frozen
        for pid in members:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        if state is not None:
            # Killed tasks die only once thawed.
            with contextlib.suppress(OSError), open(state, "w") as f:
                f.write("THAWED")
        return members

    def set_limits(self, *, memory_bytes: int | None, pids: int | None) -> set[str]:
        """Apply limits (None lifts one); returns those that took effect."""
        applied: set[str] = set()
        v2 = self.paths.get("v2")
        for name, value, v2_file, v1_key, v1_file in (
            ("memory", memory_bytes, "memory.max", "memory", "memory.limit_in_bytes"),
            ("pids", pids, "pids.max", "pids", "pids.max"),
        ):
            text = str(value) if value is not None else ("max" if name == "pids" else "-1")
            targets = []
            if v2 is not None and os.path.exists(os.path.join(v2, v2_file)):
                targets.append((os.path.join(v2, v2_file), text if value is not None else "max"))
            elif v1_key in self.paths:
                targets.append((os.path.join(self.paths[v1_key], v1_file), text))
            for path, content in targets:
                try:
                    with open(path, "w") as f:
                        f.write(content)
                except OSError:
                    continue
                if value is not None:
                    applied.add(name)
        return applied

    def limit_hits(self) -> dict[str, int]:
        """Counters of limits hit so far: {"memory": n, "pids": n} (what is known)."""
        hits: dict[str, int] = {}
        v2 = self.paths.get("v2")
        sources = [
            (v2, "memory.events", "oom_kill", "memory"),
            (v2, "pids.events", "max", "pids"),
            (self.paths.get("memory"), "memory.oom_control", "oom_kill", "memory"),
            (self.paths.get("pids"), "pids.events", "max", "pids"),
        ]
        for directory, name, key, limit in sources:
            if directory is None or limit in hits:
                continue
            try:
                with open(os.path.join(directory, name)) as f:
                    text = f.read()
            except OSError:
                continue
            for line in text.splitlines():
                parts = line.split()
                if len(parts) == 2 and parts[0] == key:
                    hits[limit] = int(parts[1])
        return hits

    def remove(self) -> None:
        """Remove the (empty) group from every hierarchy; children first."""
        for path in self.paths.values():
            for root, dirs, _files in os.walk(path, topdown=False):
                for name in dirs:
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(root, name))
            with contextlib.suppress(OSError):
                os.rmdir(path)
