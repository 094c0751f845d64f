"""End to end: the real server process over stdio, every method, every error."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from registry.processes import tagged_processes

from .rpc import StdioServer, alive, frame, serving

FAST = {
    "killGraceMs": 500,
    "commandStartTimeoutMs": 2000,
    "noneQuietTimeoutMs": 300,
    "hotTimeoutMs": 300,
}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server() -> AsyncIterator[StdioServer]:
    """One warm server for the tests that do not need their own."""
    async with serving(FAST) as peer:
        yield peer


# -- lifecycle ------------------------------------------------------------------------


async def test_initialize_advertises_the_registry(fresh: StdioServer) -> None:
    result = await fresh.initialize({"hotTimeoutMs": 500, "someFutureSetting": True})
    experimental = result["capabilities"]["experimental"]["terminalRegistry"]
    assert experimental["version"] == 1
    assert experimental["providers"] == ["shell", "subprocess", "ssh", "container"]
    assert any(shell.endswith("bash") for shell in experimental["shells"])
    assert result["serverInfo"]["name"] == "terminal-registry"
    log = await fresh.notification("window/logMessage")
    assert "someFutureSetting" in log["message"]


async def test_bad_setting_type_is_named(fresh: StdioServer) -> None:
    reply = await fresh.response(
        fresh.request(
            "initialize", {"capabilities": {}, "initializationOptions": {"hotTimeoutMs": "x"}}
        )
    )
    assert reply["error"]["code"] == -32602
    assert "hotTimeoutMs" in reply["error"]["message"]


async def test_shutdown_closes_every_terminal_and_exit_ends_the_process(
    fresh: StdioServer, tmp_path: Path
) -> None:
    await fresh.initialize(FAST)
    await fresh.call("terminal/run", {"command": "sleep 300 &", "cwd": str(tmp_path)})
    started = await fresh.call(
        "terminal/run", {"command": "sleep 301", "cwd": str(tmp_path), "background": True}
    )
    assert started["state"] == "running"
    before = fresh.descendants()
    assert any("sleep" in p.name() for p in before)
    assert await fresh.stop() == 0
    assert alive(before) == []


async def test_exit_without_shutdown_exits_1(fresh: StdioServer) -> None:
    await fresh.initialize()
    fresh.notify("exit")
    assert await asyncio.wait_for(fresh.process.wait(), 30) == 1


async def test_stdin_closing_ends_the_server_and_its_processes(
    fresh: StdioServer, tmp_path: Path
) -> None:
    await fresh.initialize(FAST)
    await fresh.call(
        "terminal/run", {"command": "sleep 302", "cwd": str(tmp_path), "background": True}
    )
    before = fresh.descendants()
    assert before
    assert fresh.process.stdin is not None
    fresh.process.stdin.close()
    await asyncio.wait_for(fresh.process.wait(), 30)
    assert alive(before) == []


async def test_requests_after_shutdown_are_answered(fresh: StdioServer) -> None:
    await fresh.initialize()
    await fresh.call("shutdown")
    error = await fresh.error("terminal/list", {})
    assert error["code"] == -32600
    assert "shutting down" in error["message"]


async def test_client_killed_means_server_gone_and_nothing_left(tmp_path: Path) -> None:
    """A client that dies without a word: the server notices, ends, leaves nothing."""
    tag = f"killed-client-{os.getpid()}-{id(tmp_path)}"
    script = tmp_path / "client.py"
    script.write_text(
        "import asyncio, os, sys\n"
        "from protocol.client import RegistryClient\n"
        "async def main():\n"
        "    c = await RegistryClient.spawn()\n"
        "    ready = asyncio.Event()\n"
        "    c.on('terminal/didWrite', lambda p: 'ready' in p['data'] and ready.set())\n"
        f"    await c.run('echo ready; TR_TEST_TAG={tag} sleep 303', cwd={str(tmp_path)!r},"
        " background=True)\n"
        "    await ready.wait()\n"
        "    print(c._client._server.pid, flush=True)\n"
        "    await asyncio.Event().wait()\n"
        "asyncio.run(main())\n"
    )
    client = await asyncio.create_subprocess_exec(
        sys.executable, str(script), stdout=asyncio.subprocess.PIPE, cwd=os.getcwd()
    )
    assert client.stdout is not None
    try:
        server_pid = int(await asyncio.wait_for(client.stdout.readline(), 60))
        server = psutil.Process(server_pid)
        tree = [server, *server.children(recursive=True)]
        assert any(p.name() == "bash" for p in tree)
    finally:
        client.send_signal(signal.SIGKILL)
        await client.wait()
    await asyncio.to_thread(psutil.wait_procs, tree, 30)
    assert alive(tree) == []
    # Found by a tag of this test's own, never by name across the machine.
    assert tagged_processes("TR_TEST_TAG", tag) == []


# -- methods ------------------------------------------------------------------------------


async def test_run_acquire_get_list_output(server: StdioServer, tmp_path: Path) -> None:
    terminal = await server.call("terminal/acquire", {"cwd": str(tmp_path), "taskId": "m1"})
    assert terminal["taskId"] == "m1"
    assert terminal["cwd"] == str(tmp_path)
    assert terminal["provider"] == "shell"
    assert set(terminal) >= {"id", "busy", "hot", "shellIntegration", "shell", "pid", "lastCommand"}
    sub = tmp_path / "sub"
    sub.mkdir()
    result = await server.call(
        "terminal/run", {"command": "cd sub; echo hello; (exit 3)", "terminalId": terminal["id"]}
    )
    assert result["exitCode"] == 3
    assert result["signal"] is None
    assert result["output"] == "hello\n"
    assert result["cwd"] == str(sub)
    assert result["state"] == "completed"
    assert result["truncated"] is False
    assert isinstance(result["durationMs"], int)
    got = await server.call("terminal/get", {"terminalId": terminal["id"]})
    assert got["cwd"] == str(sub)
    assert got["lastCommand"] == "cd sub; echo hello; (exit 3)"
    listed = await server.call("terminal/list", {"taskId": "m1"})
    assert [t["id"] for t in listed] == [terminal["id"]]
    # A foreground run's output was in its result: not news.
    assert (await server.call("terminal/output", {"terminalId": terminal["id"]})) == {"output": ""}
    reused = await server.call("terminal/acquire", {"cwd": str(sub), "taskId": "m1"})
    assert reused["id"] == terminal["id"]


async def test_run_reports_signals_and_subprocess_streams(
    server: StdioServer, tmp_path: Path
) -> None:
    result = await server.call(
        "terminal/run", {"command": "kill -TERM $$", "cwd": str(tmp_path), "provider": "subprocess"}
    )
    assert result["exitCode"] == 143
    assert result["signal"] == "SIGTERM"
    result = await server.call(
        "terminal/run",
        {"command": "echo o; echo e >&2", "cwd": str(tmp_path), "provider": "subprocess"},
    )
    assert result["stdout"] == "o\n"
    assert result["stderr"] == "e\n"
    assert "stdout" not in await server.call(
        "terminal/run", {"command": "true", "cwd": str(tmp_path)}
    )


async def test_background_run_then_output_and_environment_details(
    server: StdioServer, tmp_path: Path
) -> None:
    started = await server.call(
        "terminal/run",
        {
            "command": "echo one; sleep 0.5; echo two",
            "cwd": str(tmp_path),
            "taskId": "bg",
            "background": True,
        },
    )
    assert started["state"] == "running"
    assert started["exitCode"] is None
    await server.notification("terminal/didEndRun", runId=started["runId"])
    details = await server.call("environment/details", {"taskId": "bg", "cooldownTimeoutMs": 0})
    assert (
        "Command: `echo one; sleep 0.5; echo two` (exit code 0)\n```\none\ntwo"
        in details["markdown"]
    )
    assert "bg" in [t["taskId"] for t in details["terminals"]]
    again = await server.call("environment/details", {"taskId": "bg", "cooldownTimeoutMs": 0})
    assert again["markdown"] == ""


async def test_write_answers_a_prompt_and_replay_repaints(
    server: StdioServer, tmp_path: Path
) -> None:
    started = await server.call(
        "terminal/run",
        {"command": "read x; echo got:$x", "cwd": str(tmp_path), "background": True},
    )
    terminal_id = started["terminalId"]
    assert await server.call("terminal/write", {"terminalId": terminal_id, "data": "yes\r"}) is None
    await server.notification("terminal/didEndRun", runId=started["runId"])
    output = await server.call("terminal/output", {"terminalId": terminal_id})
    assert output["output"].endswith("got:yes")
    replay = await server.call("terminal/replay", {"terminalId": terminal_id, "maxBytes": 4096})
    assert "got:yes" in replay["data"]
    assert "\x1b" in replay["data"]  # escape sequences kept for a mirror


async def test_resize(server: StdioServer, tmp_path: Path) -> None:
    terminal = await server.call("terminal/acquire", {"cwd": str(tmp_path), "taskId": "rs"})
    await server.call("terminal/resize", {"terminalId": terminal["id"], "cols": 90, "rows": 20})
    result = await server.call(
        "terminal/run", {"command": "stty size", "terminalId": terminal["id"]}
    )
    assert result["output"] == "20 90\n"


async def test_kill_and_close(server: StdioServer, tmp_path: Path) -> None:
    started = await server.call(
        "terminal/run", {"command": "sleep 100", "cwd": str(tmp_path), "background": True}
    )
    terminal_id = started["terminalId"]
    assert await server.call("terminal/kill", {"terminalId": terminal_id}) is None
    ended = await server.notification("terminal/didEndRun", runId=started["runId"])
    assert ended["state"] == "cancelled"
    assert await server.call("terminal/close", {"terminalId": terminal_id}) is None
    await server.notification("terminal/didClose", terminalId=terminal_id)
    error = await server.error("terminal/get", {"terminalId": terminal_id})
    assert error["code"] == -32001


async def test_kill_naming_a_run_kills_only_that_run(server: StdioServer, tmp_path: Path) -> None:
    first = await server.call(
        "terminal/run", {"command": "true", "cwd": str(tmp_path), "taskId": "kill-run"}
    )
    terminal_id = first["terminalId"]
    started = await server.call(
        "terminal/run", {"command": "sleep 100", "terminalId": terminal_id, "background": True}
    )
    # A run that already ended: whatever runs now is not what was meant -- left alone.
    assert (
        await server.call("terminal/kill", {"terminalId": terminal_id, "runId": first["runId"]})
        is None
    )
    got = await server.call("terminal/get", {"terminalId": terminal_id})
    assert got["busy"], "the sleep was killed for a run that had ended"
    other = await server.call("terminal/run", {"command": "true", "cwd": str(tmp_path)})
    assert other["terminalId"] != terminal_id
    foreign = {"terminalId": terminal_id, "runId": other["runId"]}
    error = await server.error("terminal/kill", foreign)
    assert error["code"] == -32602
    assert f"run {other['runId']} is not a run of terminal {terminal_id}" in error["message"]
    # The run that is running: killed.
    assert (
        await server.call("terminal/kill", {"terminalId": terminal_id, "runId": started["runId"]})
        is None
    )
    ended = await server.notification("terminal/didEndRun", runId=started["runId"])
    assert ended["state"] == "cancelled"


async def test_release_unbinds(server: StdioServer, tmp_path: Path) -> None:
    terminal = await server.call("terminal/acquire", {"cwd": str(tmp_path), "taskId": "rel"})
    assert await server.call("terminal/release", {"taskId": "rel"}) is None
    got = await server.call("terminal/get", {"terminalId": terminal["id"]})
    assert got["taskId"] is None


async def test_timeout_ms(server: StdioServer, tmp_path: Path) -> None:
    result = await server.call(
        "terminal/run", {"command": "sleep 100", "cwd": str(tmp_path), "timeoutMs": 500}
    )
    assert result["state"] == "timedOut"
    assert result["exitCode"] == 130
    assert result["signal"] == "SIGINT"


async def test_cancel_request_interrupts_the_command(server: StdioServer, tmp_path: Path) -> None:
    msg_id = server.request("terminal/run", {"command": "sleep 110", "cwd": str(tmp_path)})
    started = await server.notification("terminal/didStartRun", commandLine="sleep 110")
    server.notify("$/cancelRequest", {"id": msg_id})
    reply = await server.response(msg_id)
    assert reply["error"]["code"] == -32800
    ended = await server.notification("terminal/didEndRun", runId=started["runId"])
    assert ended["state"] == "cancelled"
    sleepers = [p for p in alive(_server_tree(server)) if p.cmdline() == ["sleep", "110"]]
    assert sleepers == []


def _server_tree(server: StdioServer) -> list[psutil.Process]:
    return server.descendants()


async def test_progress_reports(server: StdioServer, tmp_path: Path) -> None:
    result = await server.call(
        "terminal/run",
        {
            "command": "echo step one; sleep 1.5; echo step two",
            "cwd": str(tmp_path),
            "workDoneToken": "tok-1",
        },
    )
    assert result["exitCode"] == 0
    values = [
        n["params"]["value"]
        for n in server.notifications
        if n["method"] == "$/progress" and n["params"]["token"] == "tok-1"
    ]
    assert values[0]["kind"] == "begin"
    assert values[0]["message"] == "echo step one; sleep 1.5; echo step two"
    assert any(v["kind"] == "report" and "step one" in v["message"] for v in values)
    assert values[-1] == {"kind": "end", "message": "exit code 0"}


async def test_notifications_follow_a_run(server: StdioServer, tmp_path: Path) -> None:
    result = await server.call(
        "terminal/run", {"command": "seq 1 2000", "cwd": str(tmp_path), "taskId": "notes"}
    )
    terminal_id = result["terminalId"]
    run_id = result["runId"]
    await server.notification("terminal/didStartRun", runId=run_id, commandLine="seq 1 2000")
    writes = [
        n["params"]
        for n in server.notifications
        if n["method"] == "terminal/didWrite" and n["params"].get("runId") == run_id
    ]
    text = "".join(w["data"] for w in writes)
    assert text == "".join(f"{i}\r\n" for i in range(1, 2001))  # nothing dropped
    assert len(writes) < 50  # coalesced, not one per read
    end = await server.notification("terminal/didEndRun", runId=run_id)
    assert end == {"terminalId": terminal_id, "runId": run_id, "state": "completed", "exitCode": 0}
    await server.notification("terminal/didChange", id=terminal_id, busy=False)


async def test_request_without_params_is_answered(server: StdioServer) -> None:
    reply = await server.response(server.request("terminal/list", with_params=False))
    assert isinstance(reply["result"], list)
    reply = await server.response(server.request("terminal/get", with_params=False))
    assert reply["error"]["code"] == -32602
    assert "terminalId" in reply["error"]["message"]


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "code", "words"),
    [
        ("terminal/get", {"terminalId": 9999}, -32001, "9999"),
        ("terminal/run", {"command": 5, "cwd": "/tmp"}, -32602, "command"),
        ("terminal/run", {"command": "ls", "cwd": "/tmp", "timeoutMs": "5"}, -32602, "timeoutMs"),
        ("terminal/run", {"command": "ls", "cwd": "/no/such/dir"}, -32602, "/no/such/dir"),
        ("terminal/run", {"command": "ls"}, -32602, "cwd"),
        ("terminal/acquire", {"cwd": "/etc/hostname"}, -32602, "not a directory"),
        ("terminal/acquire", {"cwd": "/tmp", "provider": "telnet"}, -32602, "telnet"),
        ("terminal/resize", {"terminalId": 1, "cols": 0, "rows": 5}, -32602, "positive"),
        ("terminal/list", [1, 2], -32602, "object"),
        ("no/such/method", {}, -32601, "no/such/method"),
    ],
)
async def test_errors_name_what_was_wrong(
    server: StdioServer, method: str, params: object, code: int, words: str
) -> None:
    if method == "terminal/resize":
        terminal = await server.call("terminal/acquire", {"cwd": "/tmp", "taskId": "err"})
        params = {**params, "terminalId": terminal["id"]}  # type: ignore[dict-item]
    error = await server.error(method, params)
    assert error["code"] == code
    assert words in error["message"]
    assert "traceback" not in str(error.get("data", ""))


async def test_busy_terminal(server: StdioServer, tmp_path: Path) -> None:
    started = await server.call(
        "terminal/run", {"command": "sleep 100", "cwd": str(tmp_path), "background": True}
    )
    error = await server.error(
        "terminal/run", {"command": "true", "terminalId": started["terminalId"]}
    )
    assert error["code"] == -32002
    await server.call("terminal/kill", {"terminalId": started["terminalId"]})


async def test_spawn_failure(fresh: StdioServer, tmp_path: Path) -> None:
    await fresh.initialize({"defaultShell": "/no/such/shell"})
    error = await fresh.error("terminal/acquire", {"cwd": str(tmp_path)})
    assert error["code"] == -32003
    assert "/no/such/shell" in error["message"]


RAW_BAD_INPUT = [
    pytest.param(frame(b"{not json"), -32700, id="malformed-json"),
    pytest.param(frame(b"[1, 2]"), -32600, id="batch"),
    pytest.param(frame(b'"just a string"'), -32600, id="not-an-object"),
    pytest.param(frame(b'{"jsonrpc": "1.0", "id": 77, "method": "x"}'), -32600, id="bad-version"),
    pytest.param(b"Content-Type: text/plain\r\n\r\n{}", -32700, id="missing-content-length"),
    pytest.param(b'Content-Length: 2\r\n\r\n{"jsonrpc": 1}', -32700, id="length-too-short"),
    pytest.param(b"garbage line\r\n", -32700, id="garbage"),
    pytest.param(b"Content-Length: x\r\n\r\n", -32700, id="non-numeric-length"),
]


@pytest.mark.parametrize(("raw", "code"), RAW_BAD_INPUT)
async def test_bad_bytes_are_answered_and_the_server_keeps_serving(
    server: StdioServer, raw: bytes, code: int
) -> None:
    server.send_raw(raw)
    # Resynchronised: the next well-formed request is answered; before its answer
    # come the errors for the bad bytes (a truncated body may give two: the body
    # that is not JSON, then the rest of it that is not a header).
    msg_id = server.request("terminal/list", {})
    errors = []
    while True:
        message = await server._next()
        if message.get("id") == msg_id:
            assert isinstance(message["result"], list)
            break
        if "error" in message:
            errors.append(message)
        else:
            server.notifications.append(message)
    assert errors, "the bad bytes got no answer"
    assert errors[0]["error"]["code"] == code
    assert all(e.get("id") in (None, 77) for e in errors)


async def test_length_too_long_does_not_swallow_the_next_message(server: StdioServer) -> None:
    body = b'{"jsonrpc": "2.0", "id": 4242, "method": "terminal/list", "params": {}}'
    server.send_raw(b"Content-Length: 500\r\n\r\n" + body)
    msg_id = server.request("terminal/list", {})
    first = await server.response(4242)
    assert isinstance(first["result"], list)
    assert "result" in await server.response(msg_id)


async def test_lowercase_header_and_lf_line_ends_are_accepted(server: StdioServer) -> None:
    body = b'{"jsonrpc": "2.0", "id": 4343, "method": "terminal/list"}'
    server.send_raw(b"content-length: %d\n\n" % len(body) + body)
    assert isinstance((await server.response(4343))["result"], list)


async def test_params_keys_are_kept_as_sent(server: StdioServer, tmp_path: Path) -> None:
    # pygls would turn params into namedtuples, renaming keys that are not
    # identifiers; ours stay a dict, so the bad key is seen and named.
    error = await server.error(
        "terminal/run", {"command": "true", "cwd": str(tmp_path), "env": {"NOT-AN-ID": "x"}}
    )
    assert error["code"] == -32602
    assert "NOT-AN-ID" in error["message"]
    result = await server.call(
        "terminal/run",
        {"command": 'echo "$GOOD_NAME"', "cwd": str(tmp_path), "env": {"GOOD_NAME": "kept"}},
    )
    assert result["output"] == "kept\n"


async def test_stdout_of_the_server_is_not_the_protocol_stream(server: StdioServer) -> None:
    # A stray print (or a child inheriting fd 1) must not corrupt the stream: fd 1
    # of the server process now points where stderr does, and fd 0 at /dev/null.
    pid = server.process.pid
    assert os.readlink(f"/proc/{pid}/fd/1") == os.readlink(f"/proc/{pid}/fd/2")
    assert os.readlink(f"/proc/{pid}/fd/0") == "/dev/null"


async def test_work_done_progress_cancel_interrupts_the_run(
    server: StdioServer, tmp_path: Path
) -> None:
    msg_id = server.request(
        "terminal/run",
        {"command": "sleep 120", "cwd": str(tmp_path), "workDoneToken": "tok-cancel"},
    )
    await server.notification("$/progress", token="tok-cancel")
    server.notify("window/workDoneProgress/cancel", {"token": "tok-cancel"})
    reply = await server.response(msg_id)
    assert reply["result"]["state"] == "cancelled"
    assert reply["result"]["signal"] == "SIGINT"


@pytest.mark.parametrize("provider", ["subprocess", "shell"])
async def test_cancel_while_the_terminal_is_spawning(
    fresh: StdioServer, tmp_path: Path, provider: str
) -> None:
    """The cancel lands while the run is being set up: every request is answered, no
    terminal stays busy and nothing keeps running (24 tries each)."""
    await fresh.initialize()
    terminal = await fresh.call(
        "terminal/acquire", {"cwd": str(tmp_path), "provider": provider, "taskId": "spawn"}
    )
    for attempt in range(24):
        msg_id = fresh.request(
            "terminal/run",
            {"command": f"sleep 12{attempt:02d}", "terminalId": terminal["id"]},
        )
        fresh.notify("$/cancelRequest", {"id": msg_id})
        reply = await fresh.response(msg_id)
        assert "error" in reply or reply["result"]["state"] == "cancelled", reply
        # Not busy: the next command runs on the same terminal.
        after = await fresh.call(
            "terminal/run", {"command": "echo free", "terminalId": terminal["id"]}
        )
        assert after["output"] == "free\n"
    sleepers = [p for p in alive(fresh.descendants()) if p.name() == "sleep"]
    assert sleepers == []
