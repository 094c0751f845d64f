"""Reading one PTY's truth from the kernel: who owns it and what they are blocked in.

:class:`TerminalProbe` wraps one PTY master and its shell's pid and builds a
:class:`~registry.waiting.sample.Sample` on request.  It only reads: ``tcgetpgrp``
and ``tcgetattr`` on the master (which answer for the slave), and files under
``/proc``.  It never opens the terminal, signals or traces anything.

How a sample is built (the measured recipe in shared/notes/input-wait-facts.md):

* the foreground group is ``tcgetpgrp(master)`` (~0.5 µs);
* its processes are found by walking from the shell through ``task/*/children``,
  entering only processes of the foreground group: a global ``/proc`` scan costs
  more than a whole look at a terminal;
* each thread's kernel state comes from its ``stat``; a sleeping one's blocked call
  from its ``syscall``, resolved to the fds it waits on -- the fd of a ``read``, the
  read set of select/poll (from ``/proc/<pid>/mem``), the ``tfd:`` lines of an epoll
  fd's ``fdinfo`` -- and each fd to "our terminal", "a socket", "a pty master" or
  something else by its link and device number;
* after reading ``mem`` the ``syscall`` line is read again: if it changed, the call
  returned meanwhile and the arguments may be garbage, so the sample says unstable;
* a thread waiting on a pty master (``script``) is followed onto the inner pty: the
  processes whose controlling tty it is, in its foreground group (``tpgid``).
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import os
import sys
import termios
from dataclasses import dataclass

from . import procfs
from .sample import ProcessState, Sample, ThreadState, Wait
from .syscalls import (
    POLLIN_EVENTS,
    TIME_STRUCT_BYTES,
    BlockedCall,
    CallKind,
    SyscallLine,
    SyscallTable,
    epoll_targets,
    fd_set_bytes,
    fd_set_members,
    parse_syscall_line,
    poll_readers,
    pollfd_bytes,
    signed32,
    table_for_machine,
    timespec_seconds,
    timeval_seconds,
)

__all__ = ["TerminalProbe"]

#: /dev/tty: "my controlling terminal"; it is ours when the process's ctty is.
_DEV_TTY = os.makedev(5, 0)
#: Enough for any shell's jobs and a build's process tree; the walk stops there.
_MAX_PROCESSES = 256
#: select/poll sets larger than this are cut (FD_SETSIZE is 1024).
_MAX_FDS = 4096
_INNER_DEPTH = 2
_THIS_MACHINE = table_for_machine()
#: Names a program runs under through the alternatives system (git runs its pager
#: as ``pager``, which is less): for these the executable's own name is reported.
_ALIASES = frozenset({"pager", "editor", "sensible-pager", "sensible-editor", "view", "ex"})


class _Fd(enum.Enum):
    TERMINAL = "terminal"
    SOCKET = "socket"
    PTY_MASTER = "pty-master"
    EPOLL = "epoll"
    OTHER = "other"


@dataclass
class _Look:
    """One sample in the making: the terminal's device and what was noticed."""

    terminal: int
    depth: int = 0
    unstable: bool = False


class TerminalProbe:
    """The kernel's view of one PTY (master fd) and the shell started on it."""

    def __init__(
        self, master_fd: int, shell_pid: int, table: SyscallTable | None = _THIS_MACHINE
    ) -> None:
        """``table``: the syscall numbers (this machine's; None: calls are not read)."""
        self._fd = master_fd
        self._shell = shell_pid
        self._table = table
        self._shell_group: int | None = None
        self._device: int | None = None

    @property
    def shell_pid(self) -> int:
        return self._shell

    @property
    def shell_group(self) -> int:
        """The shell's process group (its pid: an interactive shell leads its group)."""
        if self._shell_group is None:
            try:
                self._shell_group = os.getpgid(self._shell)
            except OSError:
                return self._shell
        return self._shell_group

    def foreground(self) -> int | None:
        """The process group owning the terminal; None when the PTY is gone."""
        try:
            pgrp = os.tcgetpgrp(self._fd)
        except OSError:
            return None
        return pgrp if pgrp > 0 else None

    def output_unread(self) -> bool:
        """Whether output waits in the PTY that has not been read from it yet."""
        try:
            count = fcntl.ioctl(self._fd, termios.FIONREAD, b"\0\0\0\0")
        except OSError:
            return False
        return int.from_bytes(count, sys.byteorder, signed=True) > 0

    def terminal_modes(self) -> tuple[bool, bool] | None:
        """(ECHO, ICANON) of the slave, read through the master; None if gone."""
        try:
            lflag = termios.tcgetattr(self._fd)[3]
        except (OSError, termios.error):
            return None
        return bool(lflag & termios.ECHO), bool(lflag & termios.ICANON)

    def erase_character(self) -> bytes:
        """What the slave takes as erase (VERASE): what a Backspace key must send."""
        try:
            erase = termios.tcgetattr(self._fd)[6][termios.VERASE]
        except (OSError, termios.error, IndexError):
            return b"\x7f"
        if isinstance(erase, int):
            return bytes([erase]) if erase else b"\x7f"
        return erase or b"\x7f"

    def device(self) -> int | None:
        """The slave's device number (what ``/dev/pts/N`` stats to)."""
        if self._device is None:
            self._device = self._find_device()
        return self._device

    def _find_device(self) -> int | None:
        # Our own master's fdinfo names its pts (tty-index, Linux >= 5.x); older
        # kernels: the shell's controlling tty is the slave (setsid + open).
        with contextlib.suppress(procfs.Unreadable):
            info = procfs.fdinfo(os.getpid(), self._fd)
            index = procfs.tty_index(info) if info else None
            if index is not None:
                with contextlib.suppress(OSError):
                    return os.stat(f"/dev/pts/{index}").st_rdev
        shell = procfs.stat(self._shell)
        return shell.tty_nr if shell and shell.tty_nr else None

    # -- the sample ---------------------------------------------------------------

    def sample(self, foreground: int | None = None, *, jobs: bool = True) -> Sample | None:
        """A full look: the foreground group's threads (and the shell's jobs).

        None when the PTY or the shell is gone.  ``foreground`` saves the
        ``tcgetpgrp`` when the caller has just made it.
        """
        fg = self.foreground() if foreground is None else foreground
        device = self.device()
        if fg is None or device is None:
            return None
        modes = self.terminal_modes()
        look = _Look(device)
        members: list[ProcessState] = []
        job_states: list[ProcessState] = []
        shell = procfs.stat(self._shell)
        if shell is None:
            return None
        queue = [(self._shell, shell)]
        seen = 0
        while queue and seen < _MAX_PROCESSES:
            pid, st = queue.pop()
            seen += 1
            tids = procfs.thread_ids(pid)
            if st.pgrp == fg:
                members.append(self._process(pid, st, tids, look))
            for child in procfs.children(pid, tids):
                child_st = procfs.stat(child)
                if child_st is None:
                    continue
                if child_st.pgrp == fg:
                    queue.append((child, child_st))
                elif pid == self._shell and jobs:
                    job_states.append(self._job(child, child_st))
        return Sample(
            foreground=fg,
            shell_group=self.shell_group,
            echo=modes[0] if modes else None,
            canonical=modes[1] if modes else None,
            processes=tuple(members),
            jobs=tuple(job_states),
            unstable=look.unstable,
        )

    def jobs(self) -> tuple[ProcessState, ...]:
        """The shell's children outside the shell's own group (its jobs), cheaply."""
        found = []
        for child in procfs.children(self._shell):
            st = procfs.stat(child)
            if st is not None and st.pgrp != self.shell_group:
                found.append(self._job(child, st))
        return tuple(found)

    def _job(self, pid: int, st: procfs.ProcStat) -> ProcessState:
        # Only a stopped job needs its call read (stopped in a read of the terminal:
        # SIGTTIN); the others are summarised by their state letters.
        look = _Look(self.device() or 0)
        threads = []
        for tid in procfs.thread_ids(pid):
            thread_st = procfs.stat(pid, tid)
            if thread_st is None:
                continue
            if thread_st.state == "T":
                threads.append(self._thread(pid, tid, thread_st.state, st, look))
            else:
                wait = Wait.RUNNING if thread_st.state in "RD" else Wait.OTHER
                threads.append(ThreadState(tid, thread_st.state, wait))
        return ProcessState(pid, st.name, tuple(threads))

    def _process(self, pid: int, st: procfs.ProcStat, tids: list[int], look: _Look) -> ProcessState:
        threads = []
        for tid in tids:
            thread_st = procfs.stat(pid, tid)
            if thread_st is None or thread_st.state in "ZXx":
                continue
            threads.append(self._thread(pid, tid, thread_st.state, st, look))
        return ProcessState(pid, _program_name(pid, st.name), tuple(threads))

    # -- one thread -----------------------------------------------------------------

    def _thread(
        self, pid: int, tid: int, state: str, st: procfs.ProcStat, look: _Look
    ) -> ThreadState:
        stopped = state == "T"
        if state in "RD":
            return ThreadState(tid, state, Wait.RUNNING)
        if self._table is None:
            return ThreadState(tid, state, Wait.STOPPED if stopped else Wait.UNKNOWN)
        try:
            line = procfs.syscall(pid, tid)
        except procfs.Unreadable:
            return ThreadState(tid, state, Wait.STOPPED if stopped else Wait.UNKNOWN)
        call = parse_syscall_line(line or "")
        if call is SyscallLine.RUNNING:
            return ThreadState(tid, state, Wait.STOPPED if stopped else Wait.RUNNING)
        kind = self._table.kind(call.number) if isinstance(call, BlockedCall) else None
        if not isinstance(call, BlockedCall) or kind is None or state == "t":
            # Not in a call that can read (a child wait, a sleep, a lock), or held
            # by a debugger (t): not waiting for the terminal.
            return ThreadState(tid, state, Wait.STOPPED if stopped else Wait.OTHER)
        try:
            fds, timeout, inner = self._wait_set(pid, tid, call, kind, line or "", st, look)
        except procfs.Unreadable:
            return ThreadState(tid, state, Wait.STOPPED if stopped else Wait.UNKNOWN)
        if stopped:
            wait = Wait.STOPPED_ON_TERMINAL if _Fd.TERMINAL in fds else Wait.STOPPED
            return ThreadState(tid, state, wait)
        if inner is not None:
            return ThreadState(tid, state, Wait.INNER_TERMINAL, timeout, inner)
        if _Fd.TERMINAL in fds:
            wait = Wait.TERMINAL_AND_SOCKET if _Fd.SOCKET in fds else Wait.TERMINAL
            return ThreadState(tid, state, wait, timeout)
        return ThreadState(tid, state, Wait.OTHER, timeout)

    def _wait_set(
        self,
        pid: int,
        tid: int,
        call: BlockedCall,
        kind: CallKind,
        line: str,
        st: procfs.ProcStat,
        look: _Look,
    ) -> tuple[set[_Fd], float | None, Sample | None]:
        """The kinds of fd a blocked call waits to read, its timeout, an inner pty."""
        fds, timeout = self._blocked_on(pid, tid, call, kind, line, look)
        kinds: set[_Fd] = set()
        inner: Sample | None = None
        for fd in fds:
            fd_kind, index = self._classify(pid, fd, st, look)
            kinds.add(fd_kind)
            if fd_kind is _Fd.PTY_MASTER and index is not None and inner is None:
                inner = self._inner(pid, index, look)
        return kinds, timeout, inner

    def _blocked_on(
        self, pid: int, tid: int, call: BlockedCall, kind: CallKind, line: str, look: _Look
    ) -> tuple[list[int], float | None]:
        """The fds a call waits to read and its timeout (None: indefinitely)."""
        args = call.args
        if kind is CallKind.READ:
            return [signed32(args[0])], None
        if kind is CallKind.EPOLL:
            return self._epoll_fds(pid, signed32(args[0]), nested=True), _milliseconds(args[3])
        if kind is CallKind.EPOLL_TIMESPEC:
            (time,) = self._memory(pid, tid, line, look, [(args[3], TIME_STRUCT_BYTES)])
            fds = self._epoll_fds(pid, signed32(args[0]), nested=True)
            return fds, timespec_seconds(time) if time else None
        if kind in (CallKind.SELECT, CallKind.PSELECT):
            nfds = max(0, min(signed32(args[0]), _MAX_FDS))
            reads = [(args[1], fd_set_bytes(nfds)), (args[4], TIME_STRUCT_BYTES)]
            fd_set, time = self._memory(pid, tid, line, look, reads)
            to_seconds = timeval_seconds if kind is CallKind.SELECT else timespec_seconds
            return (fd_set_members(fd_set, nfds) if fd_set else []), (
                to_seconds(time) if time else None
            )
        # poll, ppoll: an array of struct pollfd; ppoll's timeout is a timespec too.
        count = max(0, min(args[1], _MAX_FDS))
        if kind is CallKind.POLL:
            (pollfds,) = self._memory(pid, tid, line, look, [(args[0], pollfd_bytes(count))])
            timeout = _milliseconds(args[2])
        else:
            reads = [(args[0], pollfd_bytes(count)), (args[2], TIME_STRUCT_BYTES)]
            pollfds, time = self._memory(pid, tid, line, look, reads)
            timeout = timespec_seconds(time) if time else None
        return (poll_readers(pollfds) if pollfds else []), timeout

    @staticmethod
    def _memory(
        pid: int, tid: int, line: str, look: _Look, reads: list[tuple[int, int]]
    ) -> list[bytes | None]:
        """Read a call's arguments from the process's memory (None: a null pointer)."""
        memory = procfs.read_memory(pid, reads)
        # The call may have returned while we read: the bytes may then belong to the
        # next call (a garbage timeout was seen this way), so the sample is dropped.
        if procfs.syscall(pid, tid) != line:
            look.unstable = True
        return memory

    def _epoll_fds(self, pid: int, epfd: int, nested: bool) -> list[int]:
        info = procfs.fdinfo(pid, epfd)
        fds = []
        for fd, events in epoll_targets(info or ""):
            if not events & POLLIN_EVENTS:
                continue
            target = procfs.fd_target(pid, fd)
            if nested and target == "anon_inode:[eventpoll]":
                fds.extend(self._epoll_fds(pid, fd, nested=False))
            else:
                fds.append(fd)
        return fds

    def _classify(
        self, pid: int, fd: int, st: procfs.ProcStat, look: _Look
    ) -> tuple[_Fd, int | None]:
        target = procfs.fd_target(pid, fd)
        if target is None:
            return _Fd.OTHER, None
        if target.startswith("socket:"):
            return _Fd.SOCKET, None
        if target == "anon_inode:[eventpoll]":
            return _Fd.EPOLL, None
        if not target.startswith("/dev/"):
            return _Fd.OTHER, None
        if target in ("/dev/ptmx", "/dev/pts/ptmx"):
            info = procfs.fdinfo(pid, fd)
            return _Fd.PTY_MASTER, procfs.tty_index(info) if info else None
        rdev = procfs.fd_rdev(pid, fd)
        if rdev == look.terminal or (rdev == _DEV_TTY and st.tty_nr == look.terminal):
            return _Fd.TERMINAL, None
        return _Fd.OTHER, None

    def _inner(self, proxy: int, index: int, look: _Look) -> Sample | None:
        """The foreground group of the pty whose master ``proxy`` holds, below it."""
        if look.depth >= _INNER_DEPTH:
            return None
        try:
            device = os.stat(f"/dev/pts/{index}").st_rdev
        except OSError:
            return None
        inner_look = _Look(device, depth=look.depth + 1)
        found: list[tuple[int, procfs.ProcStat]] = []
        queue = procfs.children(proxy)
        while queue and len(found) < _MAX_PROCESSES:
            pid = queue.pop()
            st = procfs.stat(pid)
            if st is None:
                continue
            if st.tty_nr == device:
                found.append((pid, st))
            queue.extend(procfs.children(pid))
        if not found:
            return None
        # Every process on that tty carries the tty's foreground group as tpgid, and
        # the session leader's pgid is the inner "shell group".
        fg = found[0][1].tpgid
        leader = next((st.pgrp for pid, st in found if pid == st.session), fg)
        members = tuple(
            self._process(pid, st, procfs.thread_ids(pid), inner_look)
            for pid, st in found
            if st.pgrp == fg
        )
        if inner_look.unstable:
            look.unstable = True
        return Sample(
            foreground=fg,
            shell_group=leader,
            echo=None,
            canonical=None,
            processes=members,
            unstable=inner_look.unstable,
        )


def _program_name(pid: int, name: str) -> str:
    if name not in _ALIASES:
        return name
    path = procfs.executable(pid)
    return os.path.basename(path) if path else name


def _milliseconds(argument: int) -> float | None:
    """An ``int`` millisecond timeout argument: None when it blocks indefinitely."""
    value = signed32(argument)
    return None if value < 0 else value / 1000.0
