"""Which of our terminals a process comes from, if any.

The socket's peer credentials give a connecting process's pid; a process started in
one of our terminals must then act for that terminal's task only (see the protocol's
scope).  Three signals, strongest first:

* the terminal's cgroup, where the machine gives us one: membership is kept across
  forks, ``setsid`` and a cleared environment, and a process cannot leave it;
* its ancestry: a parent chain that reaches a terminal's shell or command
  (``setsid -f`` and double forks leave it, reparented to init);
* its environment: every process a terminal starts carries the server's tag and the
  terminal's own (``env -u`` drops them; a process could also copy another
  terminal's tag from /proc, which is why it comes last).

A process with none of them but the server's tag comes from a terminal now closed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil

from .ownership import SERVER_TAG_VARIABLE
from .terminals.children import TERMINAL_TAG_VARIABLE
from .waiting import procfs

__all__ = ["Origin", "Suspect", "origin_of"]

#: ``terminal_id`` None: carries this server's tag, its terminal is gone.
ORPHAN = None


@dataclass(frozen=True)
class Origin:
    """The process comes from inside ``terminal_id`` (None: a terminal now closed)."""

    terminal_id: int | None


@dataclass(frozen=True)
class Suspect:
    """What a live terminal offers to recognise its processes by."""

    terminal_id: int
    pid: int | None
    tag: str
    members: Callable[[], set[int]] | None = None  # its cgroup's, where it has one


def origin_of(pid: int, server_tag: str | None, terminals: Iterable[Suspect]) -> Origin | None:
    """The terminal ``pid`` was started from, or None when it is not one of ours."""
    terminals = list(terminals)
    # The strongest signal first: a forged environment must not outvote a cgroup or
    # a parent chain (a process can copy another terminal's tag from /proc).
    for terminal in terminals:
        if terminal.members is not None and pid in terminal.members():
            return Origin(terminal.terminal_id)
    chain = _ancestors(pid)
    try:
        environ = psutil.Process(pid).environ()
    except (psutil.Error, OSError):
        environ = {}
    for terminal in terminals:
        if terminal.pid is not None and terminal.pid in chain:
            return Origin(terminal.terminal_id)
    tag = environ.get(TERMINAL_TAG_VARIABLE)
    for terminal in terminals:
        if tag is not None and tag == terminal.tag:
            return Origin(terminal.terminal_id)
    if server_tag is not None and environ.get(SERVER_TAG_VARIABLE) == server_tag:
        return Origin(ORPHAN)
    return None


def _ancestors(pid: int) -> set[int]:
    """``pid`` and its ancestors, by the parent field of ``/proc/PID/stat`` -- one
    read a step (psutil's ``parents()`` made each step a Process, a few reads: most
    of what a new connection cost the server)."""
    chain = {pid}
    while pid > 1:
        info = procfs.stat(pid)
        if info is None or info.ppid <= 0 or info.ppid in chain:
            break
        pid = info.ppid
        chain.add(pid)
    return chain
