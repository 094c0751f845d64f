"""The Python client against the real server: typed results, errors, notifications,
cancellation, and the synchronous wrapper."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from protocol import methods
from protocol.client import (
    InvalidParamsError,
    RegistryClient,
    TerminalBusyError,
    UnknownTerminalError,
)
from protocol.sync_client import SyncRegistryClient
from registry.processes import tagged_processes

FAST = {"killGraceMs": 500, "hotTimeoutMs": 300}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def client() -> AsyncIterator[RegistryClient]:
    c = await RegistryClient.spawn(FAST)
    yield c
    await c.close()


async def test_typed_results(client: RegistryClient, tmp_path: Path) -> None:
    assert client.server_info["name"] == "terminal-registry"
    assert client.capabilities["terminalRegistry"]["version"] == 1
    terminal = await client.acquire(str(tmp_path), task_id="c1")
    result = await client.run("echo typed; (exit 4)", terminal_id=terminal.id)
    assert (result.exit_code, result.output, result.cwd) == (4, "typed\n", str(tmp_path))
    assert [t.id for t in await client.list(task_id="c1")] == [terminal.id]
    assert (await client.get(terminal.id)).last_command == "echo typed; (exit 4)"


async def test_errors_are_exceptions(client: RegistryClient, tmp_path: Path) -> None:
    with pytest.raises(UnknownTerminalError, match="unknown terminal 4242"):
        await client.get(4242)
    with pytest.raises(InvalidParamsError, match="does not exist"):
        await client.run("true", cwd=str(tmp_path / "missing"))
    started = await client.run("sleep 60", cwd=str(tmp_path), background=True)
    with pytest.raises(TerminalBusyError):
        await client.run("true", terminal_id=started.terminal_id)
    await client.kill(started.terminal_id)


async def test_notifications_iterator(client: RegistryClient, tmp_path: Path) -> None:
    stream = client.notifications()  # subscribed from here on
    result = await client.run("echo noted", cwd=str(tmp_path), task_id="c2")
    seen = [await asyncio.wait_for(stream.__anext__(), 30)]
    while not any(
        n.method == "terminal/didEndRun" and n.params["runId"] == result.run_id for n in seen
    ):
        seen.append(await asyncio.wait_for(stream.__anext__(), 30))
    methods = [n.method for n in seen]
    assert "terminal/didStartRun" in methods
    written = "".join(
        n.params["data"]
        for n in seen
        if n.method == "terminal/didWrite" and n.params.get("runId") == result.run_id
    )
    assert written == "noted\r\n"
    await stream.aclose()


async def test_cancelling_the_caller_interrupts_the_command(
    client: RegistryClient, tmp_path: Path
) -> None:
    ended = asyncio.Event()
    client.on("terminal/didEndRun", lambda params: ended.set())
    tag = f"c3-{os.getpid()}-{id(tmp_path)}"
    command = f"TR_TEST_TAG={tag} sleep 130"
    task = asyncio.ensure_future(client.run(command, cwd=str(tmp_path), task_id="c3"))
    started = asyncio.Event()
    client.on("terminal/didStartRun", lambda params: started.set())
    await asyncio.wait_for(started.wait(), 30)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # The server confirmed before the cancellation reached us: nothing runs on.
    terminals = await client.list(task_id="c3")
    assert [t.busy for t in terminals] == [False]
    # Found by a tag of this test's own, never by name across the machine.
    assert tagged_processes("TR_TEST_TAG", tag) == []


def test_sync_wrapper(tmp_path: Path) -> None:
    with SyncRegistryClient.spawn(FAST) as sync:
        result = sync.run("pwd", cwd=str(tmp_path))
        assert result.output == f"{tmp_path}\n"
        details = sync.environment_details(cooldown_timeout=0)
        assert details.markdown == ""  # a foreground run's output is not news


async def test_a_server_that_dies_fails_requests_at_once(tmp_path: Path) -> None:
    """Killed under a request: the request fails at once, as does every later one."""
    from protocol.client import ConnectionLostError

    from .rpc import alive, serve_socket

    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    path = directory / "registry.sock"
    server = await serve_socket(path)
    client = await RegistryClient.connect(str(path))
    shells: list[psutil.Process] = []
    try:
        started = asyncio.Event()
        client.on(methods.DID_START_RUN, lambda params: started.set())
        waiting = asyncio.ensure_future(client.run("sleep 120", cwd=str(tmp_path)))
        await asyncio.wait_for(started.wait(), 30)
        shell = psutil.Process((await client.list())[0].pid)
        shells = [shell, *shell.children(recursive=True)]
        server.kill()  # no answer will ever come
        with pytest.raises(ConnectionLostError, match="terminal/run"):
            await asyncio.wait_for(waiting, 30)
        assert not client.connected
        with pytest.raises(ConnectionLostError, match="terminal/list"):
            await asyncio.wait_for(client.list(), 5)
    finally:
        await client.close()
        with contextlib.suppress(ProcessLookupError):  # killed and reaped already
            server.kill()
        await server.wait()
        # The PTY's hangup ends the dead server's shell and its command.
        await asyncio.to_thread(psutil.wait_procs, shells, 30)
        for proc in alive(shells):
            proc.kill()
