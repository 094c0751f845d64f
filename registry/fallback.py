"""When a shell's integration is late: run the command elsewhere, and say why.

A shell terminal takes a command only once its integration is up (``rich``): a
command typed into a shell whose markers may never come could not be told apart
from its prompt.  When the integration does not come up in time, the registry runs
the command on a subprocess terminal for the same task and cwd instead -- never on
both, so it never runs twice.

"In time" is measured on the shell's own clock, not the wall's: the window
(``shell_integration_timeout``) counts only the time the shell and its children were
all blocked -- sleeping in a slow startup file, waiting on a lock or the network.
While one of them is running or runnable, the shell is working through its startup
on a busy machine (fifty shells starting at once on two cores are mostly queued for
a CPU), and that time is not counted; ``integration_absolute_timeout`` of wall time
still bounds the wait.  The processes' states are looked at every
:data:`SAMPLE` seconds while a command waits for its shell, and only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from .processes import descendants
from .terminals.base import IntegrationState
from .terminals.shell import ShellTerminal

__all__ = ["SAMPLE", "integration_in_time", "working"]

#: How often the shell's processes are looked at while a command waits for it.
SAMPLE = 0.05


def working(pid: int) -> bool:
    """Whether ``pid`` or one of its descendants is running or waiting for a CPU."""
    for member in [pid, *(p.pid for p in descendants(pid))]:
        with (
            contextlib.suppress(OSError, IndexError),
            open(f"/proc/{member}/stat", "rb") as f,
        ):
            if f.read().rsplit(b")", 1)[1].split()[0] == b"R":
                return True
    return False


async def integration_in_time(
    terminal: ShellTerminal, window: float, limit: float
) -> tuple[bool, str]:
    """Whether ``terminal`` has its integration up to take a command; if not, why not.

    Waits while less than ``window`` of the shell's own time has passed, and never
    longer than ``limit`` of wall time.
    """
    started = last = time.monotonic()
    pid = terminal.pid or 0
    own = 0.0
    while terminal.integration is IntegrationState.PENDING:
        timeout = min(window - own, started + limit - last, SAMPLE)
        if timeout <= 0:
            break
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(terminal.ready(), timeout)
        now = time.monotonic()
        # Time counts only while the shell is stuck: not while it (or a child) runs or
        # waits for a CPU, nor while what it wrote (its prompt, maybe) waits for us.
        if not working(pid) and not terminal.output_pending:
            own += now - last
        last = now
    waited = round((time.monotonic() - started) * 1000)
    if terminal.integration is IntegrationState.RICH:
        return True, ""
    if terminal.integration is IntegrationState.PENDING:
        terminal.give_up_integration()
        return False, (
            f"shell integration of terminal {terminal.id} ({terminal.shell}) did not come "
            f"up within {round(window * 1000)} ms of the shell's own time ({waited} ms waited)"
        )
    return False, (
        f"terminal {terminal.id} ({terminal.shell}) has no shell integration "
        f"(found out after {waited} ms)"
    )
