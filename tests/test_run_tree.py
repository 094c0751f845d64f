"""Ending a run ends its whole tree: the foreground group and every process the run
started, also those that re-parented to init when their parent died."""

from __future__ import annotations

import asyncio
import secrets
from pathlib import Path

import pytest

from registry.processes import wait_gone
from registry.run import RunState, TerminalRun
from registry.terminals.base import Terminal, TerminalListener
from registry.terminals.shell import ShellTerminal

from .conftest import SpawnTerminal
from .rpc import alive, tokened_sleeps


@pytest.mark.parametrize("how", ["timeout", "kill"])
async def test_background_children_of_a_run_end_with_it(
    spawn_terminal: SpawnTerminal, tmp_path: Path, how: str
) -> None:
    terminal: ShellTerminal = await spawn_terminal("bash", cwd=str(tmp_path))
    token = f"{secrets.randbelow(10**12):012d}"
    # A non-interactive bash starts its & jobs with SIGINT ignored: Ctrl-C ends the
    # bash, and the sleeps, re-parented to init, would live on.
    command = f"bash -c 'sleep 61.{token} & sleep 62.{token} & echo up; wait'"
    up = asyncio.Event()

    class Watcher(TerminalListener):
        def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
            if run is not None and b"up" in run.output:
                up.set()

    terminal.subscribe(Watcher())
    run = await terminal.start(command, timeout=2.0 if how == "timeout" else None)
    await asyncio.wait_for(up.wait(), 10)
    sleepers = tokened_sleeps(token)
    assert len(sleepers) == 2
    if how == "kill":
        await terminal.kill()
    await run.wait()
    assert run.state is (RunState.TIMED_OUT if how == "timeout" else RunState.CANCELLED)
    assert await wait_gone(sleepers, 10) == []
    assert alive(tokened_sleeps(token)) == []
    after = await terminal.run("echo still usable")
    assert after.text().strip() == "still usable"
