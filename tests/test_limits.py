"""Per-command resource limits against real hogs in real terminals: a memory hog, a
process spawner, a flood of output, a busy loop and a sleeper each end ``failed``
with the limit they hit named, their processes gone, and the terminal runs the next
command.  Through the terminal's cgroup where the machine has one, through rlimits
and the server's own counting otherwise."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from registry import limits as limits_module
from registry.cgroups import Cgroup, detect
from registry.keeper import Keeper
from registry.limits import Limits, enforcement
from registry.processes import wait_gone
from registry.registry import TerminalRegistry
from registry.run import RunState, TerminalRun

from .conftest import fast_settings

SUPPORT = detect()
needs_cgroup_limits = pytest.mark.skipif(
    SUPPORT is None or not {"memory", "pids"} <= SUPPORT.limits(),
    reason="no cgroup with memory and pids limits on this machine",
)

HOG = "python3 -c 'a = bytearray(2**31); print(len(a))'"
SPAWNER = "bash -c 'for i in $(seq 200); do sleep 60 & done; wait'"
# Starts sleepers until the process limit refuses one, then exits at once: it leaves
# them running and ends before a counter poll can notice the limit.
QUITTER = 'python3 -c \'import subprocess\nwhile True: subprocess.Popen(["sleep", "60"])\''
# A loop the shell runs itself, starting jobs: SIGKILL ends the jobs but not the loop,
# which starts more until Ctrl-C stops it -- and bash, a fork cut short by the Ctrl-C,
# then waits in its prompt hook for the last job it started before it shows a prompt.
SHELL_LOOP = "for i in $(seq 20); do sleep 60 & done; wait; echo finished"
# A loop that ends by itself once the first kill has freed slots: its last jobs were
# started after that kill.
SHORT_LOOP = "for i in 1 2 3 4 5 6; do sleep 60 & done"


@pytest_asyncio.fixture
async def placed(tmp_path: Path) -> AsyncIterator[TerminalRegistry]:
    """A registry whose terminals get a cgroup each, as the server's do."""
    keeper = Keeper.start(str(tmp_path / "state"), watchdog=False)
    registry = TerminalRegistry(fast_settings(), keeper=keeper)
    yield registry
    await registry.close()
    keeper.close()


@pytest_asyncio.fixture
async def unplaced() -> AsyncIterator[TerminalRegistry]:
    """A registry without a keeper: no cgroup, so rlimits and the server enforce."""
    registry = TerminalRegistry(fast_settings())
    yield registry
    await registry.close()


async def _run(
    registry: TerminalRegistry, cwd: Path, provider: str, command: str, limits: Limits
) -> TerminalRun:
    return await registry.run(
        command, cwd=str(cwd), task_id="t", provider=provider, limits=limits, timeout=60
    )


async def _still_usable(registry: TerminalRegistry, run: TerminalRun) -> None:
    after = await registry.run("echo next", terminal_id=run.terminal_id, timeout=30)
    assert after.state is RunState.COMPLETED, after.note
    assert after.exit_code == 0
    assert "next" in after.text()
    assert after.limit is None


PROVIDERS = ["shell", "subprocess"]


@needs_cgroup_limits
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_memory_hog_ends_at_its_memory_limit(
    placed: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    run = await _run(placed, tmp_path, provider, HOG, Limits(memory_mb=256))
    assert run.state is RunState.FAILED
    assert run.limit == "memoryMb"
    assert run.note is not None
    assert "memoryMb" in run.note
    assert "256 MB" in run.note
    assert str(2**31) not in run.text()
    assert placed.get(run.terminal_id).limits_by["memoryMb"] == "cgroup"
    await _still_usable(placed, run)


@needs_cgroup_limits
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_spawner_ends_at_its_process_limit_and_takes_its_children_along(
    placed: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    run = await _run(placed, tmp_path, provider, SPAWNER, Limits(pids=50))
    assert run.state is RunState.FAILED
    assert run.limit == "pids"
    assert run.note is not None
    assert "50 processes" in run.note
    await _only_the_shell_is_left(placed, run, provider)
    await _still_usable(placed, run)


@needs_cgroup_limits
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_limit_noticed_only_as_the_run_ends_still_ends_what_it_left_running(
    placed: TerminalRegistry, tmp_path: Path, provider: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Under load the counters' poll can come after the command has ended (a busy
    # event loop): the last look, as the run ends, is then the one that notices.
    monkeypatch.setattr(limits_module, "POLL_INTERVAL", 3600.0)
    run = await _run(placed, tmp_path, provider, QUITTER, Limits(pids=20))
    assert (run.state, run.limit) == (RunState.FAILED, "pids")
    await _only_the_shell_is_left(placed, run, provider)
    await _still_usable(placed, run)


@needs_cgroup_limits
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_loop_the_shell_runs_ends_at_its_process_limit_and_the_shell_comes_back(
    placed: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    run = await _run(placed, tmp_path, provider, SHELL_LOOP, Limits(pids=5))
    assert (run.state, run.limit) == (RunState.FAILED, "pids")
    assert run.note is not None
    assert "did not return" not in run.note
    assert not placed.get(run.terminal_id).closed
    await _only_the_shell_is_left(placed, run, provider)
    await _still_usable(placed, run)


@needs_cgroup_limits
async def test_jobs_started_after_the_limits_kill_end_with_the_run(tmp_path: Path) -> None:
    # A grace long enough for the loop to end by itself (bash retries a refused fork
    # after 1 s, by when the kill has made room): nothing then interrupts it.
    keeper = Keeper.start(str(tmp_path / "state"), watchdog=False)
    registry = TerminalRegistry(replace(fast_settings(), kill_grace=10.0), keeper=keeper)
    try:
        run = await _run(registry, tmp_path, "shell", SHORT_LOOP, Limits(pids=5))
        assert (run.state, run.limit) == (RunState.FAILED, "pids")
        await _only_the_shell_is_left(registry, run, "shell")
        await _still_usable(registry, run)
    finally:
        await registry.close()
        keeper.close()


async def _only_the_shell_is_left(
    registry: TerminalRegistry, run: TerminalRun, provider: str
) -> None:
    """Nothing of the run's is left in its terminal's group: the shell at most.  The
    SIGKILLed take a moment to exit, so their exits are awaited (bounded) first."""
    terminal = registry.get(run.terminal_id)
    group: Cgroup | None = terminal._placement.cgroup
    assert group is not None
    keep = {terminal.pid} if provider == "shell" else set()
    others = []
    for pid in group.members() - keep:
        try:
            others.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    await wait_gone(others, 10)
    assert group.members() <= keep


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_flood_of_output_ends_at_its_output_limit(
    placed: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    run = await _run(placed, tmp_path, provider, "yes", Limits(output_mb=10))
    assert run.state is RunState.FAILED
    assert run.limit == "outputMb"
    assert run.note is not None
    assert "more than 10 MB" in run.note
    assert 10 * 2**20 < run.output_bytes < 200 * 2**20
    await _still_usable(placed, run)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_long_command_ends_at_its_wall_clock_limit(
    placed: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    run = await _run(placed, tmp_path, provider, "sleep 30", Limits(wall_seconds=0.5))
    assert (run.state, run.limit) == (RunState.FAILED, "wallSeconds")
    assert run.duration < 15
    await _still_usable(placed, run)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_busy_loop_ends_at_its_cpu_limit(
    placed: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    run = await _run(
        placed, tmp_path, provider, "python3 -c 'while True: pass'", Limits(cpu_seconds=1)
    )
    assert (run.state, run.limit) == (RunState.FAILED, "cpuSeconds")
    await _still_usable(placed, run)


async def test_terminal_limits_apply_to_each_run_and_a_run_may_lift_them(
    placed: TerminalRegistry, tmp_path: Path
) -> None:
    terminal = await placed.get_or_create(
        str(tmp_path), "t", "subprocess", limits=Limits(output_mb=1)
    )
    flood = "head -c 3000000 /dev/zero"
    run = await placed.run(flood, terminal_id=terminal.id, timeout=30)
    assert run.limit == "outputMb"
    lifted = await placed.run(
        flood, terminal_id=terminal.id, timeout=30, limits=Limits(output_mb=0)
    )
    assert (lifted.state, lifted.limit, lifted.output_bytes) == (
        RunState.COMPLETED,
        None,
        3_000_000,
    )


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_without_a_cgroup_rlimits_hold_the_hog_and_the_busy_loop(
    unplaced: TerminalRegistry, tmp_path: Path, provider: str
) -> None:
    how = enforcement(None)
    assert (how["memoryMb"], how["cpuSeconds"], how["outputMb"]) == ("rlimit", "rlimit", "server")
    hog = await _run(unplaced, tmp_path, provider, HOG, Limits(memory_mb=256))
    # RLIMIT_AS: the allocation fails in the program, which reports it its own way.
    assert hog.exit_code not in (0, None)
    assert "MemoryError" in hog.text()
    busy = await _run(
        unplaced, tmp_path, provider, "python3 -c 'while True: pass'", Limits(cpu_seconds=1)
    )
    assert (busy.state, busy.limit, busy.signal) == (RunState.FAILED, "cpuSeconds", "SIGXCPU")
    await _still_usable(unplaced, busy)


def test_limits_combine_run_over_terminal_over_settings() -> None:
    settings = Limits(output_mb=1024)
    terminal = Limits(memory_mb=512, pids=100)
    run = Limits(memory_mb=256, pids=0)
    effective = run.over(terminal).over(settings).effective()
    assert effective == Limits(memory_mb=256, output_mb=1024)
    assert effective.set() == {"memoryMb": 256, "outputMb": 1024}
    assert os.geteuid() != 0 or enforcement(None)["pids"] == "none"
