"""``terminal-registry mcp`` driven over stdio by the MCP SDK's own client.

Every MCP server here runs as a real process started by the SDK's ``stdio_client``; the
registry behind it is a real background server on a private socket (its directory is a
temporary ``XDG_RUNTIME_DIR``, so the per-user default is never touched), started by
the first MCP session exactly as the CLI starts it.  A JSON-RPC client of ours on the
same socket checks what the MCP sessions did and waits for events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import psutil
import pytest
import pytest_asyncio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import CallToolResult, Implementation, Tool

from protocol import daemon, methods
from protocol.client import RegistryClient

from .rpc import alive

pytestmark = pytest.mark.timeout(180)

MCP = [sys.executable, "-m", "protocol.cli", "mcp"]
AGENT = Path(__file__).parent / "fixtures" / "mcp_agent.py"
TOOLS = {
    "run_command",
    "wait_for_command",
    "write_input",
    "send_keys",
    "read_output",
    "list_terminals",
    "kill_command",
    "close_terminal",
    "environment_details",
}
#: Bound on any one wait in these tests (a loaded 2-core machine starts shells slowly).
WAIT = 60.0


class Agent:
    """An MCP session: ``terminal-registry mcp ARGS`` under the SDK's ClientSession.

    The SDK's transports are anyio scopes, which must be left in the task that entered
    them; a task of its own holds them for as long as the agent lives.
    """

    def __init__(self, name: str, env: dict[str, str], *args: str) -> None:
        self.name = name
        self._params = StdioServerParameters(command=MCP[0], args=[*MCP[1:], *args], env=env)
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.session: ClientSession
        self.instructions: str | None = None
        self.tools: dict[str, Tool] = {}

    async def start(self) -> Agent:
        self._task = asyncio.create_task(self._hold())
        done, _ = await asyncio.wait(
            [self._task, asyncio.ensure_future(self._ready.wait())],
            timeout=WAIT,
            return_when=asyncio.FIRST_COMPLETED,
        )
        if self._task in done:
            self._task.result()  # raises what went wrong
        assert self._ready.is_set(), f"{self.name} did not start"
        return self

    async def _hold(self) -> None:
        info = Implementation(name=self.name, version="1")
        async with (
            stdio_client(self._params) as (read, write),
            ClientSession(read, write, client_info=info) as session,
        ):
            self.session = session
            self.instructions = (await session.initialize()).instructions
            self.tools = {tool.name: tool for tool in (await session.list_tools()).tools}
            self._ready.set()
            await self._stop.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            await asyncio.wait_for(self._task, WAIT)

    async def call(self, tool: str, arguments: dict[str, Any], **kwargs: Any) -> CallToolResult:
        """Call a tool; a successful result must match the tool's output schema."""
        with anyio.fail_after(WAIT):
            result = await self.session.call_tool(tool, arguments, **kwargs)
        if not result.is_error and tool in self.tools:
            schema = self.tools[tool].output_schema
            assert schema is not None
            jsonschema.validate(result.structured_content, schema)
        return result

    async def ok(self, tool: str, **arguments: Any) -> dict[str, Any]:
        """The structured result of a call that must succeed (its text checked too)."""
        result = await self.call(tool, arguments)
        assert not result.is_error, _text(result)
        assert _text(result)
        assert result.structured_content is not None
        return dict(result.structured_content)


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


# -- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A private XDG_RUNTIME_DIR (so a private default socket) and an empty HOME."""
    root = tmp_path_factory.mktemp("mcp")
    runtime = root / "xdg"
    runtime.mkdir(mode=0o700)
    home = root / "home"
    home.mkdir()
    environ = {k: v for k, v in os.environ.items() if k != daemon.SOCKET_VARIABLE}
    bash = shutil.which("bash")
    assert bash is not None
    environ.update(XDG_RUNTIME_DIR=str(runtime), HOME=str(home), ZDOTDIR=str(home), SHELL=bash)
    return environ


@pytest.fixture(scope="module")
def socket_path(env: dict[str, str]) -> str:
    return os.path.join(env["XDG_RUNTIME_DIR"], "terminal-registry", "server.sock")


@pytest_asyncio.fixture(scope="module")
async def agent(env: dict[str, str], socket_path: str) -> AsyncIterator[Agent]:
    """The main session; by default it starts the per-user background server."""
    first = await Agent("test-agent", env).start()
    yield first
    await first.stop()
    with contextlib.suppress(daemon.BackgroundServerError):
        await asyncio.to_thread(daemon.stop_server, socket_path)


@pytest.fixture(scope="module")
def quick_cwd(env: dict[str, str]) -> str:
    path = os.path.join(env["HOME"], "quick-project")
    os.mkdir(path)
    return path


@pytest_asyncio.fixture(scope="module")
async def quick(
    agent: Agent, env: dict[str, str], socket_path: str, quick_cwd: str
) -> AsyncIterator[Agent]:
    """A second session on the same server whose calls wait at most 1 s, and whose
    commands start in ``quick_cwd`` (--cwd)."""
    args = ("--socket", socket_path, "--call-timeout", "1", "--cwd", quick_cwd)
    second = await Agent("quick-agent", env, *args).start()
    yield second
    await second.stop()


@pytest_asyncio.fixture
async def rpc(agent: Agent, socket_path: str) -> AsyncIterator[RegistryClient]:
    """Our JSON-RPC client on the MCP sessions' server."""
    client = await RegistryClient.connect(socket_path)
    yield client
    await client.close()


class Output:
    """What our JSON-RPC client saw each terminal print (didWrite), to wait on."""

    def __init__(self, client: RegistryClient) -> None:
        self._text: dict[int, str] = {}
        self._changed = asyncio.Event()
        client.on(methods.DID_WRITE, self._write)

    def text(self, terminal_id: int) -> str:
        return self._text.get(terminal_id, "")

    def _write(self, params: dict[str, Any]) -> None:
        self._text[params["terminalId"]] = self._text.get(params["terminalId"], "") + params["data"]
        self._changed.set()

    async def printed(self, terminal_id: int, text: str) -> None:
        """Until the terminal has printed ``text``: then a command reading its input is
        past its shell's line editor, and keys sent now reach the command."""
        async with asyncio.timeout(WAIT):
            while text not in self._text.get(terminal_id, ""):
                self._changed.clear()
                await self._changed.wait()


@pytest_asyncio.fixture
async def output(rpc: RegistryClient) -> Output:
    return Output(rpc)


def _until_gone(procs: list[psutil.Process]) -> list[psutil.Process]:
    """Wait (at most WAIT) for processes to end; those still running (zombies count as
    ended: an orphan's is reaped by whoever adopted it, in its own time)."""
    remaining = alive(procs)
    deadline = time.monotonic() + WAIT
    while remaining and time.monotonic() < deadline:
        psutil.wait_procs(remaining, timeout=0.2)
        remaining = alive(remaining)
    return remaining


# -- tools and schemas ---------------------------------------------------------------------------


async def test_tools_have_schemas_a_model_can_use(agent: Agent) -> None:
    assert set(agent.tools) == TOOLS
    for tool in agent.tools.values():
        assert tool.description is not None
        assert len(tool.description) > 80, tool.name
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.output_schema is not None
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        for name, spec in tool.input_schema["properties"].items():
            assert spec.get("description"), f"{tool.name}.{name} has no description"
    assert agent.tools["run_command"].input_schema["required"] == ["command"]
    assert agent.instructions is not None
    assert "task" in agent.instructions
    assert "cwd" in agent.instructions


# -- running --------------------------------------------------------------------------------------


async def test_run_reuses_by_cwd_with_exact_exit_codes(agent: Agent, tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    first = await agent.ok("run_command", command="cd sub && pwd", cwd=str(tmp_path))
    assert (first["state"], first["exit_code"]) == ("completed", 0)
    assert first["cwd"] == str(tmp_path / "sub")
    assert first["output"].strip() == str(tmp_path / "sub")
    assert first["task_id"].startswith("test-agent-")
    # No cwd: the same terminal, where the `cd` left it.
    failed = await agent.ok("run_command", command="pwd; (exit 3)")
    assert failed["terminal_id"] == first["terminal_id"]
    assert (failed["state"], failed["exit_code"]) == ("completed", 3)
    assert failed["output"].strip() == str(tmp_path / "sub")
    signalled = await agent.call("run_command", {"command": "bash -c 'kill -TERM $$'"})
    assert signalled.structured_content is not None
    assert signalled.structured_content["exit_code"] == 143
    assert signalled.structured_content["signal"] == "SIGTERM"
    assert _text(signalled).startswith("exit code 143 (SIGTERM) · completed in ")
    # Another cwd: another terminal; back to sub/: the first one again.
    elsewhere = await agent.ok("run_command", command="true", cwd=str(tmp_path))
    assert elsewhere["terminal_id"] != first["terminal_id"]
    again = await agent.ok("run_command", command="true", cwd=str(tmp_path / "sub"))
    assert again["terminal_id"] == first["terminal_id"]


async def test_long_output_keeps_head_and_tail_and_names_the_whole(
    agent: Agent, tmp_path: Path
) -> None:
    result = await agent.call("run_command", {"command": "seq 1 200000", "cwd": str(tmp_path)})
    ended = result.structured_content
    assert ended is not None
    assert (ended["state"], ended["exit_code"]) == ("completed", 0)
    assert ended["output"].startswith("1\n2\n")
    assert ended["output"].endswith("199999\n200000")
    assert "omitted" in ended["output"]
    path = Path(ended["full_output_path"])
    assert path.read_text().split()[-1] == "200000"
    assert f"all of it is in {path}" in _text(result)


async def test_a_long_command_returns_at_the_bound_and_keeps_running(
    quick: Agent, output: Output, tmp_path: Path
) -> None:
    progress: list[str | None] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append(message)

    # `read` holds the command until the test answers: it outlives the 1 s bound
    # (the call does not return at the question: yield_on_input is off).
    result = await quick.call(
        "run_command",
        {
            "command": "echo first; read x; echo got $x",
            "cwd": str(tmp_path),
            "yield_on_input": False,
        },
        progress_callback=on_progress,
    )
    running = result.structured_content
    assert running is not None
    assert (running["state"], running["exit_code"]) == ("running", None)
    assert running["duration_seconds"] >= 1.0
    # It waits for input all the while: the text says so, and how to go on.
    assert running["waiting_for"]["kind"] == "input"
    assert f"wait_for_command with terminal_id {running['terminal_id']}" in _text(result)
    assert progress
    assert "echo first" in (progress[0] or "")
    terminal = running["terminal_id"]
    await output.printed(terminal, "first\r\n")
    await quick.ok("write_input", terminal_id=terminal, text="bob")
    ended = await quick.ok("wait_for_command", terminal_id=terminal)
    assert (ended["state"], ended["exit_code"]) == ("completed", 0)
    assert "got bob" in ended["output"]
    # Nothing lost, nothing twice: what the first call showed is not shown again.
    both = running["output"].split() + ended["output"].split()
    assert both.count("first") == 1


async def test_background_command_answered_with_write_input(
    agent: Agent, output: Output, tmp_path: Path
) -> None:
    command = "echo ready; read x; echo got $x"
    started = await agent.ok("run_command", command=command, cwd=str(tmp_path), background=True)
    assert started["state"] == "running"
    terminal = started["terminal_id"]
    await output.printed(terminal, "ready\r\n")
    waiting = await agent.ok("read_output", terminal_id=terminal)
    assert waiting["state"] == "running"
    assert waiting["output"].strip() == "ready"
    sent = await agent.ok("write_input", terminal_id=terminal, text="bob")
    assert sent["busy"] is True
    assert sent["sent"] == "bob\\r"
    ended = await agent.ok("wait_for_command", terminal_id=terminal)
    assert (ended["state"], ended["exit_code"]) == ("completed", 0)
    assert "got bob" in ended["output"]
    assert "ready" not in ended["output"]
    assert ended["command"] == command
    # Its output was handed over once.
    after = await agent.ok("read_output", terminal_id=terminal)
    assert after["output"] == ""
    assert after["state"] == "completed"


async def test_background_output_is_read_later_and_seen_over_json_rpc(
    agent: Agent, rpc: RegistryClient, tmp_path: Path
) -> None:
    ends: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    rpc.on(methods.DID_END_RUN, ends.put_nowait)
    started = await agent.ok(
        "run_command", command="echo bg-1; echo bg-2; (exit 4)", cwd=str(tmp_path), background=True
    )
    end = await asyncio.wait_for(ends.get(), WAIT)
    while end["runId"] != started["run_id"]:
        end = await asyncio.wait_for(ends.get(), WAIT)
    # The JSON-RPC client sees the MCP session's terminal, task and command.
    (seen,) = [t for t in await rpc.list() if t.id == started["terminal_id"]]
    assert seen.task_id == started["task_id"]
    assert seen.last_command == "echo bg-1; echo bg-2; (exit 4)"
    assert seen.cwd == str(tmp_path)
    read = await agent.ok("read_output", terminal_id=started["terminal_id"])
    assert read["output"].split() == ["bg-1", "bg-2"], (read, started)
    assert (read["state"], read["exit_code"]) == ("completed", 4)


async def test_cancelling_a_call_interrupts_its_command(
    agent: Agent, rpc: RegistryClient, tmp_path: Path
) -> None:
    progressed = anyio.Event()

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progressed.set()

    command = f"sleep 60 # {tmp_path.name}"
    async with anyio.create_task_group() as group:
        arguments = {"command": command, "cwd": str(tmp_path)}
        group.start_soon(
            partial(agent.call, "run_command", arguments, progress_callback=on_progress)
        )
        with anyio.fail_after(WAIT):
            await progressed.wait()  # the command runs
        group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
    (terminal,) = [t for t in await rpc.list() if t.last_command == command]
    ended = await agent.ok("wait_for_command", terminal_id=terminal.id)
    assert (ended["state"], ended["exit_code"], ended["signal"]) == ("cancelled", 130, "SIGINT")
    assert terminal.pid is not None
    assert psutil.Process(terminal.pid).children(recursive=True) == []


async def test_bad_input_is_a_tool_error_and_the_server_keeps_serving(
    agent: Agent, tmp_path: Path
) -> None:
    # A terminal of its own for the cases that need one (run alone, none exists yet).
    tid = (await agent.ok("run_command", command="true", cwd=str(tmp_path)))["terminal_id"]
    cases: list[tuple[str, dict[str, Any], str]] = [
        ("run_command", {"command": 5}, "command: must be a string"),
        ("run_command", {"command": ""}, "command: must not be empty"),
        ("run_command", {"command": "true", "cwd": str(tmp_path / "nope")}, "does not exist"),
        ("run_command", {"command": "true", "timeout_seconds": -1}, "must be greater than 0"),
        ("run_command", {"command": "true", "cwd": "/", "terminal_id": tid}, "not both"),
        ("wait_for_command", {"terminal_id": 99999}, "unknown terminal 99999"),
        ("write_input", {"terminal_id": 99999, "text": "y"}, "list_terminals"),
        ("send_keys", {"terminal_id": tid, "keys": []}, "keys: must have at least 1 item"),
        ("send_keys", {"terminal_id": tid, "keys": ["C-1"]}, "'1' has no control code"),
        ("send_keys", {"terminal_id": tid, "keys": ["q", "Entr"]}, "keys[1]: unknown key 'Entr'"),
        ("send_keys", {"terminal_id": tid, "keys": ["Entr"]}, "as text, use write_input"),
        ("close_terminal", {"terminal_id": "one"}, "terminal_id: must be an integer"),
        ("no_such_tool", {}, "Unknown tool"),
    ]
    for tool, arguments, expected in cases:
        result = await agent.call(tool, arguments)
        assert result.is_error, (tool, arguments)
        assert expected in _text(result), (tool, _text(result))
    alive = await agent.ok("run_command", command="echo alive", cwd=str(tmp_path))
    assert alive["output"].strip() == "alive"


ARGUMENT_ERRORS: list[tuple[str, dict[str, Any], list[str]]] = [
    ("run_command", {}, ["command: required"]),
    ("run_command", {"cmd": "ls"}, ["command: required", "not arguments of run_command: cmd"]),
    ("run_command", {"command": ""}, ["command: must not be empty"]),
    ("run_command", {"command": None}, ["command: must be a string"]),
    (
        "run_command",
        {"command": 5, "timeout_seconds": -1, "background": "maybe"},
        [
            "command: must be a string",
            "timeout_seconds: must be greater than 0;",
            "background: must be true or false",
        ],
    ),
    ("run_command", {"command": "true", "terminal_id": 1.5}, ["terminal_id: must be a whole"]),
    ("wait_for_command", {"terminal_id": 0}, ["terminal_id: must be at least 1"]),
    ("wait_for_command", {"terminal_id": 1, "max_wait_seconds": "soon"}, ["must be a number"]),
    ("write_input", {"terminal_id": 1}, ["text: required"]),
    ("write_input", {"terminal_id": 1, "text": ["y"]}, ["text: must be a string"]),
    ("send_keys", {"terminal_id": 1, "keys": "q"}, ["keys: must be a list of strings"]),
    ("send_keys", {"terminal_id": 1, "keys": ["q", 7]}, ["keys[1]: must be a string"]),
    ("read_output", {"terminal_id": "one"}, ["terminal_id: must be an integer"]),
    ("list_terminals", {"only_mine": "x"}, ["only_mine: must be true or false"]),
    ("list_terminals", {"task_id": ""}, ["task_id: must not be empty"]),
    ("kill_command", {}, ["terminal_id: required"]),
    ("close_terminal", {"terminal_id": -2}, ["terminal_id: must be at least 1"]),
    ("environment_details", {"task_id": 3}, ["task_id: must be a string"]),
]


@pytest.mark.parametrize(("tool", "arguments", "expected"), ARGUMENT_ERRORS)
async def test_argument_errors_name_the_argument_and_what_it_takes(
    agent: Agent, tool: str, arguments: dict[str, Any], expected: list[str]
) -> None:
    result = await agent.call(tool, arguments)
    assert result.is_error, (tool, arguments)
    text = _text(result)
    assert text.startswith(f"Invalid arguments to {tool}: "), text
    for part in expected:
        assert part in text, (part, text)
    assert "nothing was done" in text
    # Short and the model's own terms: no validator's report, no links.
    for noise in ("validation error", "pydantic", "https://", "input_value", "Arguments"):
        assert noise not in text, text
    assert len(text) < 400, text


async def test_sessions_see_their_own_tasks(
    agent: Agent, quick: Agent, rpc: RegistryClient, tmp_path: Path
) -> None:
    ends: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    rpc.on(methods.DID_END_RUN, ends.put_nowait)
    runs = set()
    for session, word in ((agent, "from-main"), (quick, "from-quick")):
        # Apart: an idle terminal standing in the same cwd is any task's to reuse.
        (tmp_path / word).mkdir()
        started = await session.ok(
            "run_command", command=f"echo {word}", cwd=str(tmp_path / word), background=True
        )
        runs.add(started["run_id"])
    while runs:
        runs.discard((await asyncio.wait_for(ends.get(), WAIT))["runId"])
    main = await agent.ok("environment_details")
    other = await quick.ok("environment_details")
    assert main["task_id"].startswith("test-agent-")
    assert other["task_id"].startswith("quick-agent-")
    assert "from-main" in main["markdown"]
    assert "from-quick" not in main["markdown"]
    assert "from-quick" in other["markdown"]
    assert "from-main" not in other["markdown"]
    listed = await quick.ok("list_terminals", only_mine=True)
    assert listed["terminals"]
    assert all(t["yours"] and t["task_id"] == other["task_id"] for t in listed["terminals"])


async def test_keys_and_kill(agent: Agent, output: Output, tmp_path: Path) -> None:
    command = "echo ready; cat"
    started = await agent.ok("run_command", command=command, cwd=str(tmp_path), background=True)
    terminal = started["terminal_id"]
    await output.printed(terminal, "ready\r\n")
    await agent.ok("send_keys", terminal_id=terminal, keys=["C-d"])  # end of input: cat ends
    ended = await agent.ok("wait_for_command", terminal_id=terminal)
    assert (ended["state"], ended["exit_code"]) == ("completed", 0)
    command = "echo sleeping; sleep 60"
    await agent.ok("run_command", command=command, terminal_id=terminal, background=True)
    await output.printed(terminal, "sleeping\r\n")
    killed = await agent.ok("kill_command", terminal_id=terminal)
    assert killed["killed"] is True
    assert (killed["result"]["state"], killed["result"]["exit_code"]) == ("cancelled", 130)
    idle = await agent.ok("kill_command", terminal_id=terminal)
    assert idle["killed"] is False
    closed = await agent.ok("close_terminal", terminal_id=terminal)
    assert closed["closed"] is True
    gone = await agent.call("read_output", {"terminal_id": terminal})
    assert gone.is_error


async def test_kill_reports_the_command_it_interrupted_not_a_line_typed_behind_it(
    agent: Agent, rpc: RegistryClient, output: Output, tmp_path: Path
) -> None:
    starts: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    rpc.on(methods.DID_START_RUN, starts.put_nowait)
    command = "echo ready; sleep 30; echo late"
    started = await agent.ok("run_command", command=command, cwd=str(tmp_path), background=True)
    terminal = started["terminal_id"]
    await output.printed(terminal, "ready\r\n")
    # sleep reads no input: the line waits in the terminal, and the shell runs it
    # as a command of its own once sleep is gone.
    sent = await agent.call("write_input", {"terminal_id": terminal, "text": "echo typed-ahead"})
    typed = sent.structured_content
    assert typed is not None
    assert (typed["busy"], typed["command"]) == (True, command)
    assert f"while a command was running there: {command}" in _text(sent)
    killed = await agent.call("kill_command", {"terminal_id": terminal})
    result = killed.structured_content
    assert result is not None
    assert result["killed"] is True
    run = result["result"]
    assert (run["run_id"], run["command"]) == (started["run_id"], command)
    assert (run["state"], run["exit_code"], run["signal"]) == ("cancelled", 130, "SIGINT")
    assert f"command: {command}\n" in _text(killed)
    assert "late" not in run["output"]
    # The typed line is a run of its own, after the killed one, still to be reported.
    start = await asyncio.wait_for(starts.get(), WAIT)
    while start["terminalId"] != terminal or start["runId"] == started["run_id"]:
        start = await asyncio.wait_for(starts.get(), WAIT)
    after = await agent.ok("wait_for_command", terminal_id=terminal)
    assert (after["run_id"], after["command"]) == (start["runId"], "echo typed-ahead")
    assert after["state"] == "completed"
    assert after["output"] == "typed-ahead"


async def test_write_input_says_whether_a_command_was_running(agent: Agent, tmp_path: Path) -> None:
    idle = await agent.ok("run_command", command="true", cwd=str(tmp_path))
    call = await agent.call("write_input", {"terminal_id": idle["terminal_id"], "text": "true"})
    sent = call.structured_content
    assert sent is not None
    assert (sent["busy"], sent["command"]) == (False, None)
    assert "No command was running" in _text(call)


async def test_a_question_is_returned_with_its_prompt_and_answered(
    agent: Agent, tmp_path: Path
) -> None:
    command = "read -p 'Deploy to prod? [y/N] ' a; echo \"answer: $a\"; (exit 3)"
    call = await agent.call("run_command", {"command": command, "cwd": str(tmp_path)})
    asked = call.structured_content
    assert asked is not None
    assert asked["state"] == "running"
    assert asked["waiting_for"]["kind"] == "input"
    assert asked["waiting_for"]["prompt"].strip() == "Deploy to prod? [y/N]"
    text = _text(call)
    assert text.startswith("waiting for input after ")
    assert "prompt: Deploy to prod? [y/N]" in text
    assert "answer with write_input" in text
    terminal = asked["terminal_id"]
    await agent.ok("write_input", terminal_id=terminal, text="y")
    ended = await agent.ok("wait_for_command", terminal_id=terminal)
    assert (ended["state"], ended["exit_code"], ended["waiting_for"]) == ("completed", 3, None)
    assert "answer: y" in ended["output"]
    listed = await agent.ok("list_terminals", only_mine=True)
    (mine,) = [t for t in listed["terminals"] if t["id"] == terminal]
    assert (mine["state"], mine["waiting_for"]) == ("idle", None)


async def test_a_password_is_answered_and_not_repeated(agent: Agent, tmp_path: Path) -> None:
    command = "read -s -p 'Password: ' pw; echo; echo length=${#pw}"
    asked = await agent.ok("run_command", command=command, cwd=str(tmp_path))
    assert asked["waiting_for"]["kind"] == "password"
    sent = await agent.call("write_input", {"terminal_id": asked["terminal_id"], "text": "hunter2"})
    assert sent.structured_content is not None
    assert sent.structured_content["sent"] == "(7 characters, not shown)\\r"
    assert "hunter2" not in _text(sent)
    ended = await agent.ok("wait_for_command", terminal_id=asked["terminal_id"])
    assert ended["output"].split()[-1] == "length=7"
    assert "hunter2" not in ended["output"]


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
async def test_a_pager_says_its_keys_and_send_keys_leaves_it(agent: Agent, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("".join(f"line {i}\n" for i in range(500)))
    call = await agent.call("run_command", {"command": "less notes.txt", "cwd": str(tmp_path)})
    opened = call.structured_content
    assert opened is not None
    assert opened["state"] == "running"
    assert opened["waiting_for"]["kind"] == "fullScreen"
    assert opened["waiting_for"]["program"] == "less"
    keys = opened["waiting_for"]["keys"]
    assert keys == ["q"]
    assert 'less takes keys: leave it with send_keys ["q"]' in _text(call)
    sent = await agent.ok("send_keys", terminal_id=opened["terminal_id"], keys=keys)
    assert sent["sent"] == '["q"]'
    ended = await agent.ok("wait_for_command", terminal_id=opened["terminal_id"])
    assert (ended["state"], ended["exit_code"]) == ("completed", 0)


# -- the client going away ---------------------------------------------------------------------


async def _killed_agent(
    env: dict[str, str], cwd: Path, *args: str, victim: str = "client"
) -> tuple[dict[str, Any], list[psutil.Process]]:
    """Run tests/fixtures/mcp_agent.py, then SIGKILL it (``victim="client"``) or SIGTERM
    its MCP server (``"server"``); the agent's report and the MCP server's tree."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(AGENT),
        str(cwd),
        "--",
        *MCP,
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    try:
        line = await asyncio.wait_for(process.stdout.readline(), WAIT)
        report = json.loads(line)
        server = psutil.Process(report["mcp_pid"])
        tree = [server, *server.children(recursive=True)]
        if victim == "server":
            server.send_signal(signal.SIGTERM)
            await asyncio.to_thread(_until_gone, [server])
    finally:
        process.send_signal(signal.SIGKILL)
        await process.wait()
    return report, tree


async def test_no_process_outlives_a_killed_client_of_a_standalone_server(
    env: dict[str, str], tmp_path: Path
) -> None:
    _, tree = await _killed_agent(env, tmp_path, "--standalone")
    # The MCP server, its private server, the shell (and `sleep 300` once it started).
    assert len(tree) >= 3
    # Its stdin is at EOF: it ends, and with it every process it started.
    assert await asyncio.to_thread(_until_gone, tree) == []


@pytest.mark.parametrize("victim", ["client", "server"])
async def test_terminals_stay_with_the_shared_server_released(
    agent: Agent,
    rpc: RegistryClient,
    env: dict[str, str],
    socket_path: str,
    tmp_path: Path,
    victim: str,
) -> None:
    """The client SIGKILLed (the MCP server's stdin at EOF), or the MCP server SIGTERMed."""
    changes: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    rpc.on(methods.DID_CHANGE, changes.put_nowait)
    report, tree = await _killed_agent(env, tmp_path, "--socket", socket_path, victim=victim)
    assert report["task_id"].startswith("killed-agent-")
    # The MCP server alone: the terminals are the shared server's.
    assert await asyncio.to_thread(_until_gone, tree) == []
    # It released its task on the way out; the command goes on.
    change = await asyncio.wait_for(changes.get(), WAIT)
    while change["id"] != report["terminal_id"] or change["taskId"] is not None:
        change = await asyncio.wait_for(changes.get(), WAIT)
    assert change["busy"] is True
    terminal = await rpc.get(report["terminal_id"])
    assert terminal.pid is not None
    shell = psutil.Process(terminal.pid)
    processes = [shell, *shell.children(recursive=True)]
    await rpc.close_terminal(report["terminal_id"])
    assert await asyncio.to_thread(_until_gone, processes) == []


async def test_an_agent_inside_a_terminal_works_in_that_terminals_task(
    agent: Agent, rpc: RegistryClient, output: Output, socket_path: str, tmp_path: Path
) -> None:
    """An agent started in one of the registry's terminals: the server lets it act for
    that terminal's task only, and the MCP server takes that task (said in initialize)
    instead of one of its own -- and leaves it bound when it ends."""
    ends: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    rpc.on(methods.DID_END_RUN, ends.put_nowait)
    outer = f"outer-{tmp_path.name}"
    inner_cwd = tmp_path / "inner"
    inner_cwd.mkdir()
    command = shlex.join(
        [sys.executable, str(AGENT), str(inner_cwd), "--", *MCP, "--socket", socket_path]
    )
    started = await rpc.run(command, cwd=str(tmp_path), task_id=outer, background=True)
    await output.printed(started.terminal_id, '"task_id"')
    line = next(
        line for line in output.text(started.terminal_id).splitlines() if '"task_id"' in line
    )
    report = json.loads(line[line.index("{") :])
    assert report["task_id"] == outer
    inner = await rpc.get(report["terminal_id"])
    assert (inner.task_id, inner.cwd) == (outer, str(inner_cwd))
    # Ctrl-C ends the agent and its MCP server; the task stays bound (it is the
    # terminal's, not the MCP session's to release).
    await rpc.kill(started.terminal_id)
    end = await asyncio.wait_for(ends.get(), WAIT)
    while end["runId"] != started.run_id:
        end = await asyncio.wait_for(ends.get(), WAIT)
    assert (await rpc.get(started.terminal_id)).task_id == outer
    assert (await rpc.get(report["terminal_id"])).task_id == outer
    for terminal_id in (report["terminal_id"], started.terminal_id):
        await rpc.close_terminal(terminal_id)


async def test_a_stopped_background_server_is_started_again_by_the_next_call(
    env: dict[str, str], tmp_path: Path
) -> None:
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    own = {**env, "XDG_RUNTIME_DIR": str(runtime)}
    path = os.path.join(runtime, "terminal-registry", "server.sock")
    # Calls may wait 600 s: one that hung on the vanished server would fail the test.
    agent = await Agent("restarting-agent", own, "--call-timeout", "600").start()
    try:
        started = await agent.ok(
            "run_command", command="sleep 60", cwd=str(tmp_path), background=True
        )
        async with anyio.create_task_group() as group:
            waiting: list[CallToolResult] = []
            following = anyio.Event()

            async def on_progress(value: float, total: float | None, message: str | None) -> None:
                following.set()

            async def wait() -> None:
                arguments = {"terminal_id": started["terminal_id"]}
                result = await agent.call(
                    "wait_for_command", arguments, progress_callback=on_progress
                )
                waiting.append(result)

            group.start_soon(wait)
            with anyio.fail_after(WAIT):
                await following.wait()  # the call waits on the command now
            server = await asyncio.to_thread(daemon.stop_server, path)
        # The MCP server started it, so it was its child: reaped, not left a zombie.
        assert not psutil.pid_exists(server)
        # The wait ended with the server: the command's end, or the server's going.
        (ended,) = waiting
        text = _text(ended)
        assert "went away" in text or "exit code" in text, text
        again = await agent.ok("run_command", command="echo again", cwd=str(tmp_path))
        assert (again["state"], again["output"].strip()) == ("completed", "again")
        listed = await agent.ok("list_terminals")
        assert [t["id"] for t in listed["terminals"]] == [again["terminal_id"]]
    finally:
        await agent.stop()
        with contextlib.suppress(daemon.BackgroundServerError):
            await asyncio.to_thread(daemon.stop_server, path)


# -- starting -----------------------------------------------------------------------------------


def test_without_the_sdk_the_subcommand_says_what_to_install() -> None:
    # `mcp` made unimportable, as in an install without the [mcp] extra.
    code = "import sys; sys.modules['mcp'] = None; from protocol.cli import main; sys.exit(main())"
    result = subprocess.run(
        [sys.executable, "-c", code, "mcp"], capture_output=True, text=True, timeout=WAIT
    )
    assert result.returncode == 2
    assert "pip install 'terminal-registry[mcp]'" in result.stderr


async def test_commands_without_cwd_start_in_the_given_directory(
    quick: Agent, quick_cwd: str
) -> None:
    first = await quick.ok("run_command", command="pwd", task_id="cwd-test")
    output = first["output"]
    if first["state"] == "running":  # a new shell on a loaded machine can take 1 s
        rest = await quick.ok("wait_for_command", terminal_id=first["terminal_id"])
        output += rest["output"]
    assert output.strip() == quick_cwd


def test_a_directory_that_is_not_there_is_refused(tmp_path: Path) -> None:
    result = subprocess.run(
        [*MCP, "--cwd", str(tmp_path / "nope")], capture_output=True, text=True, timeout=WAIT
    )
    assert result.returncode == 2
    assert "is not a directory" in result.stderr


def test_a_socket_nobody_listens_on_is_refused_with_a_remedy(
    env: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "none.sock"
    result = subprocess.run(
        [*MCP, "--socket", str(path)],
        capture_output=True,
        text=True,
        timeout=WAIT,
        env=env,
        stdin=subprocess.DEVNULL,
    )
    assert result.returncode == 2
    assert f"cannot reach the server at {path}" in result.stderr
    assert f"terminal-registry serve --socket {path}" in result.stderr
