"""The environment report as a model and a preview read it, and the order a client
hears a run's end in, from a real server over stdio."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from registry.registry import TerminalRegistry

from .conftest import fast_settings
from .rpc import StdioServer, serving


async def test_output_is_fenced_longer_than_any_backticks_in_it(tmp_path: Path) -> None:
    """Markdown in output stays text; a fence in output cannot close the block."""
    reg = TerminalRegistry(fast_settings())
    try:
        script = tmp_path / "print.sh"
        lines = "# not a heading\\n*not bold*\\n<b>raw</b>\\n```sh\\nx\\n```\\n"
        script.write_text(f"printf '{lines}'\n")
        await reg.run(f"bash {script}", cwd=str(tmp_path), task_id="t", background=True)
        await reg.run("echo '`quoted`'", cwd=str(tmp_path), task_id="t", background=True)
        markdown = (await reg.environment_details("t", cooldown_timeout=5)).markdown
    finally:
        await reg.close()
    assert (
        f"Command: `bash {script}` (exit code 0)\n"
        "````\n# not a heading\n*not bold*\n<b>raw</b>\n```sh\nx\n```\n````\n"
    ) in markdown
    # A command line with backticks is one code span, not two.
    assert "Command: ``echo '`quoted`'`` (exit code 0)\n```\n`quoted`\n```\n" in markdown


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server() -> AsyncIterator[StdioServer]:
    async with serving({"killGraceMs": 500}) as peer:
        yield peer


@pytest.mark.parametrize(
    "params",
    [
        {"command": "echo hi"},
        {"command": "echo hi", "provider": "subprocess"},
        {"command": "sleep 30", "timeoutMs": 300},
        {"command": "sleep 30", "timeoutMs": 300, "provider": "subprocess"},
    ],
    ids=["shell", "subprocess", "shell-timeout", "subprocess-timeout"],
)
async def test_a_finished_terminal_is_not_busy_before_its_answer(
    server: StdioServer, tmp_path: Path, params: dict[str, Any]
) -> None:
    """The didChange clearing busy goes out before the run's answer, so a client that
    shows the answer never shows the terminal busy after it."""
    server.notifications.clear()
    reply = await server.response(
        server.request("terminal/run", {**params, "cwd": str(tmp_path), "taskId": tmp_path.name})
    )
    terminal = reply["result"]["terminalId"]
    changes = [
        n["params"]["busy"]
        for n in server.notifications
        if n["method"] == "terminal/didChange" and n["params"]["id"] == terminal
    ]
    assert changes[-1] is False
    ends = [n for n in server.notifications if n["method"] == "terminal/didEndRun"]
    assert ends[-1]["params"]["runId"] == reply["result"]["runId"]
