"""No process outlives its owner: however the server ends -- SIGKILL, SIGTERM, stdin
closing, its client dying -- every process its terminals started ends too, escaping
ones included; and a server that starts after a dead one (whose watchdog died too)
reaps what was left and removes the stale socket."""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from registry.cgroups import detect
from registry.processes import wait_gone

from .rpc import StdioServer, alive, connect_socket, serve_socket, tokened_sleeps

#: Every escaping kind, each announcing itself on the FIFO just before it becomes
#: its sleep; the last one holds the run in the foreground.
KINDS = 8


def _script(fifo: Path, token: str, provider: str) -> str:
    def sleeper(n: int) -> str:
        return f"sh -c 'echo {provider}{n} > {fifo}; exec sleep 40{n}.{token}'"

    return "\n".join(
        [
            f"{sleeper(1)} &",
            f"setsid {sleeper(2)} &",
            f"nohup {sleeper(3)} >/dev/null 2>&1 &",
            f"( ( {sleeper(4)} & ) & )",
            f"bash -c \"trap '' TERM HUP INT; exec {sleeper(5)}\" &",
            f"env -i setsid -f {sleeper(6)}",
            f"env -u TERMINAL_REGISTRY_TERMINAL -u TERMINAL_REGISTRY_SERVER setsid -f {sleeper(7)}",
            sleeper(0),
        ]
    )


async def _announced(fifo: Path, count: int) -> set[str]:
    """Read ``count`` announcements from the FIFO (awaited, not polled)."""
    fd = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)
    loop = asyncio.get_running_loop()
    seen: set[str] = set()
    buffer = b""
    ready = asyncio.Event()
    loop.add_reader(fd, ready.set)
    try:
        while len(seen) < count:
            await asyncio.wait_for(ready.wait(), 30)
            ready.clear()
            try:
                buffer += os.read(fd, 4096)
            except BlockingIOError:
                continue
            *lines, buffer = buffer.split(b"\n")
            seen.update(line.decode() for line in lines)
    finally:
        loop.remove_reader(fd)
        os.close(fd)
    return seen


@pytest_asyncio.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[dict[str, str]]:
    """A private runtime directory (the servers' state records live there)."""
    directory = tmp_path / "xdg"
    directory.mkdir(mode=0o700)
    saved = os.environ.get("XDG_RUNTIME_DIR")
    os.environ["XDG_RUNTIME_DIR"] = str(directory)
    yield {"XDG_RUNTIME_DIR": str(directory)}
    if saved is None:
        os.environ.pop("XDG_RUNTIME_DIR", None)
    else:
        os.environ["XDG_RUNTIME_DIR"] = saved


async def _start_escapers(peer: StdioServer | object, tmp_path: Path, token: str) -> None:
    from .rpc import RawPeer

    assert isinstance(peer, RawPeer)
    fifo = tmp_path / "announce"
    os.mkfifo(fifo)
    listening = asyncio.ensure_future(_announced(fifo, 2 * KINDS))
    for provider in ("shell", "subprocess"):
        await peer.call(
            "terminal/run",
            {
                "command": _script(fifo, token, provider[:3]),
                "cwd": str(tmp_path),
                "provider": provider,
                "background": True,
            },
        )
    await listening
    assert len(tokened_sleeps(token)) == 2 * KINDS


needs_cgroups = pytest.mark.skipif(
    detect() is None, reason="no writable cgroup hierarchy: a cleared environment escapes"
)


@needs_cgroups
@pytest.mark.parametrize("how", ["SIGKILL", "SIGTERM", "stdin EOF", "client gone"])
async def test_nothing_outlives_the_server(
    runtime: dict[str, str], tmp_path: Path, how: str
) -> None:
    token = f"{secrets.randbelow(10**12):012d}"
    owner = await asyncio.create_subprocess_exec("sleep", "600")
    peer = await StdioServer.start()
    try:
        await peer.call(
            "initialize",
            {"processId": owner.pid if how == "client gone" else os.getpid(), "capabilities": {}},
        )
        peer.notify("initialized", {})
        await _start_escapers(peer, tmp_path, token)
        sleepers = tokened_sleeps(token)
        if how in ("SIGKILL", "SIGTERM"):
            peer.process.send_signal(getattr(signal, how))
        elif how == "stdin EOF":
            assert peer.process.stdin is not None
            peer.process.stdin.close()
        else:
            owner.kill()
        await asyncio.wait_for(peer.process.wait(), 30)
        assert await wait_gone(sleepers, 10) == []
        assert alive(tokened_sleeps(token)) == []
    finally:
        if peer.process.returncode is None:
            peer.process.kill()
        if owner.returncode is None:
            owner.kill()
        await owner.wait()


@needs_cgroups
async def test_a_new_server_reaps_what_a_dead_one_and_its_watchdog_left(
    runtime: dict[str, str], tmp_path: Path
) -> None:
    token = f"{secrets.randbelow(10**12):012d}"
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    path = directory / "s.sock"
    server = await serve_socket(path)
    peer = await connect_socket(str(path))
    await peer.initialize()
    await _start_escapers(peer, tmp_path, token)
    sleepers = tokened_sleeps(token)
    watchdogs = [
        p
        for p in psutil.Process(server.pid).children()
        if "registry.watchdog" in " ".join(p.cmdline())
    ]
    assert len(watchdogs) == 1
    watchdogs[0].kill()
    server.kill()
    await server.wait()
    # Nobody reaped them (the shell's SIGHUP, as its PTY closed, ended a few).
    assert len(alive(tokened_sleeps(token))) >= KINDS
    assert path.exists()  # the stale socket
    successor = await serve_socket(path)
    try:
        assert await wait_gone(sleepers, 10) == []
        peer = await connect_socket(str(path))
        await peer.initialize()
        assert await peer.call("terminal/list", {}) == []
    finally:
        successor.terminate()
        await successor.wait()


@needs_cgroups
@pytest.mark.parametrize("provider", ["shell", "subprocess"])
async def test_close_ends_a_process_that_left_everything_behind(
    runtime: dict[str, str], tmp_path: Path, provider: str
) -> None:
    token = f"{secrets.randbelow(10**12):012d}"
    peer = await StdioServer.start()
    try:
        await peer.initialize()
        fifo = tmp_path / "announce"
        os.mkfifo(fifo)
        listening = asyncio.ensure_future(_announced(fifo, 1))
        result = await peer.call(
            "terminal/run",
            {
                "command": f"env -i setsid -f sh -c 'echo x > {fifo}; exec sleep 500.{token}'",
                "cwd": str(tmp_path),
                "provider": provider,
            },
        )
        await listening
        (escaped,) = tokened_sleeps(token)  # no tag, no session, no parent of ours
        await peer.call("terminal/close", {"terminalId": result["terminalId"]})
        assert await wait_gone([escaped], 10) == []
    finally:
        await peer.stop()
