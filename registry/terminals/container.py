"""The container provider: remote shells in a running container, over ``exec``.

``docker exec -it`` / ``podman exec -it`` runs our bootstrap in the container, in a
local PTY, exactly as ssh does for the ssh provider
(:mod:`~registry.terminals.remote`).  What is particular to containers:

* the engine: the one in settings (``container_engine``, a command line such as
  ``podman --root /srv/podman``), else whichever of docker and podman on PATH knows
  the container (``container inspect``: a docker client without a daemon is passed
  over);
* ``exec`` does not end the shell when its client ends (moby#9098, kubernetes#89031:
  the shell lives on, holding its tty), so closing sweeps the container by the
  terminal's tag over a second ``exec`` -- also when the client died on its own;
* control commands are ``exec`` without a tty; paths are the container's.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import time
import weakref
from dataclasses import dataclass

from ..config import Settings
from ..errors import SpawnError
from ..shell.remote import RemoteReport
from .channel import RemoteChannel, RemoteTarget, run_local
from .children import Placement
from .remote import RemoteShellTerminal

__all__ = ["ContainerTarget", "ContainerTerminal", "resolve_container"]

#: Engines tried, in this order, when none is set.
_ENGINES = ("docker", "podman")
#: A container found is trusted this long before it is looked up again.
_RESOLVE_TTL = 60.0


@dataclass
class ContainerTarget:
    """A running container and the engine that runs it."""

    spec: str
    engine: list[str]
    resolved_at: float
    home: str | None = None

    @property
    def engine_name(self) -> str:
        return self.engine[0].rsplit("/", 1)[-1]

    @property
    def key(self) -> str:
        return f"{shlex.join(self.engine)}/{self.spec}"

    @property
    def name(self) -> str:
        return f"container {self.spec} ({self.engine_name})"

    async def channel(self, settings: Settings, placement: Placement) -> RemoteChannel:
        """An ``exec`` of the engine per terminal: nothing to open in advance."""
        return ContainerChannel(self, placement)


_targets: weakref.WeakKeyDictionary[
    asyncio.AbstractEventLoop, dict[tuple[str, str], ContainerTarget]
] = weakref.WeakKeyDictionary()


def _check_spec(spec: str) -> None:
    if not spec or spec.startswith("-") or any(c.isspace() or ord(c) < 32 for c in spec):
        raise ValueError(f"invalid container {spec!r}: expected a container's name or id")


async def resolve_container(spec: str, settings: Settings) -> ContainerTarget:
    """The running container ``spec`` names, and its engine."""
    _check_spec(spec)
    known = _targets.setdefault(asyncio.get_running_loop(), {})
    cache_key = (spec, settings.container_engine or "")
    target = known.get(cache_key)
    if target is not None and time.monotonic() - target.resolved_at < _RESOLVE_TTL:
        return target
    if settings.container_engine:
        candidates = [shlex.split(settings.container_engine)]
    else:
        candidates = [[found] for e in _ENGINES if (found := shutil.which(e))]
    if not candidates:
        raise SpawnError(
            f"cannot reach container {spec!r}: neither docker nor podman is on PATH "
            "(set containerEngine)"
        )
    failures = []
    for engine in candidates:
        argv = [*engine, "container", "inspect", "--format", "{{.State.Running}}", spec]
        try:
            status, out, err = await run_local(argv, settings.remote_control_timeout)
        except OSError as error:
            failures.append(f"{engine[0]}: {error}")
            continue
        if status == 0:
            if out.strip() != "true":
                raise SpawnError(f"container {spec!r} is not running ({engine[0]})")
            target = ContainerTarget(spec, engine, time.monotonic())
            old = known.get(cache_key)
            if old is not None and old.key == target.key:
                old.resolved_at = target.resolved_at
                return old
            known[cache_key] = target
            return target
        failures.append(f"{engine[0]}: {' '.join(err.split()) or f'status {status}'}")
    raise SpawnError(f"cannot reach container {spec!r}: " + "; ".join(failures))


class ContainerChannel(RemoteChannel):
    """A terminal's way into its container: ``exec``, with and without a tty."""

    def __init__(self, target: ContainerTarget, placement: Placement) -> None:
        self.spec = target.spec
        self.key = target.key
        self.name = target.name
        self.placement = placement
        self._target = target

    def client_argv(self, remote_command: str) -> list[str]:
        return [*self._target.engine, "exec", "-it", self.spec, "/bin/sh", "-c", remote_command]

    async def control(self, command: str, timeout: float) -> tuple[int | None, str]:
        status, out, _err = await run_local(self.standalone_argv(command), timeout, self.placement)
        return (status, out)

    def standalone_argv(self, command: str) -> list[str]:
        return [*self._target.engine, "exec", self.spec, "/bin/sh", "-c", command]

    def control_available(self) -> bool:
        return True

    def learned(self, report: RemoteReport) -> None:
        if report.home:
            self._target.home = report.home

    def lost(self, status: int | None, signum: int | None) -> bool:
        # The engine's own failures: 125 (docker and podman), 255 (a client gone).
        return signum is not None or status in (125, 255)

    def location(self, cwd: str) -> str:
        path = cwd if cwd.startswith("/") else "/" + cwd
        return f"container://{self.spec}{path}"


class ContainerTerminal(RemoteShellTerminal):
    """A shell in a running container. The registry's provider ``container``."""

    provider = "container"

    _needs = "a container"

    @classmethod
    async def _resolve(cls, target: str, settings: Settings) -> RemoteTarget:
        return await resolve_container(target, settings)

    @property
    def container(self) -> str | None:
        return self._channel.spec
