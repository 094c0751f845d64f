"""Lines a shell refuses, and shells that repaint: the message is kept, the exit code
is the shell's, and the next command runs as itself -- never glued to the refused
line, never swallowed by a repaint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from registry.output import strip_escape_sequences
from registry.run import RunState
from registry.terminals.shell import ShellTerminal

from .conftest import SHELLS, SpawnTerminal

CLI = [sys.executable, "-m", "protocol.cli"]


def text(run: object) -> str:
    return strip_escape_sequences(run.text()).replace("\r", "")  # type: ignore[attr-defined]


async def test_a_bash_syntax_error_keeps_its_message_and_exit_code(
    spawn_terminal: SpawnTerminal,
) -> None:
    terminal: ShellTerminal = await spawn_terminal("bash")
    run = await terminal.run("if then fi")
    assert run.exit_code == 2
    assert "syntax error near unexpected token" in text(run)
    after = await terminal.run("echo next")
    assert (after.exit_code, text(after).strip()) == (0, "next")


@pytest.mark.skipif("fish" not in SHELLS, reason="fish is not installed")
@pytest.mark.parametrize("line", ["(exit 2)", "end"])
async def test_fish_survives_a_syntax_error(spawn_terminal: SpawnTerminal, line: str) -> None:
    terminal: ShellTerminal = await spawn_terminal("fish")
    refused = await terminal.run(line)
    assert refused.state is RunState.COMPLETED
    assert "fish:" in text(refused)  # its message
    for n in range(3):  # and later commands run, each as itself
        after = await terminal.run(f"echo after{n}")
        assert after.exit_code == 0
        assert text(after).strip().endswith(f"after{n}")


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_run_right_after_a_resize_is_itself(
    spawn_terminal: SpawnTerminal, shell: str
) -> None:
    terminal: ShellTerminal = await spawn_terminal(shell)
    for n in range(3):
        terminal.resize(100 + n, 30 + n)
        run = await terminal.run(f"echo sized{n}")
        assert run.exit_code == 0
        assert text(run).strip().endswith(f"sized{n}")
    assert terminal.last_run is not None
    assert terminal.last_run.command_line == "echo sized2"  # no hidden extra run


def test_the_cli_shows_the_refusal_and_fails(tmp_path: Path) -> None:
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.mkdir()
    env = {"XDG_RUNTIME_DIR": str(runtime), "HOME": str(home), "PATH": "/usr/bin:/bin"}
    env["SHELL"] = "/bin/bash"
    try:
        plain = subprocess.run(
            [*CLI, "run", "--cwd", str(tmp_path), "--", "if then fi"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert plain.returncode == 2
        assert "syntax error" in plain.stdout
        assert "exit code: 2" in plain.stderr
        # --json: this run's output only (not the earlier runs'), left unretrieved.
        subprocess.run(
            [*CLI, "run", "--cwd", str(tmp_path), "--", "echo earlier"],
            env=env,
            capture_output=True,
            timeout=60,
        )
        as_json = subprocess.run(
            [*CLI, "run", "--json", "--cwd", str(tmp_path), "--", "echo mine"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        data = json.loads(as_json.stdout)
        assert data["output"].strip() == "mine"
        report = subprocess.run(
            [*CLI, "env"], capture_output=True, text=True, env=env, timeout=60
        ).stdout
        assert "mine" in report
        assert "earlier" in report
    finally:
        subprocess.run([*CLI, "stop"], env=env, capture_output=True, timeout=60)
