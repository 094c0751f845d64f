"""TerminalRegistry: reuse tiers, live cwd, release, concurrency, pruning, fallback,
unretrieved output and environment details -- with real shells and processes."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from registry.config import Settings
from registry.errors import InvalidCwdError, UnknownTerminalError
from registry.registry import RegistryListener, TerminalRegistry, normalise_path
from registry.run import RunState, TerminalRun
from registry.terminals.base import IntegrationState, Terminal
from registry.terminals.shell import ShellTerminal
from registry.terminals.subprocess import SubprocessTerminal

from .conftest import fast_settings


def settings(**changes: object) -> Settings:
    base = fast_settings()
    for key, value in changes.items():
        setattr(base, key, value)
    return base


@pytest_asyncio.fixture
async def reg() -> AsyncIterator[TerminalRegistry]:
    registry = TerminalRegistry(settings())
    yield registry
    await registry.close()


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[str, str]:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    return str(a), str(b)


# -- lookup ---------------------------------------------------------------------------


async def test_tier_one_same_task_same_cwd(reg: TerminalRegistry, dirs: tuple[str, str]) -> None:
    a, _ = dirs
    first = await reg.get_or_create(a, "t1", "subprocess")
    assert first.id == 1
    again = await reg.get_or_create(a + "/", "t1", "subprocess")
    assert again is first
    assert reg.task_of(first.id) == "t1"


async def test_tier_two_takes_an_idle_terminal_of_another_task(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    first = await reg.get_or_create(a, "t1", "subprocess")
    await first.run("true")  # used: no longer just handed out
    taken = await reg.get_or_create(a, "t2", "subprocess")
    assert taken is first
    assert reg.task_of(first.id) == "t2"


async def test_tier_two_prefers_released_terminals(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    owned = await reg.get_or_create(a, "t1", "subprocess")
    await owned.run("true")
    released = await reg.get_or_create(a, "t2", "subprocess", env={"X": "1"})  # forces new
    await released.run("true")
    reg.release("t2")
    assert reg.task_of(released.id) is None
    chosen = await reg.get_or_create(a, "t3", "subprocess")
    assert chosen is released


async def test_busy_terminals_are_skipped(reg: TerminalRegistry, dirs: tuple[str, str]) -> None:
    a, _ = dirs
    first = await reg.get_or_create(a, "t1", "subprocess")
    run = await first.start("sleep 30")
    second = await reg.get_or_create(a, "t1", "subprocess")
    assert second is not first
    assert reg.list(busy=True) == [first]
    await first.kill()
    assert run.state is RunState.CANCELLED


async def test_other_provider_or_cwd_gives_a_new_terminal(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, b = dirs
    sub = await reg.get_or_create(a, "t1", "subprocess")
    other_cwd = await reg.get_or_create(b, "t1", "subprocess")
    shell = await reg.get_or_create(a, "t1", "shell")
    assert len({sub.id, other_cwd.id, shell.id}) == 3
    assert isinstance(shell, ShellTerminal)


async def test_reuse_follows_the_live_cwd(reg: TerminalRegistry, dirs: tuple[str, str]) -> None:
    a, b = dirs
    for provider in ("shell", "subprocess"):
        terminal = await reg.get_or_create(a, "t1", provider)
        await terminal.run(f"cd {b}")
        assert terminal.cwd == b
        assert await reg.get_or_create(b, "t1", provider) is terminal
        fresh = await reg.get_or_create(a, "t1", provider)
        assert fresh is not terminal


async def test_paths_are_normalised(reg: TerminalRegistry, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    link = tmp_path / "link"
    link.symlink_to(real)
    first = await reg.get_or_create(str(real), "t", "subprocess")
    assert await reg.get_or_create(str(link) + "/", "t", "subprocess") is first
    assert await reg.get_or_create(f"{real}/../real", "t", "subprocess") is first
    assert normalise_path(str(link)) == normalise_path(str(real))


async def test_release_then_reuse_by_another_task(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    terminal = await reg.get_or_create(a, "t1", "shell")
    await terminal.run("echo from t1")
    reg.release("t1")
    assert not terminal.closed  # release kills nothing
    assert reg.task_of(terminal.id) is None
    assert await reg.get_or_create(a, "t2", "shell") is terminal
    # Its unread output is reported to the next task that asks.
    report = await reg.environment_details("t2", cooldown_timeout=0)
    assert "from t1" in report.markdown


async def test_concurrent_acquisition_never_shares(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    idle = await reg.get_or_create(a, None, "subprocess")
    await idle.run("true")
    got = await asyncio.gather(*(reg.get_or_create(a, f"t{i}", "subprocess") for i in range(5)))
    assert len({t.id for t in got}) == 5
    assert idle in got


async def test_ids_count_from_one_and_are_never_reused(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, b = dirs
    one = await reg.get_or_create(a, "t", "subprocess")
    await reg.close_terminal(one.id)
    two = await reg.get_or_create(a, "t", "subprocess")
    three = await reg.get_or_create(b, "t", "subprocess")
    assert (one.id, two.id, three.id) == (1, 2, 3)
    with pytest.raises(UnknownTerminalError):
        reg.get(one.id)


async def test_bad_input(reg: TerminalRegistry, tmp_path: Path) -> None:
    with pytest.raises(InvalidCwdError, match="does not exist"):
        await reg.get_or_create(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="unknown provider"):
        await reg.get_or_create(str(tmp_path), provider="telnet")
    with pytest.raises(UnknownTerminalError):
        reg.unretrieved_output(99)


async def test_dead_shell_is_pruned_and_its_output_reported_once(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    terminal = await reg.get_or_create(a, "t1", "shell")
    await terminal.run("echo last words")
    assert terminal.pid is not None
    os.kill(terminal.pid, signal.SIGKILL)
    await asyncio.wait_for(terminal.wait_closed(), 10)
    assert reg.list() == []
    assert await reg.get_or_create(a, "t1", "shell") is not terminal
    report = await reg.environment_details("t1", cooldown_timeout=0)
    assert "last words" in report.markdown
    again = await reg.environment_details("t1", cooldown_timeout=0)
    assert "last words" not in again.markdown


# -- unretrieved output ----------------------------------------------------------------


async def test_unretrieved_output_is_handed_out_once(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    terminal = await reg.get_or_create(a, "t", "shell")
    await terminal.run("echo one")
    await terminal.run("printf '\\033[31mtwo\\033[0m\\n'; printf '50%%\\r100%%\\n'")
    assert reg.unretrieved_output(terminal.id) == "one\ntwo\n100%"
    assert reg.unretrieved_output(terminal.id) == ""


async def test_running_command_hands_out_complete_lines_only(
    reg: TerminalRegistry, dirs: tuple[str, str]
) -> None:
    a, _ = dirs
    terminal = await reg.get_or_create(a, "t", "shell")
    half_seen = _event_when(reg, lambda data: b"half" in data)
    # Echo goes off before 'half' is printed, so the answer is never echoed back.
    run = await terminal.start(
        "echo first; stty -echo; printf 'half'; read x; stty echo; echo ' line'"
    )
    await asyncio.wait_for(half_seen.wait(), 10)
    assert reg.unretrieved_output(terminal.id) == "first"  # "half" waits for its line
    await terminal.write("\r")
    await run.wait()
    assert reg.unretrieved_output(terminal.id) == "half line"


# -- fallback -------------------------------------------------------------------------


async def test_fallback_to_subprocess_when_integration_never_comes(
    tmp_path: Path,
) -> None:
    reg = TerminalRegistry(settings(default_shell="sh", shell_integration_timeout=1.0))
    try:
        marker = tmp_path / "ran"
        run = await reg.run(f"echo once >> {marker}; echo ran", cwd=str(tmp_path), task_id="t")
        assert run.exit_code == 0
        # Said as it happened: no integration at all, found out quickly (not "within
        # the whole window").
        assert "has no shell integration" in (run.note or "")
        assert marker.read_text() == "once\n"
        shells = [t for t in reg.list() if t.provider == "shell"]
        subs = [t for t in reg.list() if t.provider == "subprocess"]
        assert len(shells) == 1
        assert len(subs) == 1
        assert shells[0].integration is IntegrationState.NONE
        assert reg.task_of(subs[0].id) == "t"
        assert b"once" not in shells[0].replay()  # never typed into the shell
    finally:
        await reg.close()


async def test_fallback_while_a_slow_rc_is_still_loading(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text("sleep 2\n")
    reg = TerminalRegistry(settings(default_shell="bash", shell_integration_timeout=0.5))
    try:
        shell = await reg.get_or_create(str(tmp_path), "t", "shell", env={"HOME": str(home)})
        marker = tmp_path / "ran"
        rich = _event_when_rich(reg)
        run = await reg.run(f"echo once >> {marker}", cwd=str(tmp_path), task_id="t")
        assert run.exit_code == 0
        assert "did not come up" in (run.note or "")
        assert isinstance(shell, ShellTerminal)
        # Integration arrives later: the shell becomes rich, the command stays run once.
        await asyncio.wait_for(rich.wait(), 10)
        assert shell.integration is IntegrationState.RICH
        assert marker.read_text() == "once\n"
        assert b"once" not in shell.replay()
    finally:
        await reg.close()


def _event_when(reg: TerminalRegistry, predicate: Callable[[bytes], bool]) -> asyncio.Event:
    """An event set once some output (accumulated) satisfies ``predicate``."""
    event = asyncio.Event()
    seen = bytearray()

    class Watch(RegistryListener):
        def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
            if run is not None:
                seen.extend(data)
                if predicate(bytes(seen)):
                    event.set()

    reg.subscribe(Watch())
    return event


def _event_when_rich(reg: TerminalRegistry) -> asyncio.Event:
    event = asyncio.Event()

    class Watch(RegistryListener):
        def on_change(self, terminal: Terminal) -> None:
            if terminal.provider == "shell" and terminal.integration is IntegrationState.RICH:
                event.set()

    reg.subscribe(Watch())
    return event


# -- environment details ----------------------------------------------------------------


async def test_environment_details_with_a_real_background_loop(tmp_path: Path) -> None:
    reg = TerminalRegistry(settings(hot_timeout=2.0))
    try:
        started = time.monotonic()
        run = await reg.run(
            "bash -c 'for i in 1 2 3; do echo $i; sleep 1; done'",
            cwd=str(tmp_path),
            task_id="t",
            background=True,
        )
        report = await reg.environment_details("t", cooldown_timeout=10)
        # The loop kept the terminal hot until it ended: the report waited for it.
        assert run.done
        assert time.monotonic() - started >= 2
        assert report.markdown == (
            "# Inactive Terminals with Completed Process Output\n"
            "## Terminal 1 (Inactive)\n"
            f"### Working Directory: `{tmp_path}`\n"
            "### New Output\n"
            "Command: `bash -c 'for i in 1 2 3; do echo $i; sleep 1; done'` (exit code 0)\n"
            "```\n1\n2\n3\n```\n"
        )
        assert (await reg.environment_details("t", cooldown_timeout=0)).markdown == ""
    finally:
        await reg.close()


async def test_environment_details_active_terminal(tmp_path: Path) -> None:
    reg = TerminalRegistry(settings(hot_timeout=0.2))
    try:
        run = await reg.run("echo serving; read x", cwd=str(tmp_path), task_id="t", background=True)
        for _ in range(100):
            report = await reg.environment_details("t", cooldown_timeout=2)
            if report.terminals and report.terminals[0].runs:
                break
        (terminal,) = report.active
        assert report.markdown.startswith(
            "# Actively Running Terminals\n## Terminal 1 (Active)\n"
            f"### Working Directory: `{tmp_path}`\n"
            "### Original command: `echo serving; read x`\n"
            # read prints no prompt: the question is the line above the cursor.
            "### State: waiting for input: `serving`\n"
            "### New Output\n```\nserving\n"
        )
        assert terminal.command_line == "echo serving; read x"
        await reg.get(1).write("\r")
        await run.wait()
        final = await reg.environment_details("t", cooldown_timeout=0)
        assert final.markdown.endswith("Command: `echo serving; read x` (exit code 0)\n")
    finally:
        await reg.close()


async def test_environment_details_wakes_when_the_terminal_cools(tmp_path: Path) -> None:
    # A terminal that stays busy but falls quiet: the report comes once it has cooled
    # down (its cooling timer wakes the waiting report), long before the timeout.
    reg = TerminalRegistry(settings(hot_timeout=0.3))
    try:
        printed = _event_when(reg, lambda seen: b"serving" in seen)
        # Quiet but not waiting for input (a waiting terminal is not waited for).
        run = await reg.run(
            "echo serving; sleep 60", cwd=str(tmp_path), task_id="t", background=True
        )
        await asyncio.wait_for(printed.wait(), 10)
        assert reg.is_hot(reg.list("t")[0].id)
        report = await asyncio.wait_for(reg.environment_details("t", cooldown_timeout=60), 20)
        (terminal,) = report.active
        assert terminal.runs[0].output == "serving"
        assert not run.done
        await reg.get(terminal.terminal_id).kill()
        await run.wait()
    finally:
        await reg.close()


async def test_environment_details_covers_task_and_released_terminals(
    dirs: tuple[str, str],
) -> None:
    a, b = dirs
    reg = TerminalRegistry(settings())
    try:
        mine = await reg.get_or_create(a, "mine", "subprocess")
        theirs = await reg.get_or_create(b, "theirs", "subprocess")
        await mine.run("echo mine; false")
        await theirs.run("echo theirs")
        report = await reg.environment_details("mine", cooldown_timeout=0)
        assert "mine" in report.markdown
        assert "Command: `echo mine; false` (exit code 1)" in report.markdown
        assert "theirs" not in report.markdown
        reg.release("theirs")
        report = await reg.environment_details("mine", cooldown_timeout=0)
        assert "theirs" in report.markdown
        assert "echo mine" not in report.markdown  # already retrieved
    finally:
        await reg.close()


async def test_nothing_to_report_is_empty(reg: TerminalRegistry) -> None:
    report = await reg.environment_details("nobody", cooldown_timeout=0)
    assert report.markdown == ""
    assert report.terminals == []


async def test_runs_reported_oldest_first(reg: TerminalRegistry, dirs: tuple[str, str]) -> None:
    a, _ = dirs
    terminal = await reg.get_or_create(a, "t", "subprocess")
    assert isinstance(terminal, SubprocessTerminal)
    for word in ("alpha", "beta", "gamma"):
        await terminal.run(f"echo {word}")
    markdown = (await reg.environment_details("t", cooldown_timeout=0)).markdown
    assert markdown.index("alpha") < markdown.index("beta") < markdown.index("gamma")


async def test_foreground_run_output_is_not_news(reg: TerminalRegistry, tmp_path: Path) -> None:
    run = await reg.run("echo seen", cwd=str(tmp_path), task_id="t", provider="subprocess")
    assert run.stdout == b"seen\n"
    background = await reg.run(
        "echo later", cwd=str(tmp_path), task_id="t", provider="subprocess", background=True
    )
    await background.wait()
    markdown = (await reg.environment_details("t", cooldown_timeout=0)).markdown
    assert "seen" not in markdown
    assert "Command: `echo later` (exit code 0)\n```\nlater" in markdown
