"""A remote terminal's way to its target: the provider's half of a remote terminal.

:class:`RemoteChannel` is what a provider (:mod:`~registry.terminals.ssh`,
:mod:`~registry.terminals.container`) gives each
:class:`~registry.terminals.remote.RemoteShellTerminal`: the local client that runs
a command on the target in a terminal, control commands beside it, whether the
client's end means the connection was lost, and the target's names; and
:class:`RemoteTarget`, a provider's resolved target, which opens channels.  Also here:
:func:`run_local`, how every short-lived local helper (``ssh -G``, a control
command) runs.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import os
from typing import Protocol

from ..config import Settings
from ..shell.remote import RemoteReport
from .children import NOWHERE, Placement, agent_environment, reset_signals

__all__ = ["RemoteChannel", "RemoteTarget", "run_local"]


class RemoteTarget(Protocol):
    """A provider's target, resolved (an ssh destination, a container)."""

    @property
    def key(self) -> str:
        """The registry's key for the target: equal targets, equal keys."""
        ...

    @property
    def home(self) -> str | None:
        """Its home directory, once a terminal's bootstrap reported it."""
        ...

    async def channel(self, settings: Settings, placement: Placement) -> RemoteChannel:
        """A channel for one more terminal there."""
        ...


async def run_local(
    argv: list[str], timeout: float, placement: Placement = NOWHERE
) -> tuple[int | None, str, str]:
    """Run a short-lived local command: (status, stdout, stderr); None on timeout.

    It carries ``placement``'s environment (the server's tag), so that it is reaped
    with the server's other processes should the server die while it runs.
    """
    env = agent_environment(os.environ, term="dumb")
    env.update(placement.env)
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
        preexec_fn=reset_signals,
        start_new_session=True,
    )
    try:
        out, err = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        return (None, "", "timed out")
    finally:
        if proc.returncode is None:  # timed out, or our caller was cancelled
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await asyncio.shield(proc.wait())
    return (proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))


class RemoteChannel(abc.ABC):
    """One terminal's way to its target: the provider's part of a remote terminal."""

    #: The target as it was asked for (an ssh destination, a container name).
    spec: str
    #: The target as the registry indexes it (``user@host:port``, ``engine/name``).
    key: str
    #: The target for people: ``user@host``, ``container web (podman)``.
    name: str
    #: The terminal's placement: what the local processes started for it carry.
    placement: Placement = NOWHERE

    @abc.abstractmethod
    def client_argv(self, remote_command: str) -> list[str]:
        """The local client that runs ``remote_command`` on the target in a terminal."""

    @abc.abstractmethod
    async def control(self, command: str, timeout: float) -> tuple[int | None, str]:
        """Run ``command`` on the target beside the terminal: (exit status, stdout).
        Status None: it could not be run (or did not finish in ``timeout``)."""

    @abc.abstractmethod
    def standalone_argv(self, command: str) -> list[str]:
        """A local command that runs ``command`` on the target needing nothing of
        ours (no master, no server): what the watchdog runs to sweep the target."""

    @abc.abstractmethod
    def control_available(self) -> bool:
        """Whether a control command can reach the target cheaply now."""

    @abc.abstractmethod
    def lost(self, status: int | None, signum: int | None) -> bool:
        """Whether the client ending so means the connection, not the shell, ended."""

    def learned(self, report: RemoteReport) -> None:  # noqa: B027 - optional hook
        """The bootstrap reported (its home directory, its shell)."""

    def refused(self) -> None:  # noqa: B027 - optional hook
        """The client said its session was refused (and made its own connection)."""

    async def release(self) -> None:  # noqa: B027 - optional hook
        """The terminal's client has ended: its session is free (and a connection
        that carried nothing else any more ends before this returns)."""

    def location(self, cwd: str) -> str:
        """A cwd on the target for people and models."""
        return f"{self.name}:{cwd}"
