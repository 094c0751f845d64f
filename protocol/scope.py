"""What a connection that comes from inside one of our terminals may do.

A program running in a terminal can reach the server's socket (it is the same user,
and the socket's path is easy to guess).  Such a connection acts for the task of the
terminal it runs in, and for nothing else: it cannot read another task's replay or
output, type into another task's shell, or hear another task's notifications.  Who
is inside which terminal is the registry's to say
(:meth:`registry.registry.TerminalRegistry.origin_of`); these are the rules, pure
over the message and a ``task_of`` lookup.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from registry.errors import UnknownTerminalError
from registry.registry import TerminalRegistry

from . import methods
from .errors import ErrorCode
from .messages import Refusal

__all__ = ["Scope", "scope_of"]

#: Notifications about one terminal: every one of ours (methods.NOTIFICATIONS).
_ABOUT_A_TERMINAL = frozenset(methods.NOTIFICATIONS)

#: A terminal's task, by terminal id (raises UnknownTerminalError for none).
TaskOf = Callable[[int], "str | None"]

#: Requests whose taskId says whose terminals to act on or report.
_TASK_REQUESTS = frozenset(
    {
        methods.ACQUIRE,
        methods.RUN,
        methods.LIST,
        methods.RELEASE,
        methods.ENVIRONMENT_DETAILS,
    }
)


@dataclass(frozen=True)
class Scope:
    """The connection comes from inside terminal ``terminal_id``; it acts for ``task_id``."""

    terminal_id: int | None
    task_id: str
    #: Terminals it has heard of as its own: a closed one is no longer the registry's
    #: to look up, and its didClose is still this connection's.
    known: set[int] = field(default_factory=set, compare=False)

    @property
    def _origin(self) -> str:
        if self.terminal_id is None:
            return "a process started in a terminal of this server"
        return f"a process inside terminal {self.terminal_id}"

    def admit(self, message: dict[str, Any], task_of: TaskOf) -> dict[str, Any] | Refusal:
        """The message as this connection may send it (its task filled in), or why not."""
        method = message.get("method")
        params = message.get("params")
        if "id" not in message or not isinstance(params, dict):
            return message  # responses, notifications, no params: nothing to scope
        msg_id = message["id"]
        terminal_id = params.get("terminalId")
        if isinstance(terminal_id, int) and not isinstance(terminal_id, bool):
            try:
                owner = task_of(terminal_id)
            except UnknownTerminalError:
                owner = self.task_id  # the handler says it does not exist
            if owner != self.task_id:
                return Refusal(
                    ErrorCode.UnknownTerminal,
                    f"terminal {terminal_id} is not this connection's: it comes from "
                    f"{self._origin} and acts for task {self.task_id!r} only",
                    msg_id,
                )
        if method in _TASK_REQUESTS:
            task_id = params.get("taskId")
            if task_id is not None and task_id != self.task_id:
                return Refusal(
                    ErrorCode.InvalidParams,
                    f"taskId {task_id!r} is not this connection's: it comes from "
                    f"{self._origin} and acts for task {self.task_id!r} only",
                    msg_id,
                )
            message = {**message, "params": {**params, "taskId": self.task_id}}
        return message

    def hears(self, method: str, params: Any, task_of: TaskOf) -> bool:
        """Whether a notification about some terminal is this connection's to hear."""
        if method not in _ABOUT_A_TERMINAL or not isinstance(params, dict):
            return True
        if method in (methods.DID_OPEN, methods.DID_CHANGE):
            terminal_id, mine = params.get("id"), params.get("taskId") == self.task_id
        else:
            terminal_id = params.get("terminalId")
            try:
                mine = isinstance(terminal_id, int) and task_of(terminal_id) == self.task_id
            except UnknownTerminalError:
                mine = terminal_id in self.known  # closed: it was ours
        if isinstance(terminal_id, int):
            if mine and method != methods.DID_CLOSE:
                self.known.add(terminal_id)
            else:
                self.known.discard(terminal_id)
        return mine


def scope_of(registry: TerminalRegistry, pid: int) -> Scope | None:
    """The scope of a client process: None unless it runs inside one of our terminals.

    Its task is the terminal's at connection time; a terminal no task holds (or one
    already closed) gives a task of its own, which owns nothing yet.
    """
    origin = registry.origin_of(pid)
    if origin is None:
        return None
    task_id = None
    if origin.terminal_id is not None:
        with contextlib.suppress(UnknownTerminalError):
            task_id = registry.task_of(origin.terminal_id)
    if task_id is None:
        task_id = f"inside-terminal-{origin.terminal_id}" if origin.terminal_id else "inside"
    return Scope(origin.terminal_id, task_id)
