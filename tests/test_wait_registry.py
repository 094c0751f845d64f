"""Wait-states wired into the registry: real shells (bash, zsh, fish) with our
integration, real programs, the registry's listeners, its wait and its report.

The detection itself is tested against a bare bash in tests/test_waiting.py; here
the states arrive through ShellTerminal's marker phases and the registry's events.
Every state is awaited through the registry's own listener or ``wait``, never slept for.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from registry.keys import UnknownKeyError
from registry.registry import RegistryListener, TerminalRegistry
from registry.run import RunState
from registry.terminals.base import Terminal
from registry.waiting import TerminalState, WaitState

from .conftest import SHELLS, fast_settings

T = TerminalState
PY = sys.executable


class States(RegistryListener):
    """Every wait-state the registry announced, per terminal, awaitable."""

    def __init__(self) -> None:
        self.seen: dict[int, list[WaitState]] = {}
        self._event = asyncio.Event()

    def on_change(self, terminal: Terminal) -> None:
        states = self.seen.setdefault(terminal.id, [])
        state = terminal.wait_state
        if not states or states[-1] != state:
            states.append(state)
        self._event.set()

    def mark(self, terminal: Terminal) -> int:
        """Where "from now on" starts, for :meth:`until`."""
        return len(self.seen.get(terminal.id, []))

    async def until(
        self,
        terminal: Terminal,
        accept: Callable[[WaitState], bool],
        timeout: float = 10,
        since: int = 0,
    ) -> WaitState:
        async with asyncio.timeout(timeout):
            while True:
                for state in self.seen.get(terminal.id, [])[since:]:
                    if accept(state):
                        return state
                self._event.clear()
                await self._event.wait()


@pytest_asyncio.fixture
async def reg() -> AsyncIterator[tuple[TerminalRegistry, States]]:
    registry = TerminalRegistry(fast_settings())
    states = States()
    registry.subscribe(states)
    yield registry, states
    await registry.close()


READ = {
    "bash": "read -p 'continue? ' x; echo \"got $x\"",
    "zsh": "read 'x?continue? '; echo \"got $x\"",
    "fish": "read -P 'continue? ' x; echo \"got $x\"",
}


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_question_is_announced_and_answered(
    reg: tuple[TerminalRegistry, States], tmp_path: Path, shell: str
) -> None:
    registry, states = reg
    terminal = await registry.get_or_create(str(tmp_path), "t", shell=shutil.which(shell))
    run = await registry.run(READ[shell], terminal_id=terminal.id, background=True)
    found = await states.until(terminal, lambda s: s.waiting)
    assert (found.state, found.prompt, found.program) == (T.WAITING_FOR_INPUT, "continue? ", shell)
    assert terminal.wait_state == found
    await terminal.write("yes\r")
    done = await registry.wait(run, timeout=10)
    assert done.state is RunState.COMPLETED
    assert done.exit_code == 0
    assert "got yes" in done.text()
    assert terminal.wait_state.state is T.IDLE  # never a stale "waiting" after the end


async def test_the_answer_loop_never_resolves_on_the_answered_question(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    registry, _ = reg
    run = await registry.run(
        "read -p 'first? ' a; read -p 'second? ' b; echo \"$a and $b\"",
        cwd=str(tmp_path),
        background=True,
    )
    terminal = registry.get(run.terminal_id)
    await registry.wait(run, yield_on_input=True, timeout=10)
    assert not run.done
    first = terminal.waiting_now()
    assert first is not None
    assert first.prompt == "first? "
    # Right after the answer the last verdict is still "first? ": wait must not take it.
    await terminal.write("1\r")
    assert terminal.waiting_now() is None
    await registry.wait(run, yield_on_input=True, timeout=10)
    second = terminal.waiting_now()
    assert second is not None
    assert second.prompt == "second? "
    await terminal.write("2\r")
    await registry.wait(run, yield_on_input=True, timeout=10)
    assert run.done
    assert run.exit_code == 0
    assert "1 and 2" in run.text()


async def test_wait_by_run_id_and_by_terminal_and_its_timeout(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    registry, _ = reg
    run = await registry.run("cat", cwd=str(tmp_path), background=True)
    assert registry.find_run(run_id=run.id) is run
    assert registry.find_run(terminal_id=run.terminal_id) is run
    # Without yielding, a command that waits for ever runs until the timeout, and on.
    await registry.wait(run, timeout=0.3)
    assert not run.done
    terminal = registry.get(run.terminal_id)
    await registry.wait(run, yield_on_input=True, timeout=10)
    state = terminal.waiting_now()
    assert state is not None
    assert state.program == "cat"
    await terminal.send_keys(["C-d"])
    await registry.wait(run, timeout=10)
    assert run.done
    assert registry.find_run(terminal_id=run.terminal_id) is run  # its last run now
    with pytest.raises(ValueError, match="unknown run 99999"):
        registry.find_run(run_id=99999)


async def test_full_screen_is_left_with_its_keys(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    if shutil.which("less") is None:
        pytest.skip("less is not installed")
    registry, states = reg
    (tmp_path / "long.txt").write_text("\n".join(f"line {n}" for n in range(300)))
    run = await registry.run("less long.txt", cwd=str(tmp_path), background=True)
    terminal = registry.get(run.terminal_id)
    found = await states.until(terminal, lambda s: s.state is T.FULL_SCREEN)
    assert (found.program, found.keys) == ("less", ("q",))
    report = await registry.environment_details(peek=True)
    assert "### State: `less` is open full screen: press q" in report.markdown
    with pytest.raises(UnknownKeyError, match="Entr"):
        await terminal.send_keys(["q", "Entr"])  # refused whole: less stays open
    assert not run.done
    await terminal.send_keys(list(found.keys or ()))
    await registry.wait(run, timeout=10)
    assert run.state is RunState.COMPLETED


async def test_the_report_says_what_a_terminal_waits_for(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    registry, states = reg
    run = await registry.run(
        f"{PY} -c 'import getpass; getpass.getpass(\"Password: \")'",
        cwd=str(tmp_path),
        task_id="t",
        background=True,
    )
    terminal = registry.get(run.terminal_id)
    await states.until(terminal, lambda s: s.state is T.WAITING_FOR_PASSWORD)
    # Waiting terminals are quiet: the report does not wait for them to cool down.
    report = await registry.environment_details("t", cooldown_timeout=30, peek=True)
    assert "### State: waiting for a password: `Password: `" in report.markdown
    await terminal.write("secret\r")
    await registry.wait(run, timeout=10)
    report = await registry.environment_details("t")
    assert "### State" not in report.markdown


async def test_a_stopped_background_job_is_reported(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    registry, states = reg
    run = await registry.run("cat &", cwd=str(tmp_path), task_id="t")
    terminal = registry.get(run.terminal_id)
    found = await states.until(terminal, lambda s: s.state is T.STOPPED_JOB)
    assert found.program == "cat"
    assert not terminal.busy
    report = await registry.environment_details("t")
    assert "### State: a background job is stopped on terminal input (`cat`, pid " in (
        report.markdown
    )
    since = states.mark(terminal)
    await registry.run("kill -9 %1; wait", terminal_id=terminal.id)
    await states.until(terminal, lambda s: s.state is T.IDLE, since=since)


@pytest.mark.parametrize(
    "command", ["sleep 0.5", "sleep 0.5 | cat", "for i in 1 2 3; do echo $i; sleep 0.2; done"]
)
async def test_never_waiting(
    reg: tuple[TerminalRegistry, States], tmp_path: Path, command: str
) -> None:
    registry, states = reg
    run = await registry.run(command, cwd=str(tmp_path))
    assert run.exit_code == 0
    assert not [s for s in states.seen.get(run.terminal_id, []) if s.waiting]


async def test_subprocess_terminals_are_running_or_idle_and_say_stdin_is_closed(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    registry, _ = reg
    run = await registry.run(
        f"{PY} -c 'input(\"name? \")'", cwd=str(tmp_path), provider="subprocess"
    )
    assert run.exit_code == 1  # EOFError at once, not a hang
    assert run.note is not None
    assert "stdin is at end-of-file" in run.note
    terminal = registry.get(run.terminal_id)
    assert terminal.wait_state.state is T.IDLE
    assert terminal.waiting_now() is None


async def test_the_same_question_asked_again_is_announced_again(
    reg: tuple[TerminalRegistry, States], tmp_path: Path
) -> None:
    # The second run starts before any look after the first one's answer: its equal
    # question must still be news (and never the first run's verdict, reported early).
    registry, states = reg
    terminal = await registry.get_or_create(str(tmp_path), "t")
    for _ in range(3):
        since = states.mark(terminal)
        run = await registry.run("read -p 'again? ' x", terminal_id=terminal.id, background=True)
        assert not terminal.wait_state.waiting
        found = await states.until(terminal, lambda s: s.waiting, since=since)
        assert found.prompt == "again? "
        await terminal.write("\r")
        await registry.wait(run, timeout=10)
        assert run.done
        assert not terminal.wait_state.waiting
