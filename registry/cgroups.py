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
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

__all__ = ["FREEZE_WAIT", "Cgroup", "CgroupSupport", "Hierarchy", "detect"]

#: How long a freeze is awaited before killing goes ahead (it takes well under a
#: millisecond for a few hundred idle members on these machines).
FREEZE_WAIT = 0.1


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
        v2 = self.paths.get("v2")
        if v2 is not None and os.path.exists(os.path.join(v2, "cgroup.kill")):
            members = self.members()
            with contextlib.suppress(OSError), open(os.path.join(v2, "cgroup.kill"), "w") as f:
                f.write("1")
            return members
        with self._frozen():
            members = self.members()  # final once frozen: nobody forks meanwhile
            for pid in members:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        return members

    def limit_kinds(self) -> frozenset[str]:
        """What this group can limit and measure: a subset of {"memory", "pids", "cpu"}."""
        kinds = set()
        v2 = self.paths.get("v2")
        for kind, v2_file in (("memory", "memory.max"), ("pids", "pids.max"), ("cpu", "cpu.stat")):
            if (v2 is not None and os.path.exists(os.path.join(v2, v2_file))) or (
                kind in self.paths
            ):
                kinds.add(kind)
        return frozenset(kinds)

    def set_limits(self, *, memory_bytes: int | None, pids: int | None) -> set[str]:
        """Apply limits (None lifts one); returns those that took effect.

        On v1, memory plus swap (``memsw``) is limited too where the kernel accounts
        swap, so a limited command cannot swap its way past its limit; v1 requires
        memsw >= memory at every moment, hence the order of the writes.
        """
        v2 = self.paths.get("v2")
        memory = str(memory_bytes) if memory_bytes is not None else None
        pid_text = str(pids) if pids is not None else "max"
        # (limit, directory, [(file, content)] in the order to write them)
        writes: list[tuple[str, str, list[tuple[str, str]]]] = []
        if v2 is not None and os.path.exists(os.path.join(v2, "memory.max")):
            swap = "0" if memory else "max"
            writes.append(
                ("memory", v2, [("memory.max", memory or "max"), ("memory.swap.max", swap)])
            )
        elif "memory" in self.paths:
            files = [
                ("memory.limit_in_bytes", memory or "-1"),
                ("memory.memsw.limit_in_bytes", memory or "-1"),
            ]
            # Lowering: memory first; raising or lifting: memsw first.
            writes.append(("memory", self.paths["memory"], files if memory else files[::-1]))
        if v2 is not None and os.path.exists(os.path.join(v2, "pids.max")):
            writes.append(("pids", v2, [("pids.max", pid_text)]))
        elif "pids" in self.paths:
            writes.append(("pids", self.paths["pids"], [("pids.max", pid_text)]))
        applied: set[str] = set()
        for name, directory, files in writes:
            for filename, content in files:
                path = os.path.join(directory, filename)
                try:
                    with open(path, "w") as f:
                        f.write(content)
                except OSError:
                    continue  # memsw or swap.max: not every kernel accounts swap
                value = memory_bytes if name == "memory" else pids
                if filename in ("memory.max", "memory.limit_in_bytes", "pids.max") and value:
                    applied.add(name)
        return applied

    def cpu_seconds(self) -> float | None:
        """CPU time the group's processes have used (v2 ``cpu.stat``), if known."""
        v2 = self.paths.get("v2")
        if v2 is None:
            return None
        try:
            with open(os.path.join(v2, "cpu.stat")) as f:
                for line in f:
                    key, _, value = line.partition(" ")
                    if key == "usage_usec":
                        return int(value) / 1e6
        except (OSError, ValueError):
            return None
        return None

    def kill_where(self, choose: Callable[[set[int]], set[int]]) -> set[int]:
        """SIGKILL the members ``choose`` picks, with the group frozen meanwhile (so
        that a fork bomb cannot outrun us); returns those killed."""
        killed: set[int] = set()
        with self._frozen():
            for _attempt in range(3):
                chosen = choose(self.members()) - killed
                if not chosen:
                    break
                for pid in chosen:
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                killed |= chosen
        return killed

    @contextlib.contextmanager
    def _frozen(self) -> Iterator[None]:
        """The group frozen for the block (where a freezer exists), thawed after --
        killed tasks die only once thawed.

        Freezing is asynchronous in both versions: the state reads ``FREEZING`` (v1)
        or ``cgroup.events`` lacks ``frozen 1`` (v2) until every member has stopped,
        and a member not yet stopped can still fork.  v1 gives no event for it, so
        the state is read again, briefly, for at most :data:`FREEZE_WAIT` seconds;
        past that the block runs anyway (callers list members more than once).
        """
        freezer = self._freezer()
        if freezer is None:
            yield
            return
        path, frozen, thawed = freezer
        try:
            with contextlib.suppress(OSError), open(path, "w") as f:
                f.write(frozen)
            deadline = time.monotonic() + FREEZE_WAIT
            while not self._is_frozen() and time.monotonic() < deadline:
                time.sleep(0.0005)
            yield
        finally:
            with contextlib.suppress(OSError), open(path, "w") as f:
                f.write(thawed)

    def _is_frozen(self) -> bool:
        v1 = self.paths.get("freezer")
        try:
            if v1 is not None and os.path.exists(os.path.join(v1, "freezer.state")):
                with open(os.path.join(v1, "freezer.state")) as f:
                    return f.read().strip() == "FROZEN"
            v2 = self.paths.get("v2")
            if v2 is not None:
                with open(os.path.join(v2, "cgroup.events")) as f:
                    return "frozen 1" in f.read().splitlines()
        except OSError:
            return True  # nothing to wait for
        return True

    def _freezer(self) -> tuple[str, str, str] | None:
        """The file that freezes the group, with its frozen and thawed contents."""
        v1 = self.paths.get("freezer")
        if v1 is not None and os.path.exists(os.path.join(v1, "freezer.state")):
            return os.path.join(v1, "freezer.state"), "FROZEN", "THAWED"
        v2 = self.paths.get("v2")
        if v2 is not None and os.path.exists(os.path.join(v2, "cgroup.freeze")):
            return os.path.join(v2, "cgroup.freeze"), "1", "0"
        return None

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
