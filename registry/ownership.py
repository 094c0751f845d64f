"""What a server owns, written down so that it can be ended even after the server died.

Every process a server starts must end with it -- also when it is SIGKILLed, killed
by the OOM killer, or its machine's editor crashes.  A dead process cannot clean up,
so while it lives the server keeps a small record (:class:`OwnershipRecord`, one JSON
file per server in the state directory): its tag, and per terminal the terminal's
tag, its shell, the process groups and sessions seen while it ran, its scratch
directory and its cgroup; plus files to remove (the socket, the pid file).

Two readers act on a record of a dead server (:func:`reap`):

* the server's watchdog (:mod:`registry.watchdog`), the moment the server dies;
* the next server to start (:func:`reap_stale`), for whatever a watchdog could not
  end (it was killed too, or the machine rebooted into a kept state directory).

A process is the dead server's if it is in one of its cgroups, or carries its tag
(or a terminal's) in its environment, or belongs to a recorded process group or
session *and* started after the server did (so a reused number never condemns a
stranger) -- and is the same user's.

A remote terminal (an ssh host, a container) also leaves its reap command: once the
processes here are ended -- its client among them, which hangs up its session --
that command sweeps the target over a connection of its own for what escaped there
(docs/remote.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from .cgroups import Cgroup
from .private_dir import is_private, make_private_directory

__all__ = [
    "SERVER_TAG_VARIABLE",
    "OwnershipRecord",
    "Reaped",
    "default_state_directory",
    "live_tags",
    "reap",
    "reap_stale",
]

#: The reap commands of remote terminals run side by side for at most this long.
REMOTE_SWEEP_TIMEOUT = 20.0

#: Every process a server starts inherits this variable: the server's tag.
SERVER_TAG_VARIABLE = "TERMINAL_REGISTRY_SERVER"
_TERMINAL_TAG_VARIABLE = "TERMINAL_REGISTRY_TERMINAL"


def default_state_directory() -> str:
    """``$XDG_RUNTIME_DIR/terminal-registry/servers``, else one in the temp dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        base = os.path.join(runtime, "terminal-registry")
    else:
        import tempfile

        base = os.path.join(tempfile.gettempdir(), f"terminal-registry-{os.getuid()}")
    return os.path.join(base, "servers")


def _private_directory(path: str) -> None:
    """Create ``path`` 0700; refuse one that is not ours or open to others."""
    make_private_directory(path)
    if not is_private(path):
        raise PermissionError(f"state directory {path} is not a private directory of ours")


@dataclass
class OwnershipRecord:
    """One server's record: kept on disk by the server, read after its death."""

    path: str
    server_pid: int
    server_started: float
    tag: str
    cgroup: dict[str, str] = field(default_factory=dict)
    cleanup: list[str] = field(default_factory=list)
    terminals: dict[str, dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def create(cls, directory: str, tag: str) -> OwnershipRecord:
        import psutil

        _private_directory(directory)
        me = psutil.Process()
        path = os.path.join(directory, f"server-{me.pid}-{tag}.json")
        record = cls(path, me.pid, me.create_time(), tag)
        record.save()
        return record

    @classmethod
    def load(cls, path: str) -> OwnershipRecord | None:
        try:
            with open(path) as f:
                data = json.load(f)
            return cls(
                path,
                int(data["serverPid"]),
                float(data["serverStarted"]),
                str(data["tag"]),
                dict(data.get("cgroup", {})),
                list(data.get("cleanup", [])),
                dict(data.get("terminals", {})),
            )
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def save(self) -> None:
        """Write atomically (a reader never sees half a record)."""
        data = {
            "serverPid": self.server_pid,
            "serverStarted": self.server_started,
            "tag": self.tag,
            "cgroup": self.cgroup,
            "cleanup": self.cleanup,
            "terminals": self.terminals,
        }
        temporary = f"{self.path}.{os.getpid()}.tmp"
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(temporary, self.path)

    def discard(self) -> None:
        """The server ended cleanly: nothing is left to reap."""
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    # -- what the server tells the record -------------------------------------------

    def add_terminal(
        self,
        terminal_id: int,
        *,
        tag: str,
        pid: int | None,
        scratch: str | None,
        cgroup: dict[str, str] | None,
        reap: list[str] | None = None,
    ) -> None:
        self.terminals[str(terminal_id)] = {
            "tag": tag,
            "pid": pid,
            "scratch": scratch,
            "cgroup": cgroup or {},
            "groups": [],
            "sessions": [],
            "reap": reap,
        }
        self.save()

    def note_groups(self, terminal_id: int, groups: Iterable[int], sessions: Iterable[int]) -> None:
        """Process groups and sessions seen in a terminal; written only when new."""
        entry = self.terminals.get(str(terminal_id))
        if entry is None:
            return
        new_groups = set(groups) - set(entry["groups"])
        new_sessions = set(sessions) - set(entry["sessions"])
        if new_groups or new_sessions:
            entry["groups"] = sorted({*entry["groups"], *new_groups})
            entry["sessions"] = sorted({*entry["sessions"], *new_sessions})
            self.save()

    def remove_terminal(self, terminal_id: int) -> None:
        if self.terminals.pop(str(terminal_id), None) is not None:
            self.save()

    def server_alive(self) -> bool:
        import psutil

        try:
            proc = psutil.Process(self.server_pid)
            return abs(proc.create_time() - self.server_started) < 0.01 and proc.is_running()
        except psutil.Error:
            return False


@dataclass
class Reaped:
    """What reaping a dead server's record ended and removed."""

    server_pid: int
    processes: list[tuple[int, str]] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    #: Each remote terminal's reap command, and what it came to.
    swept: list[str] = field(default_factory=list)

    def describe(self) -> str:
        names = ", ".join(f"{pid} ({name})" for pid, name in self.processes) or "no process"
        paths = ", ".join(self.removed) or "nothing"
        remote = f"; swept {len(self.swept)} remote: {', '.join(self.swept)}" if self.swept else ""
        return f"server {self.server_pid} left {names}; removed {paths}{remote}"


def _owned_processes(record: OwnershipRecord) -> list[Any]:
    """Every living process of the same user that belonged to the dead server."""
    import psutil

    tags = {entry.get("tag") for entry in record.terminals.values()}
    groups = {g for entry in record.terminals.values() for g in entry.get("groups", [])}
    sessions = {s for entry in record.terminals.values() for s in entry.get("sessions", [])}
    members: set[int] = set()
    for paths in [record.cgroup, *(e.get("cgroup") or {} for e in record.terminals.values())]:
        members |= _all_members(paths)
    me, uid = os.getpid(), os.getuid()
    found = []
    for proc in psutil.process_iter(["uids", "create_time"]):
        if proc.pid in (me, record.server_pid):
            continue
        try:
            if proc.info["uids"].real != uid:
                continue
            if proc.pid in members:
                found.append(proc)
                continue
            later = proc.info["create_time"] >= record.server_started - 0.01
            if later and (os.getpgid(proc.pid) in groups or os.getsid(proc.pid) in sessions):
                found.append(proc)
                continue
            environ = proc.environ()
            if environ.get(SERVER_TAG_VARIABLE) == record.tag or (
                environ.get(_TERMINAL_TAG_VARIABLE) in tags
            ):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def _all_members(paths: dict[str, str]) -> set[int]:
    """Members of a group and of every group below it."""
    members: set[int] = set()
    for kind, path in paths.items():
        for root, _dirs, _files in os.walk(path):
            members |= Cgroup.at({kind: root}).members()
    return members


def reap(record: OwnershipRecord, grace: float = 1.0) -> Reaped:
    """End everything a dead server owned, remove its files; then its record."""
    import psutil

    result = Reaped(record.server_pid)
    procs = _owned_processes(record)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            result.processes.append((proc.pid, proc.name()))
            proc.send_signal(signal.SIGTERM)
    _gone, alive = psutil.wait_procs(procs, timeout=grace)
    # Whatever is left in a cgroup (new forks included) goes at once; then the rest.
    for paths in [*(e.get("cgroup") or {} for e in record.terminals.values()), record.cgroup]:
        for kind, path in paths.items():
            for root, _dirs, _files in os.walk(path, topdown=False):
                Cgroup.at({kind: root}).kill()
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    psutil.wait_procs(alive, timeout=grace)
    # A group is removable once its last member has left it (a killed process leaves
    # when its exit completes, a moment after the signal).
    groups = [record.cgroup, *(e.get("cgroup") or {} for e in record.terminals.values())]
    deadline = time.monotonic() + grace
    while any(_all_members(paths) for paths in groups) and time.monotonic() < deadline:
        time.sleep(0.01)
    for entry in record.terminals.values():
        scratch = entry.get("scratch")
        if scratch and os.path.isdir(scratch):
            shutil.rmtree(scratch, ignore_errors=True)
            result.removed.append(scratch)
        Cgroup.at(entry.get("cgroup") or {}).remove()
    Cgroup.at(record.cgroup).remove()
    commands = [e.get("reap") for e in record.terminals.values()]
    result.swept = sweep_remotes([c for c in commands if _is_argv(c)], REMOTE_SWEEP_TIMEOUT)
    for path in record.cleanup:
        if os.path.lexists(path):
            with contextlib.suppress(OSError):
                os.unlink(path)
                result.removed.append(path)
    record.discard()
    return result


def _is_argv(value: object) -> TypeGuard[list[str]]:
    return isinstance(value, list) and bool(value) and all(isinstance(a, str) for a in value)


def sweep_remotes(commands: list[list[str]], timeout: float) -> list[str]:
    """Run remote terminals' reap commands side by side, for at most ``timeout``
    in all; returns what each came to (``ssh: done``, ``podman: status 125``)."""
    running: list[tuple[str, subprocess.Popen[bytes] | None]] = []
    for argv in commands:
        name = os.path.basename(argv[0])
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as error:
            running.append((f"{name}: {error.strerror}", None))
            continue
        running.append((name, proc))
    deadline = time.monotonic() + timeout
    outcomes = []
    for name, started in running:
        if started is None:
            outcomes.append(name)
            continue
        try:
            status = started.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            started.kill()
            started.wait()
            outcomes.append(f"{name}: timed out")
            continue
        outcomes.append(f"{name}: done" if status == 0 else f"{name}: status {status}")
    return outcomes


def live_tags(directory: str) -> set[str]:
    """The tags of the servers whose records are in ``directory`` and that still run."""
    tags = set()
    with contextlib.suppress(OSError):
        for name in os.listdir(directory):
            if name.startswith("server-") and name.endswith(".json"):
                record = OwnershipRecord.load(os.path.join(directory, name))
                if record is not None and record.server_alive():
                    tags.add(record.tag)
    return tags


def reap_stale(directory: str) -> list[Reaped]:
    """Reap the record of every server in ``directory`` that is no longer running."""
    reaped: list[Reaped] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return reaped
    for name in sorted(names):
        if not (name.startswith("server-") and name.endswith(".json")):
            continue
        record = OwnershipRecord.load(os.path.join(directory, name))
        if record is None or record.server_alive():
            continue
        reaped.append(reap(record))
    return reaped
