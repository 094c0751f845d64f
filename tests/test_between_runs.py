"""Output that arrives between runs -- a background job's, a job notice -- belongs to
no command: it is the terminal's unread output (and its environment report), never
the next command's.  Real bash, zsh and the subprocess provider."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from registry.config import Settings
from registry.registry import RegistryListener, TerminalRegistry
from registry.run import TerminalRun
from registry.terminals.base import Terminal

from .conftest import fast_settings

SHELLS = [shell for shell in ("bash", "zsh") if shutil.which(shell)]


class _Seen(RegistryListener):
    """Wakes a test when a terminal has shown ``text`` (in any output)."""

    def __init__(self) -> None:
        self.shown = ""
        self.changed = asyncio.Event()

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        self.shown += data.decode("utf-8", "replace")
        self.changed.set()

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        self.shown += f"<run {run.command_line!r} ended>"
        self.changed.set()

    async def until(self, text: str) -> None:
        async with asyncio.timeout(10):
            while text not in self.shown:
                self.changed.clear()
                await self.changed.wait()


@pytest_asyncio.fixture
async def reg(tmp_path: Path) -> AsyncIterator[TerminalRegistry]:
    settings: Settings = fast_settings()
    settings.hot_timeout = 0.3
    registry = TerminalRegistry(settings)
    yield registry
    await registry.close()


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_background_jobs_output_is_reported_and_not_the_next_commands(
    reg: TerminalRegistry, tmp_path: Path, shell: str
) -> None:
    terminal = await reg.get_or_create(str(tmp_path), "t", shell=shutil.which(shell))
    seen = _Seen()
    reg.subscribe(seen)
    await reg.run("(sleep 0.3; echo BUI''LT) &", terminal_id=terminal.id)
    await seen.until("BUILT")
    if shell == "zsh":
        await seen.until("done")  # zsh tells at once; bash before the next command
    assert reg.is_hot(terminal.id)  # fresh output, even with no command running
    report = await reg.environment_details("t", cooldown_timeout=5, peek=True)
    assert "Output between commands (background jobs):\n```\nBUILT\n" in report.markdown
    # The next command's output is its own: no BUILT, no "[1]+ Done" notice.
    after = await reg.run("echo next", terminal_id=terminal.id)
    assert after.text().replace("\r\n", "\n") == "next\n"
    report = await reg.environment_details("t", cooldown_timeout=5)
    between = report.markdown.split("Output between commands (background jobs):\n")[1]
    assert between.startswith("```\nBUILT\n")
    assert "done" in between.lower()  # the job's notice, told as no command's output
    assert "echo next" not in report.markdown  # a foreground result: retrieved
    # Reported once.
    assert (await reg.environment_details("t", cooldown_timeout=0)).markdown == ""
    assert reg.unretrieved_output(terminal.id) == ""


async def test_a_job_notice_is_in_no_commands_output(reg: TerminalRegistry, tmp_path: Path) -> None:
    """bash tells of a job that ended at the prompt just before the next command runs."""
    terminal = await reg.get_or_create(str(tmp_path), "t", shell=shutil.which("bash"))
    seen = _Seen()
    reg.subscribe(seen)
    await reg.run("(sleep 0.2; echo BUI''LT) &", terminal_id=terminal.id)
    await seen.until("BUILT")
    after = await reg.run("echo next", terminal_id=terminal.id)
    assert after.text() == "next\r\n"
    # A mirror still shows the notice where bash would have printed it.
    assert "[1]+  Done" in seen.shown


async def test_a_background_child_of_a_subprocess_command(
    reg: TerminalRegistry, tmp_path: Path
) -> None:
    seen = _Seen()
    reg.subscribe(seen)
    run = await reg.run("(sleep 0.5; echo LA''TE) &", cwd=str(tmp_path), provider="subprocess")
    await seen.until("LATE")
    assert reg.unretrieved_output(run.terminal_id, peek=True) == "LATE"
    after = await reg.run("echo next", terminal_id=run.terminal_id)
    assert after.text() == "next\n"
    assert reg.unretrieved_output(run.terminal_id) == "LATE"


async def test_what_someone_types_at_the_prompt_is_not_background_output(
    reg: TerminalRegistry, tmp_path: Path
) -> None:
    terminal = await reg.get_or_create(str(tmp_path), "t")
    seen = _Seen()
    reg.subscribe(seen)
    await reg.run("true", terminal_id=terminal.id)
    await terminal.write("echo typed-by-hand")
    await seen.until("typed-by-hand")
    assert reg.unretrieved_output(terminal.id, peek=True) == ""
    await terminal.write("\r")
    await seen.until("<run 'echo typed-by-hand' ended>")
    report = await reg.environment_details("t", cooldown_timeout=5)
    assert "Output between commands" not in report.markdown
    assert "Command: `echo typed-by-hand` (exit code 0)\n```\ntyped-by-hand\n```" in report.markdown
