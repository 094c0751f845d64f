"""What the kernel says about one terminal at one instant: the sample's data types.

A :class:`Sample` is produced by :mod:`registry.waiting.probe` from ``/proc`` and
termios and consumed by the pure decision in :mod:`registry.waiting.decide`, which
is why it is plain frozen data: tests build samples by hand to exercise every rule
without a process.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = ["ProcessState", "Sample", "ThreadState", "Wait"]


class Wait(enum.Enum):
    """What one thread is doing, as far as the terminal is concerned."""

    #: On a CPU or in uninterruptible sleep (kernel states R, D).
    RUNNING = "running"
    #: Blocked reading the terminal: ``read`` on it, or select/poll/epoll whose read
    #: set holds it and nothing that is a socket or a pty master.
    TERMINAL = "terminal"
    #: Waits on the terminal and on a socket at once: a proxy (ssh, docker exec,
    #: kubectl exec, a tmux client) whose remote side we cannot see.
    TERMINAL_AND_SOCKET = "terminal-and-socket"
    #: Waits on a pty master (script, expect): the program that matters is on the
    #: inner pty; see :attr:`ThreadState.inner`.
    INNER_TERMINAL = "inner-terminal"
    #: Blocked on something else: a pipe, a child, a timer, a lock.
    OTHER = "other"
    #: Stopped (kernel state T) while reading the terminal: SIGTTIN, a background
    #: job that wanted input.
    STOPPED_ON_TERMINAL = "stopped-on-terminal"
    #: Stopped for another reason (Ctrl-Z, SIGSTOP).
    STOPPED = "stopped"
    #: Sleeping, but its blocked call could not be read: a setuid program (sudo,
    #: su), ptrace restrictions (Yama scope 2/3), an architecture we have no table for.
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class ThreadState:
    tid: int
    #: The kernel's state letter from ``stat`` (R, S, D, T, t, ...).
    state: str
    wait: Wait
    #: A finite timeout of the select/poll/epoll the thread waits in, in seconds;
    #: None when it blocks indefinitely (or is not in such a call).
    timeout: float | None = None
    #: For :attr:`Wait.INNER_TERMINAL`: the inner pty's own sample (no termios).
    inner: Sample | None = None


@dataclass(frozen=True)
class ProcessState:
    pid: int
    #: ``comm``: the program's name as the kernel keeps it (at most 15 bytes).
    name: str
    threads: tuple[ThreadState, ...]


@dataclass(frozen=True)
class Sample:
    """One look at a terminal."""

    #: The process group that owns the terminal (``tcgetpgrp`` on the master).
    foreground: int
    #: The shell's own process group.
    shell_group: int
    #: The slave's termios: ECHO and ICANON; None where not readable (inner ptys).
    echo: bool | None
    canonical: bool | None
    #: The foreground group's processes, found by walking from the shell.
    processes: tuple[ProcessState, ...] = ()
    #: The shell's other children (background jobs); looked at for stopped ones.
    jobs: tuple[ProcessState, ...] = ()
    #: A blocked call changed while its arguments were being read: the sample may
    #: mix two calls and must be dropped (read again shortly).
    unstable: bool = False

    @property
    def shell_in_foreground(self) -> bool:
        return self.foreground == self.shell_group
