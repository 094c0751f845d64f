"""fish with our integration: its own syntax, the same guarantees."""

from __future__ import annotations

from pathlib import Path

from registry.output import strip_escape_sequences
from registry.run import RunState
from registry.terminals.base import IntegrationState
from registry.terminals.shell import ShellTerminal


async def test_fish_rich_runs(warm_fish: ShellTerminal, tmp_path: Path) -> None:
    assert warm_fish.integration is IntegrationState.RICH
    run = await warm_fish.run(f"cd {tmp_path}; false")
    assert run.exit_code == 1
    assert warm_fish.cwd == str(tmp_path)
    run = await warm_fish.run("echo a; sleep 1; echo b\necho 'c;d'")
    # fish resets terminal modes after its preexec event: escape sequences lead the
    # raw output; the text is exact.
    text = strip_escape_sequences(run.text()).replace("\r", "")
    assert text.splitlines() == ["a", "b", "c;d"]
    assert run.exit_code == 0


async def test_fish_timeout_and_forged_markers(warm_fish: ShellTerminal) -> None:
    run = await warm_fish.run("sleep 100", timeout=1)
    assert run.state is RunState.TIMED_OUT
    await warm_fish.run("cd /tmp")
    run = await warm_fish.run("printf '\\e]633;D;0\\a\\e]633;P;Cwd=/etc\\a'; sh -c 'exit 6'")
    assert run.exit_code == 6
    assert warm_fish.cwd == "/tmp"
