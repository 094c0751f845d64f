"""ControlMasters: one ssh connection carrying many terminals, and their pool.

A master is our own child, ``ssh -M -N`` in the foreground with ``ControlPersist=no``
and its socket in a private runtime directory of ours, so it has an owner: it ends
with its last terminal (:meth:`SshPool.release`), and with the server however the
server ends -- it carries the server's tag (the placement's environment, not the
first terminal's cgroup: it outlives that terminal), so the server's watchdog reaps
it (:mod:`registry.watchdog`), and ``PR_SET_PDEATHSIG`` ends it at once even where
no watchdog runs.  It is ready once its socket listens, which ssh
tells by running our ``LocalCommand`` (ssh.c runs it right after ``muxserver_listen``):
an event, not a probe.

sshd opens at most MaxSessions (10 by default) sessions per connection and refuses
the rest -- the refused client then quietly opens a connection of its own.  So a
master carries at most ``ssh_max_sessions - 1`` terminals, one session is kept for
control commands (one at a time), and further terminals get another master.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import itertools
import logging
import os
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from ..config import Settings
from ..errors import SpawnError
from ..private_dir import is_private, make_private_directory
from .channel import run_local
from .children import NOWHERE, Placement, agent_environment, reset_signals

__all__ = ["SshMaster", "SshPool", "ssh_argv", "ssh_options"]

log = logging.getLogger(__name__)

#: What LocalCommand prints once the master's socket listens.
_READY = b"terminal-registry-master-ready"
_names = itertools.count(1)


#: A Unix socket's path holds at most 107 bytes; ssh binds a temporary name first,
#: the control path plus ``.`` and 16 random characters.
_SOCKET_PATH_MAX = 107 - 17


def _control_path() -> str:
    """A new control socket path in a private directory of ours: under
    ``$XDG_RUNTIME_DIR`` when it is short enough for a socket, else in ``/tmp``.

    Sockets a dead server's masters left there (killed, they cannot unlink them) are
    removed first: they are named after the server's pid.
    """
    name = f"{os.getpid()}-{next(_names)}"
    candidates = [os.path.join("/tmp", f"terminal-registry-{os.getuid()}", "ssh")]
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        candidates.insert(0, os.path.join(runtime, "terminal-registry", "ssh"))
    fitting = [c for c in candidates if len(os.path.join(c, name).encode()) <= _SOCKET_PATH_MAX]
    if not fitting:
        raise SpawnError(f"no directory short enough for an ssh control socket: {candidates}")
    path = fitting[0]
    make_private_directory(path)
    if not is_private(path):
        raise SpawnError(f"{path} is not a private directory of ours: refusing to use it")
    with contextlib.suppress(OSError):
        for stale in os.listdir(path):
            owner = stale.partition("-")[0]
            if owner.isdigit() and not _running(int(owner)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(path, stale))
    return os.path.join(path, name)


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _die_with_parent() -> None:
    """In a master, between fork and exec: SIGTERM when the server dies, however."""
    reset_signals()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def ssh_argv(settings: Settings) -> list[str]:
    argv = [settings.ssh_command]
    if settings.ssh_config_file:
        argv += ["-F", settings.ssh_config_file]
    return argv


def ssh_options(**options: object) -> list[str]:
    argv: list[str] = []
    for name, value in options.items():
        argv += ["-o", f"{name}={value}"]
    return argv


class SshMaster:
    """One ControlMaster: our child ``ssh -M -N``, its socket, its sessions."""

    def __init__(
        self, destination: str, name: str, settings: Settings, placement: Placement = NOWHERE
    ) -> None:
        self.destination = destination
        self.name = name
        self._settings = settings
        #: The server's tag only: the master is no one terminal's.
        self._placement = Placement(placement.env)
        self.path = _control_path()
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
            *ssh_argv(settings),
            "-M",
            "-N",
            "-S",
            self.path,
            *ssh_options(
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
            self.destination,
        ]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env={**agent_environment(os.environ, term="dumb"), **self._placement.env},
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
            raise SpawnError(f"cannot connect to {self.name}: {why}")

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

    def _argv(self, flags: list[str], command: str, **options: object) -> list[str]:
        """ssh with ``flags`` and ``options`` (on top of what every client of ours
        sets: no master of its own, no prompts, no forwardings), running ``command``."""
        return [
            *ssh_argv(self._settings),
            *flags,
            *ssh_options(
                ControlMaster="no",
                BatchMode="yes",
                LogLevel="ERROR",
                ClearAllForwardings="yes",
                **options,
            ),
            "--",
            self.destination,
            command,
        ]

    def client_argv(self, remote_command: str) -> list[str]:
        settings = self._settings
        return self._argv(
            ["-tt", "-e", "none", "-S", self.path],
            remote_command,
            ServerAliveInterval=max(1, round(settings.ssh_keepalive_interval)),
            ServerAliveCountMax=settings.ssh_keepalive_count,
            ConnectTimeout=max(1, round(settings.ssh_connect_timeout)),
        )

    def standalone_argv(self, command: str) -> list[str]:
        """``command`` on the target over a connection of its own (no master needed:
        what the watchdog runs once the server and its masters are gone)."""
        return self._argv(
            ["-T"],
            command,
            ControlPath="none",
            ConnectTimeout=max(1, round(min(self._settings.ssh_connect_timeout, 10))),
        )

    async def control(
        self, command: str, timeout: float, placement: Placement = NOWHERE
    ) -> tuple[int | None, str]:
        """Run ``command`` over this master (one at a time: its reserved session)."""
        argv = self._argv(
            ["-T", "-S", self.path],
            command,
            ConnectTimeout=max(1, round(self._settings.ssh_connect_timeout)),
        )
        async with self._control_slot:
            status, out, err = await run_local(argv, timeout, placement)
        if status != 0:
            log.debug("control on %s: status %s: %s", self.name, status, err.strip())
        return (status, out)


class SshPool:
    """A target's masters: a terminal gets a session on one with room, else a new one."""

    def __init__(self, destination: str, name: str) -> None:
        self.destination = destination
        self.name = name
        self.masters: list[SshMaster] = []
        self._lock = asyncio.Lock()

    async def session(self, settings: Settings, placement: Placement = NOWHERE) -> SshMaster:
        """A master with a free session, now counted as taken (a new master carries
        ``placement``'s environment: the server's tag)."""
        async with self._lock:
            self.masters = [m for m in self.masters if m.alive]
            for master in self.masters:
                if master.sessions < master.capacity:
                    master.sessions += 1
                    return master
            master = SshMaster(self.destination, self.name, settings, placement)
            await master.start()
            self.masters.append(master)
            master.sessions += 1
            return master

    async def release(self, master: SshMaster) -> None:
        """A terminal on ``master`` has ended; the master ends with its last one."""
        master.sessions -= 1
        if master.sessions <= 0:
            if master in self.masters:
                self.masters.remove(master)
            await master.stop()
