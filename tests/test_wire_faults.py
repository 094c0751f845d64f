"""Hostile input over the wire: nothing a client sends takes the server down, and every
message gets an answer (or, for a notification, a logged drop)."""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from .rpc import SERVER, StdioServer, frame, serving

FAST = {"killGraceMs": 500, "commandStartTimeoutMs": 2000}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server() -> AsyncIterator[StdioServer]:
    async with serving(FAST) as peer:
        yield peer


async def _still_serving(server: StdioServer) -> None:
    assert isinstance(await server.call("terminal/list", {}), list)
    assert server.process.returncode is None


async def _errors_then(server: StdioServer, msg_id: int) -> list[dict[str, Any]]:
    """Error responses that arrive before the response to ``msg_id``."""
    errors = []
    while True:
        message = await server._next()
        if message.get("id") == msg_id and "method" not in message:
            return errors
        if "error" in message:
            errors.append(message)
        else:
            server.notifications.append(message)


async def test_deep_nesting_is_a_parse_error_not_a_crash(server: StdioServer) -> None:
    server.send_raw(frame(b"[" * 100_000))
    server.send_raw(frame(b'{"a":' * 50_000 + b"1" + b"}" * 50_000))
    msg_id = server.request("terminal/list", {})
    errors = await _errors_then(server, msg_id)
    assert [e["error"]["code"] for e in errors] == [-32700, -32700]
    assert all("id" in e and e["id"] is None for e in errors)
    await _still_serving(server)


@pytest.mark.parametrize("bad_id", [{"x": 1}, [1, 2], 1.5, None, True])
async def test_cancel_request_with_any_id_is_dropped_not_fatal(
    server: StdioServer, bad_id: Any
) -> None:
    server.notify("$/cancelRequest", {"id": bad_id})
    server.notify("$/cancelRequest", {})
    server.notify("$/cancelRequest", None)
    await _still_serving(server)


@pytest.mark.parametrize("bad_id", [{"x": 1}, [1, 2], 1.5, True])
async def test_requests_with_odd_ids_are_answered(server: StdioServer, bad_id: Any) -> None:
    server.send({"jsonrpc": "2.0", "id": bad_id, "method": "terminal/list", "params": {}})
    msg_id = server.request("terminal/list", {})
    errors = await _errors_then(server, msg_id)
    assert [e["error"]["code"] for e in errors] == [-32600]
    assert errors[0]["id"] is None


async def test_framing_errors_carry_a_null_id(server: StdioServer) -> None:
    server.send_raw(b"garbage line\r\n")
    server.send_raw(frame(b"{not json"))
    msg_id = server.request("terminal/list", {})
    errors = await _errors_then(server, msg_id)
    assert [e["error"]["code"] for e in errors] == [-32700, -32700]
    assert all("id" in e and e["id"] is None for e in errors)


async def test_a_header_without_a_body_does_not_swallow_the_next_request(
    server: StdioServer,
) -> None:
    server.send_raw(b"Content-Length: 30\r\n\r\n")
    msg_id = server.request("terminal/list", {})
    errors = await _errors_then(server, msg_id)
    assert [e["error"]["code"] for e in errors] == [-32700]


async def test_an_oversized_message_is_refused_from_its_header(server: StdioServer) -> None:
    # Declared far beyond the cap: refused at once, before a byte of body arrives.
    server.send_raw(b"Content-Length: 999999999999\r\n\r\n")
    reply = await server.response(None)
    assert reply["error"]["code"] == -32700
    assert "999999999999" in reply["error"]["message"]
    await _still_serving(server)


async def test_a_big_message_is_framed_in_linear_time(server: StdioServer, tmp_path: Path) -> None:
    # 20 MB of params in one message, sent in pieces: answered (it is a valid request
    # with an unknown field), and a small request right after is answered too.
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 9090,
            "method": "terminal/list",
            "params": {"taskId": "x" * (20 * 1024 * 1024)},
        }
    ).encode()
    data = frame(body)
    for start in range(0, len(data), 1 << 20):
        server.send_raw(data[start : start + (1 << 20)])
    reply = await asyncio.wait_for(server.response(9090), 60)
    assert reply["result"] == []
    await _still_serving(server)


async def test_requests_before_initialize_are_refused(fresh: StdioServer, tmp_path: Path) -> None:
    error = await fresh.error("terminal/run", {"command": "touch made", "cwd": str(tmp_path)})
    assert error["code"] == -32002
    assert "initialize" in error["message"]
    assert not (tmp_path / "made").exists()
    await fresh.initialize(FAST)
    assert await fresh.call("terminal/list", {}) == []


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"cols": 100000, "rows": 10}, "cols"),
        ({"cols": 80, "rows": 0}, "rows"),
        ({"cols": -1, "rows": 10}, "cols"),
    ],
)
async def test_resize_out_of_range_is_invalid_params(
    server: StdioServer, tmp_path: Path, params: dict[str, int], field: str
) -> None:
    terminal = await server.call("terminal/acquire", {"cwd": str(tmp_path), "taskId": "rs"})
    error = await server.error("terminal/resize", {"terminalId": terminal["id"], **params})
    assert error["code"] == -32602
    assert field in error["message"]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"command": "echo a\x00b"}, ["command", "NUL"]),
        ({"command": "echo \ud800"}, ["command", "surrogate"]),
        ({"command": "true", "env": {"A=B": "1"}}, ["env", "A=B"]),
        ({"command": "true", "env": {"": "1"}}, ["env"]),
        ({"command": "true", "env": {"A": "x\x00y"}}, ["env.A", "NUL"]),
        ({"command": "true", "timeoutMs": -5}, ["timeoutMs"]),
        ({"command": ""}, ["command", "empty"]),
        ({"command": " \t\n"}, ["command", "blank"]),
    ],
)
async def test_invalid_run_input_is_refused_and_changes_nothing(
    server: StdioServer, tmp_path: Path, params: dict[str, Any], words: list[str]
) -> None:
    task = f"inv{time.monotonic_ns()}"
    terminal = await server.call("terminal/acquire", {"cwd": str(tmp_path), "taskId": task})
    error = await server.error("terminal/run", {"terminalId": terminal["id"], **params})
    assert error["code"] == -32602
    for word in words:
        assert word in error["message"]
    # The terminal was never claimed: it is idle and runs the next command.
    assert (await server.call("terminal/get", {"terminalId": terminal["id"]}))["busy"] is False
    result = await server.call("terminal/run", {"terminalId": terminal["id"], "command": "echo ok"})
    assert (result["exitCode"], result["output"]) == (0, "ok\n")
    details = await server.call("environment/details", {"taskId": task})
    assert "Actively Running" not in details["markdown"]


async def test_socket_path_that_is_a_regular_file_is_not_deleted(tmp_path: Path) -> None:
    directory = tmp_path / "d"
    directory.mkdir(mode=0o700)
    victim = directory / "notes.txt"
    victim.write_text("keep me")
    process = await asyncio.create_subprocess_exec(
        *SERVER,
        "--socket",
        str(victim),
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:  # it served on the path: end it
            process.kill()
            await process.wait()
    assert process.returncode == 2
    assert victim.read_text() == "keep me"
    assert b"not a socket" in stderr


async def _serve_stdio_between(stdin: Any, stdout: Any) -> tuple[int | None, bytes]:
    """The server on --stdio with the given stdin/stdout; its exit code and stderr."""
    process = await asyncio.create_subprocess_exec(
        *SERVER, "--stdio", stdin=stdin, stdout=stdout, stderr=asyncio.subprocess.PIPE
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:  # it hung: end it, and the test fails below
            process.kill()
            await process.wait()
    return process.returncode, stderr


async def test_stdio_from_and_to_regular_files_is_served(tmp_path: Path) -> None:
    # A recorded session replayed from a file, answers written to a file: neither can
    # be polled (epoll refuses regular files), which used to leave the server hung.
    requests = tmp_path / "requests"
    requests.write_bytes(
        b"".join(
            frame(json.dumps(message).encode())
            for message in (
                {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}},
                {"jsonrpc": "2.0", "method": "initialized", "params": {}},
                {"jsonrpc": "2.0", "id": 2, "method": "terminal/list", "params": {}},
                {"jsonrpc": "2.0", "id": 3, "method": "shutdown"},
                {"jsonrpc": "2.0", "method": "exit"},
            )
        )
    )
    answers = tmp_path / "answers"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        code, stderr = await _serve_stdio_between(stdin, stdout)
    assert code == 0, stderr
    written, ids = answers.read_bytes(), []
    rest = written
    while rest:
        header, _, rest = rest.partition(b"\r\n\r\n")
        length = int(header.split(b"Content-Length: ")[1].split(b"\r\n")[0])
        body, rest = rest[:length], rest[length:]
        ids.append(json.loads(body).get("id"))
    assert ids == [1, 2, 3], written


async def test_stdio_from_dev_null_ends_at_once(tmp_path: Path) -> None:
    # /dev/null is a character device epoll refuses (EPERM): its EOF still ends the server.
    with (tmp_path / "out").open("wb") as stdout:
        code, stderr = await _serve_stdio_between(asyncio.subprocess.DEVNULL, stdout)
    assert code == 0, stderr  # as when an editor's pipe closes
    assert b"Traceback" not in stderr


async def test_stdio_closed_is_a_clear_error(tmp_path: Path) -> None:
    # Started as ``serve --stdio <&-``: fd 0 closed before Python starts.
    process = await asyncio.create_subprocess_exec(
        *SERVER,
        "--stdio",
        stdin=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
        preexec_fn=lambda: os.close(0),
    )
    _, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 2
    assert b"stdin is not open" in stderr
    assert b"Traceback" not in stderr
