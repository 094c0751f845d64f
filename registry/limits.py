"""Per-command resource limits: what they are, how each is enforced, and how a breach
is noticed.

A command may be given ``memoryMb``, ``pids``, ``cpuSeconds``, ``outputMb`` and
``wallSeconds`` (:class:`Limits`; per run, per terminal, or as a setting).  Each is
enforced the strongest way the machine allows (:func:`enforcement`):

* ``memoryMb`` and ``pids`` through the terminal's cgroup (``memory.max`` /
  ``memory.limit_in_bytes``, ``pids.max``), which counts every process the command
  starts, escaped ones included; without one, through rlimits (``RLIMIT_AS`` per
  process; ``RLIMIT_NPROC`` counts every process of the user, so it is set above
  what the user already runs -- and means nothing to root);
* ``cpuSeconds`` through the cgroup's CPU clock (v2 ``cpu.stat``: the whole tree's
  time), else ``RLIMIT_CPU`` (each process's own time; SIGXCPU when it is spent);
* ``outputMb`` and ``wallSeconds`` by the server itself, which sees every byte and
  has a clock.

A breach ends the command's tree; the run ends ``failed`` and names the limit.  The
kernel gives no event for a cgroup limit being hit on v1 hierarchies (inotify on
``pids.events`` and ``memory.oom_control`` stays silent there -- measured on this
project's machines), so while a run has a cgroup limit its counters are read every
:data:`POLL_INTERVAL`, and once more when the run ends (an OOM kill often ends the
command before the next read).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import resource
import signal
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from .cgroups import Cgroup
from .processes import started_since

__all__ = [
    "DEFAULT_LIMITS",
    "LIMIT_NAMES",
    "NO_LIMITS",
    "POLL_INTERVAL",
    "Limits",
    "RunLimits",
    "enforcement",
    "rlimit_preexec",
]

#: How often a run's cgroup counters are read while it has a cgroup limit.
POLL_INTERVAL = 0.1

#: Each limit's name, as runs and the wire name it (``run.limit == "memoryMb"``).
LIMIT_NAMES = {
    "memory_mb": "memoryMb",
    "pids": "pids",
    "cpu_seconds": "cpuSeconds",
    "output_mb": "outputMb",
    "wall_seconds": "wallSeconds",
}

_MB = 1024 * 1024
_T = TypeVar("_T")


@dataclass(frozen=True)
class Limits:
    """Limits for a command; None: not set here (inherited), 0: explicitly none."""

    memory_mb: int | None = None
    pids: int | None = None
    cpu_seconds: float | None = None
    output_mb: float | None = None
    wall_seconds: float | None = None

    def over(self, base: Limits) -> Limits:
        """These limits, with ``base``'s where these are not set."""
        if base is NO_LIMITS:
            return self

        # Spelled out, not through dataclasses.asdict: this runs for every command,
        # and asdict's deep copy was a tenth of a `true`'s round trip (bench_server).
        def pick(mine: _T, theirs: _T) -> _T:
            return mine if mine is not None else theirs

        return Limits(
            pick(self.memory_mb, base.memory_mb),
            pick(self.pids, base.pids),
            pick(self.cpu_seconds, base.cpu_seconds),
            pick(self.output_mb, base.output_mb),
            pick(self.wall_seconds, base.wall_seconds),
        )

    def effective(self) -> Limits:
        """0 (explicitly none) made None: what is left is what applies."""
        if 0 not in self._values():
            return self
        return Limits(
            self.memory_mb or None,
            self.pids or None,
            self.cpu_seconds or None,
            self.output_mb or None,
            self.wall_seconds or None,
        )

    def set(self) -> dict[str, float]:
        """The limits that apply, by wire name."""
        return {
            wire: value
            for wire, value in zip(LIMIT_NAMES.values(), self._values(), strict=True)
            if value
        }

    def _values(self) -> tuple[int | float | None, ...]:
        """The values in field order (that of :data:`LIMIT_NAMES`)."""
        return (self.memory_mb, self.pids, self.cpu_seconds, self.output_mb, self.wall_seconds)


NO_LIMITS = Limits()
#: The settings' default: only output is limited (a runaway ``yes`` ends at 1 GiB).
DEFAULT_LIMITS = Limits(output_mb=1024)


def enforcement(group: Cgroup | None) -> dict[str, str]:
    """How each limit is enforced on a terminal placed in ``group``: "cgroup",
    "rlimit", "server", or "none" (nothing can enforce it here)."""
    can = group.limit_kinds() if group is not None else frozenset()
    root = os.geteuid() == 0
    return {
        "memoryMb": "cgroup" if "memory" in can else "rlimit",
        "pids": "cgroup" if "pids" in can else ("none" if root else "rlimit"),
        "cpuSeconds": "cgroup" if "cpu" in can else "rlimit",
        "outputMb": "server",
        "wallSeconds": "server",
    }


def _rlimits(limits: Limits, how: dict[str, str]) -> dict[int, int]:
    """The rlimits (resource -> soft limit) that enforce what the cgroup cannot."""
    found: dict[int, int] = {}
    if limits.memory_mb and how["memoryMb"] == "rlimit":
        found[resource.RLIMIT_AS] = limits.memory_mb * _MB
    if limits.pids and how["pids"] == "rlimit":
        found[resource.RLIMIT_NPROC] = _user_processes() + limits.pids
    if limits.cpu_seconds and how["cpuSeconds"] == "rlimit":
        found[resource.RLIMIT_CPU] = math.ceil(limits.cpu_seconds)
    return found


def _user_processes() -> int:
    import psutil

    uid = os.getuid()
    count = 0
    for proc in psutil.process_iter(["uids"]):
        with contextlib.suppress(psutil.Error, TypeError):
            count += proc.info["uids"].real == uid
    return count


def rlimit_preexec(limits: Limits, group: Cgroup | None) -> Callable[[], None]:
    """What a child runs between fork and exec to take the limits the cgroup cannot
    enforce (soft limits only: the hard ones stay, so nothing needs privilege)."""
    wanted = _rlimits(limits.effective(), enforcement(group))

    def in_child() -> None:
        for which, soft in wanted.items():
            with contextlib.suppress(OSError, ValueError):
                _soft, hard = resource.getrlimit(which)
                resource.setrlimit(which, (_capped(soft, hard), hard))

    return in_child


def _capped(soft: int, hard: int) -> int:
    return soft if hard == resource.RLIM_INFINITY else min(soft, hard)


class RunLimits:
    """One run's limits while it runs: applied at start, watched, lifted at its end.

    ``breach(name, why)`` is called once, for the first limit the run hits.  The
    cgroup's limits go back to the terminal's own (``standing``) when the run ends.
    """

    def __init__(
        self,
        limits: Limits,
        group: Cgroup | None,
        breach: Callable[[str, str], None],
        *,
        standing: Limits = NO_LIMITS,
        shell_pid: int | None = None,
        how: dict[str, str] | None = None,
    ) -> None:
        self.limits = limits.effective()
        self._breach = breach
        self._standing = standing.effective()
        self._shell_pid = shell_pid
        #: ``enforcement(group)``; a terminal passes its own, looked up once.
        self._how = how if how is not None else enforcement(group)
        # Only a group with a limit of this run's (or the terminal's) to watch is
        # read: the common run limits output alone, and reading counters at its end
        # was a tenth of a `true`'s round trip (bench_server).
        self._group = group if group is not None and self._cgroup_watched() else None
        self._output = 0
        self._hit: str | None = None
        self._hits_before: dict[str, int] = {}
        self._cpu_before = 0.0
        self._restore: dict[int, tuple[int, int]] = {}
        self._timers: list[asyncio.TimerHandle] = []
        self._loop = asyncio.get_running_loop()

    def start(self) -> None:
        limits = self.limits
        group = self._group
        if group is not None:
            group.set_limits(
                memory_bytes=limits.memory_mb * _MB if limits.memory_mb else None,
                pids=limits.pids,
            )
            self._hits_before = group.limit_hits()
            self._cpu_before = group.cpu_seconds() or 0.0
            self._timers.append(self._loop.call_later(POLL_INTERVAL, self._poll))
        if self._shell_pid is not None:
            self._limit_shell(self._shell_pid)
        if limits.wall_seconds:
            why = f"it ran longer than {_amount(limits.wall_seconds)} s"
            self._timers.append(
                self._loop.call_later(limits.wall_seconds, self._hit_limit, "wallSeconds", why)
            )

    def _cgroup_watched(self) -> bool:
        limits, how = self.limits, self._how
        return bool(
            (limits.memory_mb and how["memoryMb"] == "cgroup")
            or (limits.pids and how["pids"] == "cgroup")
            or (limits.cpu_seconds and how["cpuSeconds"] == "cgroup")
            or self._standing.memory_mb
            or self._standing.pids
        )

    def _limit_shell(self, pid: int) -> None:
        """rlimits for what the shell starts next (its command inherits them); the
        shell's own CPU time so far does not count against the command's."""
        wanted = _rlimits(self.limits, self._how)
        for which, soft in wanted.items():
            try:
                before = resource.prlimit(pid, which)
                if which == resource.RLIMIT_CPU:
                    soft += math.ceil(_cpu_time(pid))
                resource.prlimit(pid, which, (_capped(soft, before[1]), before[1]))
            except (OSError, ValueError):
                continue
            self._restore[which] = before

    def output(self, size: int) -> None:
        """The run wrote ``size`` more bytes."""
        self._output += size
        limit = self.limits.output_mb
        if limit and self._output > limit * _MB and self._hit is None:
            self._hit_limit("outputMb", f"it wrote more than {_amount(limit)} MB")

    def _poll(self) -> None:
        if self._hit is None and self._check():
            return
        if self._hit is None:
            self._timers.append(self._loop.call_later(POLL_INTERVAL, self._poll))

    def _check(self, exit_code: int | None = None) -> bool:
        """Read the counters; a limit hit since the run started is a breach."""
        limits, group = self.limits, self._group
        if group is not None:
            hits = group.limit_hits()
            if limits.memory_mb and hits.get("memory", 0) > self._hits_before.get("memory", 0):
                self._hit_limit(
                    "memoryMb",
                    f"its processes needed more than {limits.memory_mb} MB "
                    "(the kernel's OOM killer ended one)",
                )
                return True
            if limits.pids and hits.get("pids", 0) > self._hits_before.get("pids", 0):
                self._hit_limit(
                    "pids", f"it tried to run more than {limits.pids} processes at once"
                )
                return True
            if limits.cpu_seconds and self._how["cpuSeconds"] == "cgroup":
                used = (group.cpu_seconds() or 0.0) - self._cpu_before
                if used > limits.cpu_seconds:
                    self._hit_limit(
                        "cpuSeconds",
                        f"its processes used {used:.1f} s of CPU time "
                        f"(limit {_amount(limits.cpu_seconds)} s)",
                    )
                    return True
        if (
            limits.cpu_seconds
            and self._how["cpuSeconds"] == "rlimit"
            and exit_code == 128 + signal.SIGXCPU
        ):
            self._hit_limit(
                "cpuSeconds",
                f"it used {_amount(limits.cpu_seconds)} s of CPU time (SIGXCPU)",
            )
            return True
        return False

    def _hit_limit(self, name: str, why: str) -> None:
        if self._hit is not None:
            return
        self._hit = name
        self._breach(name, why)

    def finish(self, exit_code: int | None) -> None:
        """The run ended: a last look at the counters, then the limits are lifted."""
        for timer in self._timers:
            timer.cancel()
        self._timers.clear()
        if self._hit is None:
            self._check(exit_code)
        if self._group is not None:
            standing = self._standing
            self._group.set_limits(
                memory_bytes=standing.memory_mb * _MB if standing.memory_mb else None,
                pids=standing.pids,
            )
        if self._shell_pid is not None:
            for which, before in self._restore.items():
                with contextlib.suppress(OSError, ValueError):
                    resource.prlimit(self._shell_pid, which, before)


def _cpu_time(pid: int) -> float:
    """The CPU time a process has used so far (user + system), from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _amount(value: float) -> str:
    return f"{value:g}"


def kill_joined_since(group: Cgroup | None, since: float, keep: set[int]) -> set[int]:
    """SIGKILL what joined ``group`` since ``since`` (boot clock), but ``keep``; the
    group frozen meanwhile.  Returns what was killed (nothing without a group)."""
    if group is None:
        return set()

    def joined(members: set[int]) -> set[int]:
        return {p.pid for p in started_since(members - keep, since)}

    return group.kill_where(joined)
