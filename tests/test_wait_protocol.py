"""Commands that wait, over the wire: the real server process on stdio, spoken to as
JSON-RPC, and the Python client against it.

The answer loop of docs/waiting.md: ``terminal/run`` with ``yieldOnInput`` answers
when the command asks, ``terminal/write`` answers it, ``terminal/wait`` returns at
the end (or the next question); ``terminal/sendKeys`` leaves full-screen programs.
Every state is awaited as a response or a notification, never slept for.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from protocol.client import InvalidParamsError, RegistryClient

from .rpc import StdioServer, serving

FAST = {"killGraceMs": 500, "commandStartTimeoutMs": 2000, "hotTimeoutMs": 300}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server() -> AsyncIterator[StdioServer]:
    async with serving(FAST) as peer:
        yield peer


async def test_the_answer_loop(server: StdioServer, tmp_path: Path) -> None:
    asked = await server.call(
        "terminal/run",
        {
            "command": "read -p 'go? ' x; echo \"got $x\"",
            "cwd": str(tmp_path),
            "taskId": "loop",
            "yieldOnInput": True,
        },
    )
    assert asked["state"] == "running"
    assert asked["exitCode"] is None
    assert asked["waitingFor"] == {
        "kind": "input",
        "prompt": "go? ",
        "program": "bash",
        "certainty": "certain",
    }
    assert asked["output"] == "go? "
    terminal_id = asked["terminalId"]
    # Everyone hears it: a didChange with the state and what it waits for.
    change = await server.notification(
        "terminal/didChange", id=terminal_id, state="waitingForInput"
    )
    assert change["waitingFor"]["prompt"] == "go? "
    assert change["busy"] is True
    (listed,) = await server.call("terminal/list", {"taskId": "loop"})
    assert listed["state"] == "waitingForInput"
    details = await server.call("environment/details", {"taskId": "loop", "peek": True})
    assert "### State: waiting for input: `go? `" in details["markdown"]
    await server.call("terminal/write", {"terminalId": terminal_id, "data": "yes\r"})
    done = await server.call("terminal/wait", {"runId": asked["runId"]})
    assert done["state"] == "completed"
    assert done["exitCode"] == 0
    assert "got yes" in done["output"]
    assert "waitingFor" not in done
    idle = await server.call("terminal/get", {"terminalId": terminal_id})
    assert (idle["state"], idle.get("waitingFor")) == ("idle", None)


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
async def test_less_is_quit_with_send_keys(server: StdioServer, tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("\n".join(f"line {n}" for n in range(500)))
    opened = await server.call(
        "terminal/run", {"command": "less long.txt", "cwd": str(tmp_path), "yieldOnInput": True}
    )
    assert opened["waitingFor"]["kind"] == "fullScreen"
    assert opened["waitingFor"]["program"] == "less"
    assert opened["waitingFor"]["keys"] == ["q"]
    assert opened["waitingFor"]["prompt"] is None
    terminal_id = opened["terminalId"]
    await server.call(
        "terminal/sendKeys", {"terminalId": terminal_id, "keys": opened["waitingFor"]["keys"]}
    )
    done = await server.call("terminal/wait", {"terminalId": terminal_id})
    assert (done["runId"], done["state"], done["exitCode"]) == (opened["runId"], "completed", 0)


async def test_wait_times_out_and_the_command_goes_on(server: StdioServer, tmp_path: Path) -> None:
    started = await server.call(
        "terminal/run", {"command": "sleep 30", "cwd": str(tmp_path), "background": True}
    )
    still = await server.call("terminal/wait", {"runId": started["runId"], "timeoutMs": 300})
    assert still["state"] == "running"
    assert "waitingFor" not in still  # sleep waits for no one
    await server.call("terminal/kill", {"terminalId": started["terminalId"]})
    ended = await server.call("terminal/wait", {"runId": started["runId"]})
    assert ended["state"] == "cancelled"


async def test_bad_requests_name_what_is_wrong(server: StdioServer, tmp_path: Path) -> None:
    cat = await server.call(
        "terminal/run", {"command": "cat", "cwd": str(tmp_path), "yieldOnInput": True}
    )
    terminal_id = cat["terminalId"]
    assert cat["waitingFor"]["program"] == "cat"
    cases = [
        ({"terminalId": terminal_id, "keys": ["C-d", "Entr"]}, "keys[1]: unknown key 'Entr'"),
        ({"terminalId": terminal_id, "keys": "q"}, "keys must be an array, got a string"),
        ({"terminalId": terminal_id, "keys": [1]}, "keys[0] must be a string"),
        ({"terminalId": terminal_id}, "missing required field 'keys'"),
    ]
    for params, message in cases:
        error = await server.error("terminal/sendKeys", params)
        assert error["code"] == -32602
        assert message in error["message"]
    for params, message in [
        ({}, "needs a runId or a terminalId"),
        ({"runId": cat["runId"], "terminalId": terminal_id}, "needs a runId or a terminalId"),
        ({"runId": 987654}, "unknown run 987654"),
        ({"runId": cat["runId"], "timeoutMs": -1}, "timeoutMs must be not negative"),
    ]:
        error = await server.error("terminal/wait", params)
        assert (error["code"], message in error["message"]) == (-32602, True), error
    # Nothing was sent by the refused requests: cat still waits, and C-d ends it.
    await server.call("terminal/sendKeys", {"terminalId": terminal_id, "keys": ["C-d"]})
    done = await server.call("terminal/wait", {"runId": cat["runId"]})
    assert (done["state"], done["exitCode"], done["output"]) == ("completed", 0, "")
    sub = await server.call(
        "terminal/run", {"command": "true", "cwd": str(tmp_path), "provider": "subprocess"}
    )
    error = await server.error(
        "terminal/sendKeys", {"terminalId": sub["terminalId"], "keys": ["q"]}
    )
    assert error["code"] == -32002
    assert "no stdin" in error["message"]


async def test_the_python_client_answers_a_password_prompt(tmp_path: Path) -> None:
    script = tmp_path / "ask.py"
    script.write_text(
        "import getpass\n"
        "name = input('name: ')\n"
        "secret = getpass.getpass('password: ')\n"
        "print(f'{name} has a {len(secret)}-letter password')\n"
    )
    async with await RegistryClient.spawn(FAST) as client:
        result = await client.run(
            f"python3 {script}", cwd=str(tmp_path), yield_on_input=True, timeout=60
        )
        answers = {"input": "ada\r", "password": "hunter2\r"}
        kinds = []
        while result.waiting_for is not None:
            kinds.append((result.waiting_for.kind, result.waiting_for.prompt))
            await client.write(result.terminal_id, answers[result.waiting_for.kind])
            result = await client.wait(run_id=result.run_id)
        assert kinds == [("input", "name: "), ("password", "password: ")]
        assert result.state == "completed"
        assert "ada has a 7-letter password" in result.output
        assert "hunter2" not in result.output  # echo was off
        with pytest.raises(InvalidParamsError, match="unknown key"):
            await client.send_keys(result.terminal_id, ["F13"])
