"""A client that does not read cannot grow the server: its output is held back, and past
a cap it is disconnected -- that client only."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from .rpc import connect_socket, frame, serve_socket


@pytest_asyncio.fixture
async def small_server(tmp_path: Path) -> AsyncIterator[Path]:
    """A socket server that lets at most 1 MiB wait for a client."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    path = directory / "s.sock"
    process = await serve_socket(path, "--max-queued-mb", "1")
    try:
        yield path
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)


async def test_a_client_that_never_reads_is_disconnected_alone(
    small_server: Path, tmp_path: Path
) -> None:
    good = await connect_socket(str(small_server))
    await good.initialize()
    terminal = await good.call("terminal/acquire", {"cwd": str(tmp_path)})
    reader, writer = await asyncio.open_unix_connection(str(small_server))
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"capabilities": {}}}
    writer.write(frame(json.dumps(init).encode()))
    # Thousands of requests whose answers (replays of a terminal with output) pile up.
    await good.call("terminal/run", {"terminalId": terminal["id"], "command": "seq 1 20000"})
    body = {"jsonrpc": "2.0", "method": "terminal/replay", "params": {"terminalId": terminal["id"]}}
    for msg_id in range(1, 400):
        writer.write(frame(json.dumps({**body, "id": msg_id}).encode()))
        await writer.drain()
    # The stalled client was dropped: what it reads ends well before 400 answers.
    received = 0
    try:
        while chunk := await asyncio.wait_for(reader.read(1 << 20), 30):
            received += len(chunk)
    except ConnectionResetError:
        pass
    assert received < 3 * 2**20
    # The other client never noticed.
    result = await good.call("terminal/run", {"terminalId": terminal["id"], "command": "echo ok"})
    assert result["output"] == "ok\n"
    writer.close()


async def test_output_a_client_missed_is_reported_once_it_reads(
    small_server: Path, tmp_path: Path
) -> None:
    slow = await connect_socket(str(small_server))
    await slow.initialize()
    terminal = await slow.call("terminal/acquire", {"cwd": str(tmp_path)})
    driver = await connect_socket(str(small_server))
    await driver.initialize()
    # 8 MB of output while `slow` reads nothing.
    await driver.call(
        "terminal/run",
        {"terminalId": terminal["id"], "command": f"{sys.executable} -c \"print('x' * 8000000)\""},
    )
    await driver.call("terminal/run", {"terminalId": terminal["id"], "command": "echo after"})
    # Reading again, it is told what it missed (even though nothing more is printed)
    # and repaints from the replay, which has the end.
    missed = 0
    while not missed:
        params = await slow.notification("terminal/didWrite", terminalId=terminal["id"])
        slow.notifications.clear()
        missed += params.get("missed", 0)
    replay = await slow.call("terminal/replay", {"terminalId": terminal["id"]})
    assert "after" in replay["data"]
    assert isinstance(await slow.call("terminal/list", {}), list)


async def test_a_terminal_nobody_reads_holds_bounded_unread_and_replay_output(
    tmp_path: Path,
) -> None:
    """40 runs of 200 kB each, never retrieved, in a terminal that keeps 64 KiB per run
    and 32 KiB of replay: what it holds stays within a few caps, not 8 MB; and the
    reader is told what was let go."""
    from registry.config import Settings
    from registry.registry import TerminalRegistry
    from registry.unread import MAX_UNREAD_RUNS

    cap, replay_cap = 64 * 1024, 32 * 1024
    registry = TerminalRegistry(Settings(run_output_cap=cap, replay_cap=replay_cap))
    try:
        command = "head -c 200000 /dev/zero | tr '\\0' x"
        for _ in range(40):
            run = await registry.run(
                command, cwd=str(tmp_path), task_id="t", provider="subprocess", background=True
            )
            await run.wait()
            assert run.output_bytes == 200_000
        entry = registry.entry(run.terminal_id)
        queue = entry.unread
        assert len(queue._entries) <= MAX_UNREAD_RUNS + 1
        held = sum(e.pending.held for e in queue._entries)
        assert held <= 3 * cap + len(queue._entries) * 64 * 1024
        assert entry.terminal._replay.held <= 2 * replay_cap + 64 * 1024
        text = registry.unretrieved_output(run.terminal_id)
        assert "earlier run(s) was not kept" in text
        assert text.count("xxxx") >= 1
    finally:
        await registry.close()


async def test_an_answer_waits_behind_little_output_for_a_client_that_fell_behind(
    tmp_path: Path,
) -> None:
    """A client that has not read while a terminal printed 20 MB asks something: its
    answer comes after at most a few hundred KiB of held output (the rest is held
    back and reported as ``missed``), not after megabytes."""
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    path = directory / "s.sock"
    server = await serve_socket(path)
    try:
        slow = await connect_socket(str(path))
        await slow.initialize()
        driver = await connect_socket(str(path))
        await driver.initialize()
        await driver.call(
            "terminal/run",
            {"command": "head -c 20000000 /dev/zero | tr '\\0' y", "cwd": str(tmp_path)},
        )
        msg_id = slow.request("terminal/list", {})
        before = 0
        while True:
            message = await slow._next()
            if message.get("id") == msg_id:
                break
            before += len(json.dumps(message))
        assert before < 1024 * 1024
    finally:
        server.terminate()
        await server.wait()
