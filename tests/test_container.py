"""The container provider against a real container (tests/containers.py: podman, as
root, with the host's root file system as the container's).  Skips, saying why,
where no engine can run a container.

Container processes are found by the terminal's tag, which the shell reports, among
the machine's processes (a container's processes are the host's too).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator

import psutil
import pytest
import pytest_asyncio

from registry.config import Settings
from registry.errors import InvalidCwdError, SpawnError
from registry.registry import TerminalRegistry
from registry.run import RunState
from registry.terminals.base import Terminal
from registry.terminals.container import ContainerTerminal

from .conftest import fast_settings, started
from .containers import PODMAN, container

__all__ = ["container"]


def settings() -> Settings:
    base = fast_settings()
    base.container_engine = PODMAN
    return base


@pytest_asyncio.fixture
async def reg() -> AsyncIterator[TerminalRegistry]:
    registry = TerminalRegistry(settings())
    yield registry
    await registry.close()


async def boxed(reg: TerminalRegistry, container: str, cwd: str = "/tmp") -> ContainerTerminal:
    terminal = await reg.get_or_create(cwd, "t", "container", target=container)
    assert isinstance(terminal, ContainerTerminal)
    return terminal


async def text(terminal: Terminal, command: str) -> str:
    run = await asyncio.wait_for(terminal.run(command), 30)
    assert run.state is RunState.COMPLETED, (run.state, run.note)
    return run.text().replace("\r\n", "\n").strip()


def tagged(tag: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["status"]):
        with contextlib.suppress(psutil.Error):
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if proc.environ().get("TERMINAL_REGISTRY_TERMINAL") == tag:
                found.append(proc)
    return found


def alive(proc: psutil.Process) -> bool:
    try:
        return bool(proc.status() != psutil.STATUS_ZOMBIE)
    except psutil.Error:
        return False


async def test_runs_in_the_container_and_is_found_there_again(
    reg: TerminalRegistry, container: str
) -> None:
    terminal = await boxed(reg, container)
    assert (terminal.provider, terminal.container, terminal.host) == ("container", container, None)
    assert terminal.display_cwd == f"container://{container}/tmp"
    inside = await text(terminal, "cat /proc/1/cmdline | tr '\\0' ' '; echo; (exit 4)")
    assert inside.startswith("sleep infinity")  # its pid 1 is the container's
    assert terminal.last_run is not None
    assert terminal.last_run.exit_code == 4
    await text(terminal, "mkdir -p /srv/app && cd /srv/app")
    assert terminal.cwd == "/srv/app"
    assert await reg.get_or_create("/srv/app/", "t", "container", target=container) is terminal
    with pytest.raises(InvalidCwdError, match=f"does not exist on container {container}"):
        await reg.get_or_create("/no/such", "t", "container", target=container)


async def test_close_ends_the_shell_inside_the_container(
    reg: TerminalRegistry, container: str
) -> None:
    terminal = await boxed(reg, container)
    tag = await text(terminal, "echo $TERMINAL_REGISTRY_TERMINAL")
    await text(terminal, "sleep 300 & nohup sleep 301 >/dev/null 2>&1 & echo $!")
    inside = tagged(tag)
    assert len(inside) >= 3
    await terminal.close()
    # Ended (zombies at most: the container's pid 1, `sleep infinity`, reaps nobody).
    assert tagged(tag) == []
    assert [p for p in inside if alive(p)] == []


async def test_the_exec_client_killed_fails_the_run_and_ends_the_shell_inside(
    reg: TerminalRegistry, container: str
) -> None:
    terminal = await boxed(reg, container)
    tag = await text(terminal, "echo $TERMINAL_REGISTRY_TERMINAL")
    run = await started(terminal, "echo sleep''ing; sleep 300", b"sleeping")
    assert terminal.pid is not None
    os.kill(terminal.pid, signal.SIGKILL)  # the local `podman exec`
    await asyncio.wait_for(run.wait(), 30)
    assert (run.state, run.note) == (
        RunState.FAILED,
        f"connection to container {container} (podman) lost",
    )
    await asyncio.wait_for(terminal.wait_closed(), 30)
    # exec would have left the shell running in the container; the sweep did not.
    assert tagged(tag) == []


async def test_timeout_ends_the_tree_in_the_container(
    reg: TerminalRegistry, container: str
) -> None:
    terminal = await boxed(reg, container)
    tag = await text(terminal, "echo $TERMINAL_REGISTRY_TERMINAL")
    job = 'sh -c \'trap "" INT; sleep 300 & echo u""p; sleep 301\''
    run = await started(terminal, job, b"up", timeout=0.5)
    await asyncio.wait_for(run.wait(), 30)
    assert (run.state, run.exit_code) == (RunState.TIMED_OUT, 143)
    # Left: the shell in the container, and here the `podman exec` it runs in.
    left = [p for p in tagged(tag) if p.pid != terminal.pid]
    assert [p.name() for p in left] == ["bash"]


async def test_a_container_that_is_not_there_is_a_clear_error(
    reg: TerminalRegistry, container: str
) -> None:
    with pytest.raises(SpawnError, match="cannot reach container 'no-such-container-x'"):
        await reg.get_or_create("/", "t", "container", target="no-such-container-x")
    with pytest.raises(ValueError, match="invalid container"):
        await reg.get_or_create("/", "t", "container", target="--privileged")
