"""What every process a terminal starts inherits: environment, signals and tags.

Both providers start their children through here, so a command sees the same world
whichever provider runs it:

* the agent environment: the server's own environment without our internal
  variables, with a pager that never waits for a key, a UTF-8 locale when none is
  set, and no stale window size;
* default signal dispositions and an empty signal mask (:func:`reset_signals`);
* tags: every process a terminal starts carries :data:`TERMINAL_TAG_VARIABLE` (and
  a subprocess command also :data:`RUN_TAG_VARIABLE`), so processes that escaped
  into their own session can still be found and ended;
* a :class:`Placement`, given by whoever owns the terminal's processes (the
  registry's :mod:`registry.ownership`): more environment (the server's tag) and a
  cgroup every child joins between fork and exec, so that not even a process that
  clears its environment and leaves its session escapes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from ..cgroups import Cgroup

__all__ = [
    "INTERNAL_VARIABLES",
    "NOWHERE",
    "RUN_TAG_VARIABLE",
    "TERMINAL_TAG_VARIABLE",
    "Placement",
    "agent_environment",
    "new_tag",
    "reset_signals",
]

#: Every process a terminal starts inherits this variable (a per-terminal token), so
#: processes that escaped the shell's tree can still be found and ended.
TERMINAL_TAG_VARIABLE = "TERMINAL_REGISTRY_TERMINAL"

#: Every process a subprocess command starts inherits this variable, unique to the run.
RUN_TAG_VARIABLE = "TERMINAL_REGISTRY_RUN"

#: Our own variables that must not leak from the server's environment into a
#: terminal's (``TERMINAL_REGISTRY_SOCKET`` does pass: it is how agents find us).
INTERNAL_VARIABLES = frozenset(
    {
        "TERMINAL_REGISTRY_NONCE",
        "TERMINAL_REGISTRY_DIR",
        "TERMINAL_REGISTRY_LOGIN",
        "TERMINAL_REGISTRY_USER_ZDOTDIR",
        TERMINAL_TAG_VARIABLE,
        RUN_TAG_VARIABLE,
    }
)

#: Signals whose disposition a child must not inherit from us (see reset_signals).
_RESET_SIGNALS = [
    getattr(signal, name)
    for name in (
        *("SIGINT", "SIGQUIT", "SIGTERM", "SIGHUP", "SIGPIPE", "SIGTSTP", "SIGTTIN"),
        *("SIGTTOU", "SIGCHLD", "SIGXFSZ", "SIGUSR1", "SIGUSR2", "SIGALRM"),
    )
    if hasattr(signal, name)
]


def new_tag(terminal_id: int) -> str:
    """A tag unique to one terminal of this server: pid, terminal id, random part."""
    return f"{os.getpid()}.{terminal_id}.{secrets.token_hex(8)}"


def agent_environment(base: Mapping[str, str], *, term: str) -> dict[str, str]:
    """The environment a terminal's commands start with: ``base`` plus agent defaults.

    ``term`` is ``TERM``: what the terminal can display (``dumb`` without a PTY).
    """
    env = {k: v for k, v in base.items() if k not in INTERNAL_VARIABLES}
    env["TERM"] = term
    # A pager would wait for a key nobody presses.
    env["PAGER"] = "cat"
    env["GIT_PAGER"] = "cat"
    env.setdefault("LESS", "-FRX")
    # Output is decoded as UTF-8: without any locale, programs fall back to ASCII.
    if not any(env.get(k) for k in ("LC_ALL", "LC_CTYPE", "LANG")):
        env["LANG"] = "C.UTF-8"
    # The server's own window size, if it had one, is not the terminal's.
    for noisy in ("COLUMNS", "LINES"):
        env.pop(noisy, None)
    return env


def reset_signals() -> None:
    """In the child, between fork and exec: default dispositions, nothing blocked.

    exec resets caught signals to their default but keeps ignored ones and the
    blocked mask, so what we carry would reach every command:

    * a server started with SIGINT (or SIGQUIT, SIGHUP) ignored -- ``nohup``, or
      ``cmd &`` in a script -- would hand that on, and no command in the terminal
      would stop on Ctrl-C or on our interrupt;
    * Python ignores SIGPIPE (and SIGXFSZ) at start-up, which would turn the quiet
      end of ``yes | head`` into ``write error: Broken pipe``;
    * the blocked-signal mask survives exec too: a signal we block in a thread
      would never reach the command at all.
    """
    for signum in _RESET_SIGNALS:
        with contextlib.suppress(OSError, ValueError):
            signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(OSError, ValueError, AttributeError):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())


@dataclass(frozen=True)
class Placement:
    """Where a terminal's processes go: more environment, and a cgroup to join."""

    env: Mapping[str, str] = field(default_factory=dict)
    cgroup: Cgroup | None = None

    def preexec(self) -> Callable[[], None]:
        """The function to run in each child between fork and exec."""
        files = self.cgroup.procs_files() if self.cgroup is not None else []

        def in_child() -> None:
            reset_signals()
            for path in files:
                # Joining before exec: the child is in its group before it can fork.
                # A group that cannot be joined must not stop the command.
                with contextlib.suppress(OSError), open(path, "w") as f:
                    f.write("0")

        return in_child


#: No placement: the server's environment and cgroup, as they are.
NOWHERE = Placement()
