"""The ssh provider: remote shells over the user's own OpenSSH client.

OpenSSH already does authentication, agents, jump hosts, certificates, known hosts
and multiplexing, and every user has it configured, so we drive the ``ssh`` program
(not a library: asyncssh reads only part of ssh_config -- no ControlMaster, no
KnownHostsCommand -- and signals the shell's process group, not the job):

* a destination (an alias, ``user@host``, ``user@host:port``) is resolved with
  ``ssh -G``, so ``~/.ssh/config`` -- Include, Match, ProxyJump -- decides where it
  goes; terminals are keyed by the resolved ``user@hostname:port``;
* one ControlMaster per target, in our runtime directory, started by us in the
  foreground (``-M -N``, ``ControlPersist=no``) and ready when its ``LocalCommand``
  runs (after its socket listens); it ends with its last terminal, and with the
  server (``PR_SET_PDEATHSIG``);
* a master carries at most ``ssh_max_sessions - 1`` terminals: sshd refuses
  sessions beyond its MaxSessions (10), and one is kept for control commands
  (signals, sweeps); more terminals get another master (:class:`SshPool`);
* every client runs with ``BatchMode=yes`` (a host-key or password prompt becomes
  an error naming the host, never text inside a terminal), ``-e none`` (``~.`` in a
  command line must not close the connection), keepalives, and ``-tt``.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import re
import signal
import sys
import time
import weakref
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import Settings
from ..errors import SpawnError
from ..shell.remote import RemoteReport
from .children import agent_environment, reset_signals
from .remote import RemoteChannel, RemoteShellTerminal, remote_path_key, run_local

__all__ = ["SshTarget", "SshTerminal", "parse_destination", "resolve_target"]

log = logging.getLogger(__name__)

#: What LocalCommand prints once the master's socket listens.
_READY = b"terminal-registry-master-ready"
#: A resolved destination is trusted this long (``~/.ssh/config`` may change).
_RESOLVE_TTL = 60.0
_PORTED = re.compile(
    r"(?:(?P<user>[^@\s]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[^@:\[\]\s]+):(?P<port>\d+)"
)
_names = itertools.count(1)


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


def _runtime_directory() -> str:
    """A private directory of ours for control sockets (short paths: 108 bytes max)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        path = os.path.join(runtime, "terminal-registry", "ssh")
    else:
        path = os.path.join("/tmp", f"terminal-registry-{os.getuid()}", "ssh")
    os.makedirs(path, mode=0o700, exist_ok=True)
    info = os.lstat(path)
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise SpawnError(f"{path} is not a private directory of ours: refusing to use it")
    return path


def _die_with_parent() -> None:
    """In a master, between fork and exec: SIGTERM when the server dies, however."""
    reset_signals()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _base_argv(settings: Settings) -> list[str]:
    argv = [settings.ssh_command]
    if settings.ssh_config_file:
        argv += ["-F", settings.ssh_config_file]
    return argv


def _options(**options: object) -> list[str]:
    argv: list[str] = []
    for name, value in options.items():
        argv += ["-o", f"{name}={value}"]
    return argv


class SshMaster:
    """One ControlMaster: our child ``ssh -M -N``, its socket, its sessions."""

    def __init__(self, target: SshTarget, settings: Settings) -> None:
        self.target = target
        self._settings = settings
        self.path = os.path.join(_runtime_directory(), f"{os.getpid()}-{next(_names)}")
        self.sessions = 0
        self.capacity = max(1, settings.ssh_max_sessions - 1)
        self._proc: asyncio.subprocess.Process | None = None
        self._stderr = bytearray()
        self._control_slot = asyncio.Semaphore(1)
        self._tasks: set[asyncio.Task[None]] = set()
        self.exited = asyncio.Event()

    @property
    def alive(self) -> bool:
        return self._proc is not None and not self.exited.is_set()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> None:
        """Connect; return once the socket listens. Raises :class:`SpawnError`."""
        settings = self._settings
        argv = [
            *_base_argv(settings),
            "-M",
            "-N",
            "-S",
            self.path,
            *_options(
                ControlMaster="yes",
                ControlPersist="no",
                BatchMode="yes",
                ServerAliveInterval=max(1, round(settings.ssh_keepalive_interval)),
                ServerAliveCountMax=settings.ssh_keepalive_count,
                ConnectTimeout=max(1, round(settings.ssh_connect_timeout)),
                ClearAllForwardings="yes",
                PermitLocalCommand="yes",
                LocalCommand=f"echo {_READY.decode()}",
            ),
            "--",
            self.target.destination,
        ]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=agent_environment(os.environ, term="dumb"),
                preexec_fn=_die_with_parent,
                start_new_session=True,
            )
        except OSError as error:
            raise SpawnError(f"cannot start {settings.ssh_command!r}: {error}") from error
        self._proc = proc
        assert proc.stdout is not None
        assert proc.stderr is not None
        stderr_done = self._spawn(self._read_stderr(proc.stderr))
        self._spawn(self._watch(proc))
        try:
            # stdout: our LocalCommand's word, then end-of-file when ssh points its
            # stdout at /dev/null (or exits).
            out = await asyncio.wait_for(
                proc.stdout.read(), settings.ssh_connect_timeout + settings.remote_start_timeout
            )
        except BaseException:
            await self.stop()
            raise
        if _READY not in out:
            await self.stop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(stderr_done), 1.0)
            why = " ".join(self._stderr.decode("utf-8", "replace").split()) or (
                f"ssh exited with status {proc.returncode}"
            )
            raise SpawnError(f"cannot connect to {self.target.name} ({self.target.spec}): {why}")

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    async def _read_stderr(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(4096):
            self._stderr += chunk
            del self._stderr[:-4096]

    async def _watch(self, proc: asyncio.subprocess.Process) -> None:
        await proc.wait()
        self.exited.set()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    async def stop(self) -> None:
        """End the master (its sessions end with it)."""
        proc = self._proc
        if proc is None or proc.returncode is not None:
            self.exited.set()
            return
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), self._settings.kill_grace)
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
        self.exited.set()
        with contextlib.suppress(OSError):
            os.unlink(self.path)

    def client_argv(self, remote_command: str) -> list[str]:
        return [
            *_base_argv(self._settings),
            "-tt",
            "-e",
            "none",
            "-S",
            self.path,
            *_options(
                ControlMaster="no",
                BatchMode="yes",
                LogLevel="ERROR",
                ClearAllForwardings="yes",
                ServerAliveInterval=max(1, round(self._settings.ssh_keepalive_interval)),
                ServerAliveCountMax=self._settings.ssh_keepalive_count,
                ConnectTimeout=max(1, round(self._settings.ssh_connect_timeout)),
            ),
            "--",
            self.target.destination,
            remote_command,
        ]

    async def control(self, command: str, timeout: float) -> tuple[int | None, str]:
        """Run ``command`` over this master (one at a time: its reserved session)."""
        argv = [
            *_base_argv(self._settings),
            "-T",
            "-S",
            self.path,
            *_options(
                ControlMaster="no",
                BatchMode="yes",
                LogLevel="ERROR",
                ClearAllForwardings="yes",
                ConnectTimeout=max(1, round(self._settings.ssh_connect_timeout)),
            ),
            "--",
            self.target.destination,
            command,
        ]
        async with self._control_slot:
            status, out, err = await run_local(argv, timeout)
        if status != 0:
            log.debug("control on %s: status %s: %s", self.target.name, status, err.strip())
        return (status, out)


class SshPool:
    """A target's masters: a terminal gets a session on one with room, else a new one."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.masters: list[SshMaster] = []
        self._lock = asyncio.Lock()

    async def session(self, settings: Settings) -> SshMaster:
        """A master with a free session, now counted as taken."""
        async with self._lock:
            self.masters = [m for m in self.masters if m.alive]
            for master in self.masters:
                if master.sessions < master.capacity:
                    master.sessions += 1
                    return master
            master = SshMaster(self.target, settings)
            await master.start()
            self.masters.append(master)
            master.sessions += 1
            return master

    def release(self, master: SshMaster) -> None:
        master.sessions -= 1
        if master.sessions <= 0:
            # Its last terminal is gone: so is the connection.
            if master in self.masters:
                self.masters.remove(master)
            task = asyncio.ensure_future(master.stop())
            _stopping.add(task)
            task.add_done_callback(_stopping.discard)


_stopping: set[asyncio.Task[None]] = set()


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
        self.pool = SshPool(self)

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
    argv = [*_base_argv(settings), "-G", "--", destination]
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

    def __init__(self, target: SshTarget, master: SshMaster) -> None:
        self.spec = target.spec
        self.key = target.key
        self.name = target.name
        self._target = target
        self._master = master
        self._released = False

    def client_argv(self, remote_command: str) -> list[str]:
        return self._master.client_argv(remote_command)

    async def control(self, command: str, timeout: float) -> tuple[int | None, str]:
        return await self._master.control(command, timeout)

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

    def release(self) -> None:
        if not self._released:
            self._released = True
            self._target.pool.release(self._master)

    def location(self, cwd: str) -> str:
        return f"ssh://{self.name}{cwd if cwd.startswith('/') else '/' + cwd}"


class SshTerminal(RemoteShellTerminal):
    """A shell on an ssh host. The registry's provider ``ssh``."""

    provider = "ssh"

    @classmethod
    async def locate(cls, cwd: str, target: str | None, settings: Settings) -> tuple[str, str]:
        if not target:
            raise ValueError("the ssh provider needs a host")
        resolved = await resolve_target(target, settings)
        return (resolved.key, remote_path_key(cwd, resolved.home))

    @classmethod
    async def create(
        cls,
        terminal_id: int,
        cwd: str,
        settings: Settings | None = None,
        *,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        target: str | None = None,
        integration: bool = True,
    ) -> SshTerminal:
        settings = settings or Settings()
        if not target:
            raise ValueError("the ssh provider needs a host")
        resolved = await resolve_target(target, settings)
        master = await resolved.pool.session(settings)
        channel = SshChannel(resolved, master)
        return await cls.open(
            terminal_id, cwd, settings, channel, shell=shell, env=env, integration=integration
        )

    @property
    def host(self) -> str | None:
        return self._channel.name

    @property
    def master_pid(self) -> int | None:
        """The ControlMaster this terminal's session is on (its local ssh process)."""
        channel = self._channel
        return channel._master.pid if isinstance(channel, SshChannel) else None


async def close_masters() -> None:
    """End every master of this loop (those whose terminals all closed end by
    themselves; this is for a server that is going away)."""
    for target in _targets.get(asyncio.get_running_loop(), {}).values():
        masters, target.pool.masters = target.pool.masters, []
        await asyncio.gather(*(m.stop() for m in masters), return_exceptions=True)
    if _stopping:
        await asyncio.gather(*list(_stopping), return_exceptions=True)
