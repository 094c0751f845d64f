"""The ssh provider: remote shells over the user's own OpenSSH client.

OpenSSH already does authentication, agents, jump hosts, certificates, known hosts
and multiplexing, and every user has it configured, so we drive the ``ssh`` program
(not a library: asyncssh reads only part of ssh_config -- no ControlMaster, no
KnownHostsCommand -- and signals the shell's process group, not the job):

* a destination (an alias, ``user@host``, ``user@host:port``) is resolved with
  ``ssh -G``, so ``~/.ssh/config`` -- Include, Match, ProxyJump -- decides where it
  goes; terminals are keyed by the resolved ``user@hostname:port``;
* each terminal is a session on one of the target's ControlMasters
  (:mod:`~registry.terminals.sshmaster`), and so is each control command;
* every client runs with ``BatchMode=yes`` (a host-key or password prompt becomes
  an error naming the host, never text inside a terminal), ``-e none`` (``~.`` in a
  command line must not close the connection), keepalives, and ``-tt``.
"""

from __future__ import annotations

import asyncio
import re
import time
import weakref
from dataclasses import dataclass, field

from ..config import Settings
from ..errors import SpawnError
from ..shell.remote import RemoteReport
from .channel import RemoteChannel, RemoteTarget, run_local
from .children import Placement
from .remote import RemoteShellTerminal
from .sshmaster import SshMaster, SshPool, ssh_argv

__all__ = ["SshTarget", "SshTerminal", "parse_destination", "resolve_target"]


#: A resolved destination is trusted this long (``~/.ssh/config`` may change).
_RESOLVE_TTL = 60.0
_PORTED = re.compile(
    r"(?:(?P<user>[^@\s]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^@:\[\]\s]+):(?P<port>\d+)"
)


def parse_destination(spec: str) -> str:
    """The destination to give ``ssh`` for a ``host`` parameter.

    ``user@host:port`` becomes ``ssh://user@host:port`` (what ssh takes); an alias or
    ``user@host`` passes as it is.  Raises :class:`ValueError` for what ssh would
    misread (an option, spaces, control characters).
    """
    if not spec or spec.startswith("-") or any(c.isspace() or ord(c) < 32 for c in spec):
        raise ValueError(
            f"invalid ssh host {spec!r}: expected an alias, user@host or user@host:port"
        )
    if spec.startswith("ssh://"):
        return spec
    if "://" in spec:
        raise ValueError(f"invalid ssh host {spec!r}: only ssh:// destinations are taken")
    match = _PORTED.fullmatch(spec)
    if match is not None:
        return f"ssh://{spec}"
    if spec.count(":") and not spec.startswith("["):
        raise ValueError(f"invalid ssh host {spec!r}: a port must be a number (host:22)")
    return spec


@dataclass
class SshTarget:
    """A destination as ``ssh -G`` resolved it, and what we keep per target."""

    spec: str
    destination: str
    user: str
    hostname: str
    port: int
    proxy: str
    resolved_at: float
    #: The target's home directory, once a terminal's bootstrap reported it.
    home: str | None = None
    pool: SshPool = field(init=False)

    def __post_init__(self) -> None:
        self.pool = SshPool(self.destination, self.name)

    @property
    def key(self) -> str:
        via = f" via {self.proxy}" if self.proxy else ""
        return f"{self.user}@{self.hostname}:{self.port}{via}"

    @property
    def name(self) -> str:
        """``user@host``, with ``:port`` when it is not 22."""
        host = f"[{self.hostname}]" if ":" in self.hostname else self.hostname
        port = f":{self.port}" if self.port != 22 else ""
        return f"{self.user}@{host}{port}"

    async def channel(self, settings: Settings, placement: Placement) -> RemoteChannel:
        """A session on one of the target's masters (a new master when all are full)."""
        return SshChannel(self, await self.pool.session(settings, placement), placement)


#: Resolved targets, per event loop (their masters are the loop's child processes).
_targets: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[tuple[str, ...], SshTarget]]
_targets = weakref.WeakKeyDictionary()


async def resolve_target(spec: str, settings: Settings) -> SshTarget:
    """The target ``spec`` names, per the user's ssh configuration (``ssh -G``)."""
    destination = parse_destination(spec)
    key = (spec, settings.ssh_command, settings.ssh_config_file or "")
    known = _targets.setdefault(asyncio.get_running_loop(), {})
    target = known.get(key)
    if target is not None and (
        target.pool.masters or time.monotonic() - target.resolved_at < _RESOLVE_TTL
    ):
        return target
    argv = [*ssh_argv(settings), "-G", "--", destination]
    try:
        status, out, err = await run_local(argv, settings.remote_control_timeout)
    except OSError as error:
        raise SpawnError(f"cannot run {settings.ssh_command!r}: {error}") from error
    if status != 0:
        why = " ".join(err.split()) or f"status {status}"
        raise SpawnError(f"cannot resolve ssh host {spec!r}: {why}")
    config: dict[str, str] = {}
    for line in out.splitlines():
        name, _, value = line.partition(" ")
        config.setdefault(name.lower(), value.strip())
    proxy = config.get("proxyjump", "none")
    if proxy == "none":
        proxy = config.get("proxycommand", "none")
    resolved = SshTarget(
        spec=spec,
        destination=destination,
        user=config.get("user", ""),
        hostname=config.get("hostname", spec),
        port=int(config.get("port", "22") or 22),
        proxy="" if proxy == "none" else proxy,
        resolved_at=time.monotonic(),
    )
    if target is not None and target.key == resolved.key:
        target.resolved_at = resolved.resolved_at  # the same place: keep its masters
        return target
    known[key] = resolved
    return resolved


class SshChannel(RemoteChannel):
    """One terminal's session on a master of its target."""

    def __init__(self, target: SshTarget, master: SshMaster, placement: Placement) -> None:
        self.spec = target.spec
        self.key = target.key
        self.name = target.name
        self.placement = placement
        self._target = target
        self._master = master
        self._released = False

    def client_argv(self, remote_command: str) -> list[str]:
        return self._master.client_argv(remote_command)

    async def control(self, command: str, timeout: float) -> tuple[int | None, str]:
        return await self._master.control(command, timeout, self.placement)

    def standalone_argv(self, command: str) -> list[str]:
        return self._master.standalone_argv(command)

    def control_available(self) -> bool:
        return self._master.alive

    def lost(self, status: int | None, signum: int | None) -> bool:
        # ssh exits 255 for its own errors (the connection, the master gone) and
        # passes the remote shell's status on otherwise.
        return signum is not None or status == 255

    def learned(self, report: RemoteReport) -> None:
        if report.home:
            self._target.home = report.home

    def refused(self) -> None:
        # sshd allows fewer sessions than we thought: this master is full, and this
        # terminal is not on it (its client connected by itself).
        master = self._master
        master.capacity = max(1, master.sessions - 1)

    async def release(self) -> None:
        if not self._released:
            self._released = True
            await self._target.pool.release(self._master)

    def location(self, cwd: str) -> str:
        return f"ssh://{self.name}{cwd if cwd.startswith('/') else '/' + cwd}"


class SshTerminal(RemoteShellTerminal):
    """A shell on an ssh host. The registry's provider ``ssh``."""

    provider = "ssh"

    _needs = "a host"

    @classmethod
    async def _resolve(cls, target: str, settings: Settings) -> RemoteTarget:
        return await resolve_target(target, settings)

    @property
    def host(self) -> str | None:
        return self._channel.name

    @property
    def master_pid(self) -> int | None:
        """The ControlMaster this terminal's session is on (its local ssh process)."""
        channel = self._channel
        return channel._master.pid if isinstance(channel, SshChannel) else None
