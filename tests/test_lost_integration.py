"""A shell whose integration goes away in the middle of a run (issue 16, item 6):
the run ends, its exit code unknown and its note saying why, and the terminal goes
on without integration -- never a run that waits for ever, busy and still "rich".

A user may do every one of these; each used to leave the run busy for ever.  Two
things tell it: our prompt marker arriving while a command runs (its hooks were
removed, the prompt itself still carries it), and the shell itself reading the
terminal at its line editor, with another program exec'd in its place or its old
prompt on the cursor row.
"""

from __future__ import annotations

import asyncio
import shutil

import pytest

from registry.run import RunState
from registry.terminals.base import IntegrationState
from registry.waiting import TerminalState

from .conftest import SHELLS, SpawnTerminal

CASES = [
    ("bash", "PROMPT_COMMAND='history -a'", "prompt hooks were changed"),
    ("bash", "unset PROMPT_COMMAND", "prompt hooks were changed"),
    ("bash", "exec bash", "exec bash"),
    ("zsh", "precmd_functions=()", "prompt hooks were changed"),
    ("zsh", "exec zsh", "exec zsh"),
    ("fish", "exec fish", "exec fish"),
]


@pytest.mark.parametrize(("shell", "command", "why"), CASES, ids=[c[1] for c in CASES])
async def test_a_lost_integration_ends_the_run_and_the_terminal_goes_on(
    spawn_terminal: SpawnTerminal, shell: str, command: str, why: str
) -> None:
    if shell not in SHELLS:
        pytest.skip(f"{shell} is not installed")
    terminal = await spawn_terminal(shell)
    run = await asyncio.wait_for(terminal.run(command), 15)
    assert run.state is RunState.COMPLETED
    assert run.exit_code is None
    assert run.note is not None
    assert run.note.startswith("shell integration was lost: ")
    assert why in run.note
    assert terminal.integration is IntegrationState.NONE
    assert not terminal.busy
    if shell == "fish":
        # Strategy none cannot end fish's runs yet (its prompt line ends in a cursor
        # move the heuristic does not draw); the registry sends them to a subprocess.
        return
    # The terminal goes on, its runs ended by heuristics (quiet and a prompt).
    after = await asyncio.wait_for(terminal.run("echo after-loss"), 15)
    assert after.state is RunState.COMPLETED
    assert "after-loss" in after.text()
    assert after.note is not None
    assert "no shell integration" in after.note


@pytest.mark.parametrize(
    ("shell", "command"),
    [
        ("bash", "read -e -p 'name> ' x"),  # readline: the shell, raw mode, a "> " prompt
        ("fish", "read x"),  # fish's own line editor, prompt "read> "
        ("zsh", "vared -p 'name> ' -c x"),
    ],
)
async def test_the_shells_own_line_editor_reading_for_a_command_is_not_a_loss(
    spawn_terminal: SpawnTerminal, shell: str, command: str
) -> None:
    if shutil.which(shell) is None:
        pytest.skip(f"{shell} is not installed")
    terminal = await spawn_terminal(shell)
    run = await terminal.start(command)
    state = await asyncio.wait_for(terminal.until_waiting(), 10)
    assert state.state is TerminalState.WAITING_FOR_INPUT
    assert state.program == shell
    await terminal.write("ada\r")
    await asyncio.wait_for(run.wait(), 10)
    assert run.exit_code == 0
    assert run.note is None
    assert terminal.integration is IntegrationState.RICH
