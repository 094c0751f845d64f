"""Long commands and unterminated sequences, in real shells.

A command of any length runs, as itself, in the shell (not typed through a line
editor that chokes on it), and the terminal stays usable.  An OSC that a program
never terminates hides what a terminal emulator would hide -- and never the end of
the command.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from registry.output import strip_escape_sequences
from registry.run import RunState, TerminalRun
from registry.terminals.shell import ShellTerminal
from registry.terminals.subprocess import SubprocessTerminal

from .conftest import SHELLS, SpawnTerminal, fast_settings, next_run_end


def text(run: TerminalRun) -> str:
    return strip_escape_sequences(run.text()).replace("\r", "")


def leftovers(terminal: ShellTerminal | SubprocessTerminal) -> list[str]:
    assert terminal.scratch is not None
    return [name for name in os.listdir(terminal.scratch) if "command" in name]


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("size", [5_000, 70_000, 1_000_000])
async def test_a_long_command_runs_as_itself(
    spawn_terminal: SpawnTerminal, shell: str, size: int
) -> None:
    terminal: ShellTerminal = await spawn_terminal(shell)
    run = await asyncio.wait_for(terminal.run(f"echo {'x' * size} | wc -c"), 30)
    assert (run.state, run.exit_code, run.note) == (RunState.COMPLETED, 0, None)
    assert text(run).strip().endswith(str(size + 1))
    assert run.command_line.startswith("echo xxx")  # ours, not the line that sourced it
    assert leftovers(terminal) == []
    after = await asyncio.wait_for(terminal.run("echo next"), 30)
    assert (after.exit_code, text(after).strip()[-4:]) == (0, "next")


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_long_script_keeps_its_effects_in_the_shell(
    spawn_terminal: SpawnTerminal, shell: str, tmp_path: Path
) -> None:
    terminal: ShellTerminal = await spawn_terminal(shell)
    where = tmp_path / "there"
    where.mkdir()
    filler = "\n".join(f"true {'y' * 60} {n}" for n in range(200))  # ~13 KB of lines
    assign = "set -g LONG_MARK kept" if shell == "fish" else "LONG_MARK=kept"
    run = await asyncio.wait_for(terminal.run(f"cd {where}\n{filler}\n{assign}\nfalse"), 30)
    assert run.exit_code == 1  # the last command's status, as when typed
    assert run.cwd == str(where)
    after = await asyncio.wait_for(terminal.run("echo $LONG_MARK"), 30)
    assert text(after).strip().endswith("kept")


async def test_a_long_command_in_the_subprocess_provider(tmp_path: Path) -> None:
    terminal = await SubprocessTerminal.create(1, str(tmp_path), fast_settings())
    try:
        run = await asyncio.wait_for(terminal.run(f"echo {'x' * 1_000_000} | wc -c"), 30)
        assert (run.exit_code, text(run).strip()) == (0, "1000001")
        assert leftovers(terminal) == []
    finally:
        await terminal.close()


async def test_a_long_line_a_person_types_keeps_its_markers(
    spawn_terminal: SpawnTerminal,
) -> None:
    """Its E marker stays inside the parser's bound: no marker (nor nonce) as output.

    bash only: typing 20 KB through zsh's and fish's line editors takes a minute on a
    loaded machine, and their scripts cap E the same way."""
    terminal: ShellTerminal = await spawn_terminal("bash")
    ended = next_run_end(terminal)
    semicolons = ";" * 20_000  # each escaped as \x3b in E: 80 KB uncapped
    await terminal.write(f": '{semicolons}'; echo typed-end\r")
    run = await asyncio.wait_for(ended, 60)
    assert run.typed
    assert text(run).strip().endswith("typed-end")
    assert "633;" not in run.text()


@pytest.mark.parametrize("shell", SHELLS)
async def test_an_unterminated_osc_hides_what_a_terminal_hides(
    spawn_terminal: SpawnTerminal, shell: str
) -> None:
    """xterm, VTE, xterm.js, Alacritty and pyte keep an OSC open up to BEL, ESC, CAN or
    SUB: the text before the next ESC is not shown.  The command still ends with its
    own exit code, what follows the next ESC is output, and the next run is intact."""
    terminal: ShellTerminal = await spawn_terminal(shell)
    run = await asyncio.wait_for(
        terminal.run(
            r"printf '\033]633;D;0'; echo hidden; printf '\033[0m'; echo shown; sh -c 'exit 3'"
        ),
        30,
    )
    assert (run.state, run.exit_code) == (RunState.COMPLETED, 3)
    assert "hidden" not in text(run)
    assert text(run).strip().endswith("shown")
    # Never terminated at all: the shell's own markers end it; the run still ends.
    run = await asyncio.wait_for(terminal.run(r"printf '\033]633;A;x'; sh -c 'exit 4'"), 30)
    assert (run.state, run.exit_code) == (RunState.COMPLETED, 4)
    after = await asyncio.wait_for(terminal.run("echo next"), 30)
    assert (after.exit_code, text(after).strip()[-4:]) == (0, "next")
