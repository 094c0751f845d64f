"""Process trees: finding what a terminal started, and ending it graceful-then-hard.

Every process the engine starts has an owner that ends it; this module is how.  It
finds processes three ways, because each alone misses some:

* the tree below a pid (``psutil`` children, recursively);
* the members of a terminal's foreground process group (the command that is running,
  not the background jobs it left);
* every process of ours whose environment carries a terminal's tag, which finds
  children that escaped into their own session and were reparented away;
* the members of process groups seen while a command ran (:func:`in_groups`), which
  finds the ``&`` children a ``bash -c`` left behind when it died (its jobs ignore
  SIGINT and were re-parented to init), and the members of a terminal's cgroup that
  started after a command did (:func:`started_since`).

Waiting for processes to exit is an event, not a poll, where the OS allows it: a
pidfd becomes readable when its process exits (Linux >= 5.3).  Elsewhere psutil's
wait runs in a worker thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import psutil

if TYPE_CHECKING:
    from .cgroups import Cgroup

__all__ = [
    "boot_clock",
    "descendants",
    "end_cgroup",
    "end_processes",
    "foreground_processes",
    "in_groups",
    "process_tree",
    "signal_name",
    "started_at",
    "started_since",
    "tagged_processes",
    "wait_gone",
]


def signal_name(exit_code: int | None) -> str | None:
    """``SIGINT`` for 130, ``SIGTERM`` for 143: the shell's 128+N convention."""
    if exit_code is None or exit_code <= 128 or exit_code > 128 + 64:
        return None
    try:
        return signal.Signals(exit_code - 128).name
    except ValueError:
        return None


def descendants(pid: int) -> list[psutil.Process]:
    """Every live process below ``pid``."""
    try:
        return [p for p in psutil.Process(pid).children(recursive=True) if _alive(p)]
    except psutil.Error:
        return []


def foreground_processes(tty_fd: int, shell_pid: int) -> list[psutil.Process]:
    """The running command of a PTY: its foreground process group and their trees.

    Empty when the shell itself is in the foreground (no command running, or a
    command made of builtins only).
    """
    try:
        pgrp = os.tcgetpgrp(tty_fd)
    except OSError:
        return []
    if pgrp <= 0 or pgrp == shell_pid:
        return []
    found: dict[int, psutil.Process] = {}
    for proc in [*descendants(shell_pid), *_group_members(pgrp)]:
        try:
            if proc.pid != shell_pid and os.getpgid(proc.pid) == pgrp:
                found[proc.pid] = proc
                for child in descendants(proc.pid):
                    found[child.pid] = child
        except (OSError, psutil.Error):
            continue
    return list(found.values())


def _group_members(pgrp: int) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return [psutil.Process(pgrp)]
    return []


def boot_clock() -> float:
    """Seconds since boot, on the clock the kernel stamps process start times with.

    (psutil's ``create_time`` adds those to a boot time rounded to the second, so it
    cannot order a process against a moment to better than a second.)
    """
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def started_at(pid: int) -> float | None:
    """When ``pid`` started, on :func:`boot_clock`; None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except OSError:
        return None
    return int(fields[19]) / _TICKS  # field 22, starttime, in clock ticks


_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
#: A start time is a whole tick: one that began in the tick of ``since`` counts as after.
_TICK = 1.0 / _TICKS


def in_groups(pgids: Iterable[int], *, since: float = 0.0) -> list[psutil.Process]:
    """This user's live processes in any of the process groups ``pgids`` (a scan),
    started at ``since`` (:func:`boot_clock`) or later -- a group number the kernel
    reused later names a stranger, whose start time gives it away."""
    wanted = set(pgids)
    if not wanted:
        return []
    me, uid = os.getpid(), os.getuid()
    found = []
    for proc in psutil.process_iter(["uids"]):
        try:
            if proc.pid == me or proc.info["uids"].real != uid:
                continue
            if os.getpgid(proc.pid) not in wanted:
                continue
            start = started_at(proc.pid)
            if start is not None and start + _TICK >= since and _alive(proc):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def started_since(pids: Iterable[int], since: float) -> list[psutil.Process]:
    """The live processes of ``pids`` that started at ``since`` (:func:`boot_clock`) or
    later."""
    found = []
    for pid in pids:
        start = started_at(pid)
        if start is None or start + _TICK < since:
            continue
        with contextlib.suppress(psutil.Error):
            proc = psutil.Process(pid)
            if _alive(proc):
                found.append(proc)
    return found


def tagged_processes(name: str, value: str) -> list[psutil.Process]:
    """Processes of this user whose environment has ``name=value``.

    Reads every process's environment, so it is for close and shutdown, not for
    hot paths.
    """
    me = os.getpid()
    uid = os.getuid() if hasattr(os, "getuid") else None
    found = []
    for proc in psutil.process_iter(["uids"]):
        if proc.pid == me:
            continue
        try:
            uids = proc.info.get("uids")
            if uid is not None and uids is not None and uids.real != uid:
                continue
            if proc.environ().get(name) == value and _alive(proc):
                found.append(proc)
        except (psutil.Error, OSError):
            continue
    return found


def process_tree(pid: int, tag_variable: str, tag: str) -> list[psutil.Process]:
    """``pid``, every live process below it and every process carrying the tag."""
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        found[pid] = psutil.Process(pid)
    for proc in [*descendants(pid), *tagged_processes(tag_variable, tag)]:
        found.setdefault(proc.pid, proc)
    return list(found.values())


def _alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


async def end_cgroup(group: Cgroup | None, grace: float) -> None:
    """SIGKILL what is in ``group`` (a process that cleared its environment and left
    its session is still there) and wait, up to ``grace``, until it is gone."""
    members = group.members() if group is not None else set()
    if group is None or not members:
        return
    group.kill()
    found = []
    for pid in members:
        with contextlib.suppress(psutil.Error):
            found.append(psutil.Process(pid))
    await wait_gone(found, grace)


async def wait_gone(procs: Iterable[psutil.Process], timeout: float) -> list[psutil.Process]:
    """Wait until every process has exited or ``timeout`` passes; return the living."""
    procs = [p for p in procs if _alive(p)]
    if not procs:
        return []
    if not hasattr(os, "pidfd_open"):
        _gone, alive = await asyncio.to_thread(psutil.wait_procs, procs, timeout)
        return [p for p in alive if _alive(p)]
    loop = asyncio.get_running_loop()
    waiters: list[asyncio.Future[None]] = []
    fds: list[int] = []
    try:
        for proc in procs:
            try:
                fd = os.pidfd_open(proc.pid)
            except ProcessLookupError:
                continue
            except OSError:
                # No pidfd for this one (old kernel, permissions): psutil in a thread.
                waiters.append(asyncio.ensure_future(_wait_in_thread(proc, timeout)))
                continue
            fds.append(fd)
            waiter: asyncio.Future[None] = loop.create_future()
            loop.add_reader(fd, _settle, waiter)
            waiters.append(waiter)
        if waiters:
            await asyncio.wait(waiters, timeout=timeout)
    finally:
        for fd in fds:
            loop.remove_reader(fd)
            os.close(fd)
        for waiter in waiters:
            waiter.cancel()
    return [p for p in procs if _alive(p)]


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


async def _wait_in_thread(proc: psutil.Process, timeout: float) -> None:
    with contextlib.suppress(psutil.Error):
        await asyncio.to_thread(proc.wait, timeout)


async def end_processes(
    procs: Sequence[psutil.Process],
    grace: float,
    signals: Sequence[signal.Signals] = (signal.SIGTERM,),
) -> list[psutil.Process]:
    """Send each signal in turn to the living, ``grace`` apart; then SIGKILL.

    Returns what survived even SIGKILL (normally nothing: a process in
    uninterruptible sleep is the exception).
    """
    alive = [p for p in procs if _alive(p)]
    sigkill = getattr(signal, "SIGKILL", signal.SIGTERM)
    for sig in [*signals, sigkill]:
        if not alive:
            return []
        for proc in alive:
            with contextlib.suppress(psutil.Error, OSError):
                proc.send_signal(sig)
        alive = await wait_gone(alive, grace)
    return alive
