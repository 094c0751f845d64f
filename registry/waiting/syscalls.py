"""System calls a blocked thread can be in, per architecture, and decoding their arguments.

``/proc/<pid>/task/<tid>/syscall`` gives the number of the call a sleeping thread is
blocked in and its six raw arguments.  Numbers differ per architecture (x86_64 keeps
the old ``read``/``select``/``poll``/``epoll_wait``; arm64 and the other
``asm-generic`` architectures have only ``pselect6``/``ppoll``/``epoll_pwait``), so
each table maps numbers to the few kinds of call that can mean "waits for input":
a read on one fd, a select/poll over fd sets, an epoll wait.

Everything here is pure: the caller reads ``/proc`` and ``/proc/<pid>/mem`` and
hands the bytes in.  The traced process has our word size and byte order (same
machine, 64-bit); 32-bit compat processes are not decoded.
"""

from __future__ import annotations

import enum
import platform
import struct
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "POLLIN_EVENTS",
    "TIME_STRUCT_BYTES",
    "BlockedCall",
    "CallKind",
    "SyscallLine",
    "SyscallTable",
    "epoll_targets",
    "fd_set_bytes",
    "fd_set_members",
    "parse_syscall_line",
    "poll_readers",
    "pollfd_bytes",
    "signed32",
    "table_for_machine",
    "timespec_seconds",
    "timeval_seconds",
]


class CallKind(enum.Enum):
    """How a call's arguments name the fds it waits on and its timeout."""

    READ = "read"  # arg0: fd; no timeout
    SELECT = "select"  # arg0: nfds, arg1: readfds*, arg4: struct timeval*
    PSELECT = "pselect"  # as select, arg4: struct timespec*
    POLL = "poll"  # arg0: pollfd*, arg1: nfds, arg2: int timeout (ms)
    PPOLL = "ppoll"  # arg0: pollfd*, arg1: nfds, arg2: struct timespec*
    EPOLL = "epoll"  # arg0: epfd, arg3: int timeout (ms)
    EPOLL_TIMESPEC = "epoll_timespec"  # epoll_pwait2: arg0: epfd, arg3: struct timespec*


@dataclass(frozen=True)
class SyscallTable:
    """One architecture's numbers for the calls that matter here."""

    machine: str
    kinds: Mapping[int, CallKind]

    def kind(self, number: int) -> CallKind | None:
        return self.kinds.get(number)


# arch/x86/entry/syscalls/syscall_64.tbl
_X86_64 = SyscallTable(
    "x86_64",
    {
        0: CallKind.READ,  # read
        17: CallKind.READ,  # pread64
        19: CallKind.READ,  # readv
        295: CallKind.READ,  # preadv
        327: CallKind.READ,  # preadv2
        23: CallKind.SELECT,  # select
        270: CallKind.PSELECT,  # pselect6 (bash's readline, vim, python's REPL)
        7: CallKind.POLL,  # poll (script, top on some builds)
        271: CallKind.PPOLL,  # ppoll
        232: CallKind.EPOLL,  # epoll_wait
        281: CallKind.EPOLL,  # epoll_pwait (node/libuv)
        441: CallKind.EPOLL_TIMESPEC,  # epoll_pwait2
    },
)

# include/uapi/asm-generic/unistd.h: arm64, riscv64, loongarch64.
_GENERIC = SyscallTable(
    "generic",
    {
        63: CallKind.READ,  # read
        65: CallKind.READ,  # readv
        67: CallKind.READ,  # pread64
        69: CallKind.READ,  # preadv
        286: CallKind.READ,  # preadv2
        72: CallKind.PSELECT,  # pselect6 (there is no select)
        73: CallKind.PPOLL,  # ppoll (there is no poll)
        22: CallKind.EPOLL,  # epoll_pwait (there is no epoll_wait)
        441: CallKind.EPOLL_TIMESPEC,  # epoll_pwait2
    },
)

_MACHINES = {
    "x86_64": _X86_64,
    "amd64": _X86_64,
    "aarch64": _GENERIC,
    "arm64": _GENERIC,
    "riscv64": _GENERIC,
    "loongarch64": _GENERIC,
}


def table_for_machine(machine: str | None = None) -> SyscallTable | None:
    """The table for ``machine`` (default: this one), or None where we have none.

    Without a table, blocked calls cannot be read and detection falls back to thread
    states, termios and quiet time.
    """
    name = (machine or platform.machine()).lower()
    return _MACHINES.get(name)


@dataclass(frozen=True)
class BlockedCall:
    """A thread sleeping inside a system call: its number and six raw arguments."""

    number: int
    args: tuple[int, int, int, int, int, int]


class SyscallLine(enum.Enum):
    """The two answers of ``/syscall`` that carry no call."""

    RUNNING = "running"  # the thread was on a CPU when read
    NOT_IN_CALL = "not-in-call"  # "-1 sp pc": sleeping outside a system call


def parse_syscall_line(text: str) -> BlockedCall | SyscallLine | None:
    """Parse ``/proc/<pid>/task/<tid>/syscall``; None for text we do not understand.

    The kernel prints ``running``, ``-1 <sp> <pc>``, or ``<nr> <arg0> .. <arg5> <sp>
    <pc>`` with the arguments in hex (proc_pid_syscall in fs/proc/base.c).
    """
    parts = text.split()
    if not parts:
        return None
    if parts[0] == "running":
        return SyscallLine.RUNNING
    try:
        number = int(parts[0])
        if number < 0:
            return SyscallLine.NOT_IN_CALL
        args = tuple(int(word, 16) for word in parts[1:7])
    except ValueError:
        return None
    if len(args) != 6:
        return None
    return BlockedCall(number, (args[0], args[1], args[2], args[3], args[4], args[5]))


def signed32(value: int) -> int:
    """An ``int`` argument as the callee sees it (the register's upper half is noise)."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


_LONG = struct.Struct("@q")
_TWO_LONGS = struct.Struct("@qq")
_POLLFD = struct.Struct("@ihh")

#: poll/epoll event bits that mean "wake me when there is something to read".
POLLIN_EVENTS = 0x1 | 0x2 | 0x40  # POLLIN | POLLPRI | POLLRDNORM (EPOLLIN/EPOLLPRI alike)


def fd_set_bytes(nfds: int) -> int:
    """How many bytes of an ``fd_set`` cover ``nfds`` descriptors (whole longs)."""
    longs = (max(nfds, 0) + 63) // 64
    return longs * _LONG.size


def fd_set_members(data: bytes, nfds: int) -> list[int]:
    """The descriptors below ``nfds`` whose bit is set in an ``fd_set``."""
    members = []
    for index in range(0, len(data) - _LONG.size + 1, _LONG.size):
        (word,) = _LONG.unpack_from(data, index)
        word &= 0xFFFFFFFFFFFFFFFF
        base = index * 8
        while word:
            low = word & -word
            fd = base + low.bit_length() - 1
            if fd < nfds:
                members.append(fd)
            word ^= low
    return members


def poll_readers(data: bytes) -> list[int]:
    """The fds of a ``struct pollfd`` array that wait for input (events & POLLIN ...)."""
    fds = []
    for offset in range(0, len(data) - _POLLFD.size + 1, _POLLFD.size):
        fd, events, _revents = _POLLFD.unpack_from(data, offset)
        if fd >= 0 and events & POLLIN_EVENTS:
            fds.append(fd)
    return fds


def pollfd_bytes(count: int) -> int:
    return max(count, 0) * _POLLFD.size


def timeval_seconds(data: bytes) -> float | None:
    """A ``struct timeval`` as seconds; None if too short or negative."""
    if len(data) < _TWO_LONGS.size:
        return None
    seconds, micros = _TWO_LONGS.unpack_from(data)
    if seconds < 0 or micros < 0:
        return None
    return float(seconds + micros / 1e6)


def timespec_seconds(data: bytes) -> float | None:
    """A ``struct timespec`` as seconds; None if too short or negative."""
    if len(data) < _TWO_LONGS.size:
        return None
    seconds, nanos = _TWO_LONGS.unpack_from(data)
    if seconds < 0 or nanos < 0:
        return None
    return float(seconds + nanos / 1e9)


TIME_STRUCT_BYTES = _TWO_LONGS.size


def epoll_targets(fdinfo: str) -> list[tuple[int, int]]:
    """``(fd, events)`` of each ``tfd:`` line in an epoll fd's ``fdinfo``.

    The kernel writes ``tfd: %8d events: %8x data: %16llx ...`` per registered fd
    (ep_show_fdinfo in fs/eventpoll.c).  The fd is its number when it was added.
    """
    targets = []
    for line in fdinfo.splitlines():
        if not line.startswith("tfd:"):
            continue
        words = line.split()
        try:
            fd = int(words[1])
            events = int(words[words.index("events:") + 1], 16)
        except (IndexError, ValueError):
            continue
        targets.append((fd, events))
    return targets
