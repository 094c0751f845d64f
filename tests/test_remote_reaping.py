"""A server that dies, however, leaves nothing of its remote terminals running: here
the watchdog ends the local ``ssh`` clients, the ControlMaster and ``podman exec``;
on the target, the hang-up ends the shell and its jobs, and each terminal's reap
command -- a sweep over a connection of its own -- ends what escaped there (its own
session, ``nohup``) and removes the scratch directory.

The private sshd (tests/sshd.py) runs the remote shells as a throwaway user: the
watchdog, reaping its own user's processes here, cannot end them -- only the sweep
on the target can.  The container (tests/containers.py) is podman's, as root.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from registry.processes import wait_gone

from .containers import PODMAN, container
from .rpc import RawPeer, alive, connect_socket, serve_socket
from .sshd import PrivateSshd, sshd

__all__ = ["container", "sshd"]

#: What each terminal starts before the server dies: a job, a process in a session of
#: its own, a nohup'd one -- all with the terminal's tag, none in the foreground.
ESCAPERS = (
    "sleep 601 & setsid sleep 602 </dev/null >/dev/null 2>&1 & "
    "nohup sleep 603 </dev/null >/dev/null 2>&1 & echo $TERMINAL_REGISTRY_TERMINAL"
)
SCRATCH_GLOBS = ("/dev/shm/terminal-registry-remote-*", "/tmp/terminal-registry-remote-*")
SCRATCH = f"ls -d {' '.join(SCRATCH_GLOBS)} 2>/dev/null; true"


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Path]:
    """A private runtime directory: the server's record and sockets go there."""
    directory = tmp_path / "xdg"
    directory.mkdir(mode=0o700)
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(directory)
    yield directory
    if saved is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = saved


class DyingServer:
    """A socket server with the given settings, to be SIGKILLed by the test."""

    def __init__(self, process: asyncio.subprocess.Process, peer: RawPeer) -> None:
        self.process = process
        self.peer = peer

    def children(self) -> list[psutil.Process]:
        return psutil.Process(self.process.pid).children()

    async def run(self, command: str, cwd: str = "/tmp", **where: str) -> str:
        result: dict[str, Any] = await self.peer.call(
            "terminal/run", {"command": command, "cwd": cwd, **where}
        )
        assert result["exitCode"] == 0, result
        return str(result["output"]).strip()

    async def tag_after_escapers(self, cwd: str = "/tmp", **where: str) -> str:
        """Start :data:`ESCAPERS`; the terminal's tag (after bash's job lines)."""
        return (await self.run(ESCAPERS, cwd, **where)).splitlines()[-1]

    async def die(self) -> list[psutil.Process]:
        """SIGKILL; returns once its watchdog has reaped (and exited): the processes
        that were its children (none of them may be left)."""
        children = self.children()
        [watchdog] = [p for p in children if "registry.watchdog" in " ".join(p.cmdline())]
        self.process.kill()
        await self.process.wait()
        assert await wait_gone([watchdog], 60) == []
        return children


@contextlib.asynccontextmanager
async def dying_server(runtime: Path, **options: str) -> AsyncIterator[DyingServer]:
    """A socket server with these settings (initializationOptions)."""
    process = await serve_socket(runtime / "s.sock", "--options", json.dumps(options))
    try:
        peer = await connect_socket(str(runtime / "s.sock"))
        await peer.initialize()
        yield DyingServer(process, peer)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


async def test_a_killed_server_leaves_nothing_on_an_ssh_host(
    runtime: Path, sshd: PrivateSshd
) -> None:
    before = _scratch_of(sshd.uid)
    async with dying_server(runtime, sshConfigFile=sshd.config) as server:
        # Two terminals (two cwds): two sessions on one master.
        tags = [await server.tag_after_escapers(cwd, host=sshd.alias) for cwd in ("/tmp", "/")]
        remote = await _all_started(
            lambda: [p for tag in tags for p in sshd.tagged(tag)], ["bash"] * 2 + ["sleep"] * 6
        )
        scratch = _scratch_of(sshd.uid) - before
        assert len(scratch) == 2
        local = [p for p in server.children() if p.name() == "ssh"]
        assert len(local) == 3  # the master and a client per terminal

        children = await server.die()

    assert alive(children) == []
    assert alive(remote) == []
    assert [tag for tag in tags if sshd.tagged(tag)] == []
    assert [path for path in scratch if os.path.exists(path)] == []


async def test_a_killed_server_leaves_nothing_in_a_container(runtime: Path, container: str) -> None:
    assert PODMAN is not None
    before = await _scratch_in(container)
    async with dying_server(runtime, containerEngine=PODMAN) as server:
        tag = await server.tag_after_escapers(container=container)
        inside = await _all_started(
            lambda: [p for p in _tagged_here(tag) if p.name() != "podman"],
            ["bash", "sleep", "sleep", "sleep"],
        )

        children = await server.die()

    assert alive(children) == []
    assert alive(inside) == []
    assert sorted(await _scratch_in(container)) == sorted(before)  # its scratch swept


def _scratch_of(uid: int) -> set[str]:
    """The scratch directories of remote terminals of user ``uid`` on this machine
    (the private sshd's targets are this machine)."""
    found = set()
    for path in [*glob.glob(SCRATCH_GLOBS[0]), *glob.glob(SCRATCH_GLOBS[1])]:
        with contextlib.suppress(OSError):
            if os.stat(path).st_uid == uid:
                found.add(path)
    return found


async def _all_started(
    find: Callable[[], list[psutil.Process]], names: list[str]
) -> list[psutil.Process]:
    """What ``find`` finds once it is the processes ``names``, bounded.

    The command has started its escapers when its run ends, but ``setsid`` forks
    when it leads its job's process group, and a process between fork and exec (or
    in exec) has no name or environment yet that says what it will be -- and no
    event to await: so it is looked for again, for at most 10 s.
    """
    deadline = time.monotonic() + 10
    while True:
        found = find()
        if sorted(p.name() for p in found) == names or time.monotonic() > deadline:
            assert sorted(p.name() for p in found) == names
            return found
        await asyncio.sleep(0.05)


def _tagged_here(tag: str) -> list[psutil.Process]:
    """Processes of this machine carrying ``tag`` (a container's are the host's too)."""
    found = []
    for proc in psutil.process_iter(["status"]):
        try:
            living = proc.info["status"] != psutil.STATUS_ZOMBIE
            if living and proc.environ().get("TERMINAL_REGISTRY_TERMINAL") == tag:
                found.append(proc)
        except psutil.Error:
            continue
    return found


async def _scratch_in(container: str) -> list[str]:
    """Our scratch directories in the container."""
    assert PODMAN is not None
    listing = await asyncio.create_subprocess_exec(
        PODMAN, "exec", container, "sh", "-c", SCRATCH, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await listing.communicate()
    return out.decode().split()
