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
    missed = 0
    while True:
        params = await slow.notification("terminal/didWrite", terminalId=terminal["id"])
        slow.notifications.clear()
        missed += params.get("missed", 0)
        if "after" in params["data"]:
            break
    assert missed > 0
    assert isinstance(await slow.call("terminal/list", {}), list)
