"""Tasks sharing a directory: a terminal may move to another task (tier 2), but the
output it produced for one task stays that task's, the move is said, and a user can
keep tasks apart; a report can be looked at without taking it."""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from registry.registry import TerminalRegistry

from .conftest import fast_settings


@pytest_asyncio.fixture
async def reg(tmp_path: Path) -> AsyncIterator[TerminalRegistry]:
    home = tmp_path / "home"
    home.mkdir()
    registry = TerminalRegistry(fast_settings())
    yield registry
    await registry.close()


async def _leave_unread(reg: TerminalRegistry, cwd: str, task: str, command: str) -> int:
    """Run ``command`` for ``task`` in the background and wait for its end, unread."""
    run = await reg.run(command, cwd=cwd, task_id=task, background=True)
    await run.wait()
    return run.terminal_id


async def test_output_stays_with_the_task_that_produced_it(
    reg: TerminalRegistry, tmp_path: Path
) -> None:
    cwd = str(tmp_path)
    first = await _leave_unread(reg, cwd, "a3", "export SECRET=a3-secret; echo a3-output")
    # b3 asks for a terminal in the same directory: a3's idle one (tier 2).
    run = await reg.run('echo "got $SECRET"', cwd=cwd, task_id="b3")
    assert run.terminal_id == first
    assert run.text().strip() == "got a3-secret"  # its shell state carried over ...
    assert run.note is not None
    assert "task a3" in run.note  # ... and the run says so
    b3 = (await reg.environment_details("b3", 0)).markdown
    assert "a3-output" not in b3
    a3 = (await reg.environment_details("a3", 0)).markdown
    assert "a3-output" in a3


@pytest.mark.parametrize("reuse", ["idle", "released", "never"])
async def test_reuse_across_tasks_setting(tmp_path: Path, reuse: str) -> None:
    settings = dataclasses.replace(fast_settings(), reuse_across_tasks=reuse)
    reg = TerminalRegistry(settings)
    try:
        busy_elsewhere, released = tmp_path / "idle", tmp_path / "released"
        busy_elsewhere.mkdir()
        released.mkdir()
        # Another task's idle (not released) terminal: taken only under "idle".
        first = await _leave_unread(reg, str(busy_elsewhere), "a", "true")
        taker = await reg.get_or_create(str(busy_elsewhere), "b")
        assert (taker.id == first) is (reuse == "idle")
        # A released terminal: anyone's, unless "never".
        second = await _leave_unread(reg, str(released), "c", "true")
        reg.release("c")
        taker = await reg.get_or_create(str(released), "d")
        assert (taker.id == second) is (reuse != "never")
    finally:
        await reg.close()


async def test_a_report_can_be_peeked_at(reg: TerminalRegistry, tmp_path: Path) -> None:
    await _leave_unread(reg, str(tmp_path), "p", "echo peeked-output")
    peeked = await reg.environment_details("p", 0, peek=True)
    assert "peeked-output" in peeked.markdown
    again = await reg.environment_details(None, 0, peek=True)
    assert "peeked-output" in again.markdown  # a human looking takes nothing
    taken = await reg.environment_details("p", 0)
    assert "peeked-output" in taken.markdown
    assert "peeked-output" not in (await reg.environment_details("p", 0)).markdown


async def test_a_busy_machine_does_not_make_shells_fall_back(tmp_path: Path) -> None:
    """Shells queued for a CPU are slow on the wall's clock, not on their own: all of
    them come up rich and take their command, none falls back."""
    home = tmp_path / "home"
    home.mkdir()
    # A startup file that needs some CPU (~0.1 s); sixteen of them on one CPU need
    # several seconds of wall time, each far less of its own.
    (home / ".bashrc").write_text("i=0; while [ $i -lt 30000 ]; do i=$((i+1)); done\n")
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(saved)})  # the shells inherit one CPU to share
    settings = dataclasses.replace(
        fast_settings(),
        default_shell="bash",
        # The shells' own budget, several times what the rc needs (CPU time itself
        # inflates on a loaded 2-core machine); sixteen of them still need more
        # wall time than this, which is what a wall-clock rule would fall back on.
        shell_integration_timeout=1.0,
        integration_absolute_timeout=60.0,
    )
    reg = TerminalRegistry(settings)
    try:
        shells = await asyncio.gather(
            *(reg.get_or_create(str(tmp_path), f"t{i}", env={"HOME": str(home)}) for i in range(16))
        )
        runs = await asyncio.gather(*(reg.run("echo up", terminal_id=t.id) for t in shells))
        assert [run.note for run in runs if run.note] == []
        assert {t.provider for t in reg.list()} == {"shell"}
    finally:
        os.sched_setaffinity(0, saved)
        await reg.close()
