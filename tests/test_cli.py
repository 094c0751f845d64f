"""The terminal-registry CLI, as a user runs it: real processes, real server."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

CLI = [sys.executable, "-m", "protocol.cli"]


def cli(
    *args: str, env: dict[str, str] | None = None, cwd: str | None = None
) -> subprocess.CompletedProcess[str]:
    # stdin is not a terminal (a CLI run that meets a question exits instead of
    # forwarding keys), whatever pytest was started from.
    return subprocess.run(
        [*CLI, *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=cwd,
    )


@pytest.fixture
def runtime_dir(tmp_path: Path) -> Iterator[dict[str, str]]:
    """An environment whose default socket lives in a private temp dir; stopped after."""
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_REGISTRY_SOCKET"}
    env["XDG_RUNTIME_DIR"] = str(runtime)
    yield env
    cli("stop", env=env)


def test_run_env_list_and_stop_through_the_background_server(
    runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    first = cli(
        "run",
        "--task",
        "t",
        "--cwd",
        str(tmp_path),
        "--",
        "mkdir -p d && cd d && echo made",
        env=runtime_dir,
    )
    assert first.returncode == 0, first.stderr
    assert first.stdout == "made\n"  # (text mode turned the terminal's CRLF into LF)
    assert "started a background server" in first.stderr
    assert f"cwd: {tmp_path}/d" in first.stderr
    assert "exit code: 0" in first.stderr
    # The terminal persisted: a second call reuses it, and says nothing about servers.
    second = cli(
        "run", "--task", "t", "--cwd", f"{tmp_path}/d", "--", "pwd; (exit 7)", env=runtime_dir
    )
    assert second.returncode == 7
    assert "started a background server" not in second.stderr
    env = cli("env", "--task", "t", env=runtime_dir)
    assert env.returncode == 0
    assert "Command: `mkdir -p d && cd d && echo made` (exit code 0)\n```\nmade" in env.stdout
    listed = json.loads(cli("list", "--json", env=runtime_dir).stdout)
    assert len(listed) == 1
    assert listed[0]["taskId"] == "t"
    stop = cli("stop", env=runtime_dir)
    assert stop.returncode == 0
    assert "stopped" in stop.stdout
    assert cli("stop", env=runtime_dir).returncode == 1  # nothing left to stop


def test_json_output_and_exit_codes(runtime_dir: dict[str, str], tmp_path: Path) -> None:
    result = cli(
        "run",
        "--json",
        "--cwd",
        str(tmp_path),
        "--",
        "echo out; bash -c 'kill -TERM $$'",
        env=runtime_dir,
    )
    assert result.returncode == 143
    data = json.loads(result.stdout)
    assert data["exitCode"] == 143
    assert data["signal"] == "SIGTERM"
    assert data["cwd"] == str(tmp_path)
    assert data["output"].startswith("out\n")


def test_kill_and_close_by_id(runtime_dir: dict[str, str], tmp_path: Path) -> None:
    cli("run", "--cwd", str(tmp_path), "--", "true", env=runtime_dir)
    terminal_id = json.loads(cli("list", "--json", env=runtime_dir).stdout)[0]["id"]
    assert cli("kill", str(terminal_id), env=runtime_dir).returncode == 0
    closed = cli("close", "--json", str(terminal_id), env=runtime_dir)
    assert json.loads(closed.stdout) == {"terminalId": terminal_id, "close": True}
    missing = cli("close", str(terminal_id), env=runtime_dir)
    assert missing.returncode == 2
    assert "unknown terminal" in missing.stderr


def test_explicit_socket_and_bad_input(runtime_dir: dict[str, str], tmp_path: Path) -> None:
    nowhere = cli("list", "--socket", str(tmp_path / "none.sock"), env=runtime_dir)
    assert nowhere.returncode == 2
    assert "cannot reach the server" in nowhere.stderr
    bad_cwd = cli("run", "--cwd", str(tmp_path / "missing"), "--", "true", env=runtime_dir)
    assert bad_cwd.returncode == 2
    assert "does not exist" in bad_cwd.stderr
    assert cli("run", env=runtime_dir).returncode == 2  # no command


def test_the_shared_options_may_come_before_the_command(
    runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    socket = str(tmp_path / "none.sock")
    for words in (["--json", "--socket", socket, "list"], [f"--socket={socket}", "--json", "list"]):
        nowhere = cli(*words, env=runtime_dir)
        assert nowhere.returncode == 2
        error = json.loads(nowhere.stdout)["error"]
        assert f"cannot reach the server at {socket}" in error["message"]
    # An option the command does not take is still refused by name.
    refused = cli("--socket", socket, "log", env=runtime_dir)
    assert refused.returncode == 2
    assert "--socket" in refused.stderr


def _raw_stdout(*args: str, env: dict[str, str], cwd: str) -> bytes:
    """The CLI's stdout as bytes, to a pipe (text mode would hide a CR)."""
    done = subprocess.run(
        [*CLI, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=120, env=env, cwd=cwd
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("shell", ["/usr/bin/bash", "/usr/bin/fish"])
def test_output_to_a_file_or_pipe_is_the_commands_text(
    runtime_dir: dict[str, str], tmp_path: Path, shell: str
) -> None:
    # The terminal's control sequences and CR LF are the PTY's, not the program's:
    # a file gets what the terminal showed, as text (live, line by line).
    if not os.path.exists(shell):
        pytest.skip(f"{shell} is not installed")
    env = {**runtime_dir, "SHELL": shell}
    assert _raw_stdout("run", "--", "echo hi", env=env, cwd=str(tmp_path)) == b"hi\n"
    drawn = "printf '\\033[31mred\\033[0m\\n10%%\\r100%%\\nno end'"
    out = _raw_stdout("run", "--", drawn, env=env, cwd=str(tmp_path))
    assert out == b"red\n100%\nno end"


@pytest.mark.parametrize("command", [[], ["--"], ["--", ""], ["--", "  "], ["--", "", " "]])
def test_an_empty_or_blank_command_is_refused(
    runtime_dir: dict[str, str], tmp_path: Path, command: list[str]
) -> None:
    refused = cli("run", *command, env=runtime_dir, cwd=str(tmp_path))
    assert refused.returncode == 2
    assert "command" in refused.stderr
    assert "usage: terminal-registry run" in refused.stderr
    assert "exit code" not in refused.stderr  # nothing ran


def test_timeout_zero_is_no_timeout(runtime_dir: dict[str, str], tmp_path: Path) -> None:
    # As for the limits (and coreutils' timeout), 0 disables it; on the wire
    # timeoutMs 0 keeps its meaning (end at once), so the CLI does not send it.
    done = cli("run", "--timeout", "0", "--", "echo x", env=runtime_dir, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "x\n"
    assert "state: completed" in done.stderr


def test_a_subprocess_terminal_is_not_said_to_have_shell_integration(
    runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    # sh gets no integration: the run falls back to a subprocess terminal, which has
    # no shell to integrate with; the footer must not call it "rich".
    env = {**runtime_dir, "SHELL": "/bin/sh"}
    done = cli("run", "--", "echo hi", env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hi\n"
    footer = {
        line.split(": ", 1)[0]: line.split(": ", 1)[1]
        for line in done.stderr.replace("[terminal-registry] ", "").splitlines()
        if ": " in line
    }
    listed = {t["id"]: t for t in json.loads(cli("list", "--json", env=env).stdout)}
    shell = next(i for i, t in listed.items() if t["provider"] == "shell")
    fallback = next(i for i, t in listed.items() if t["provider"] == "subprocess")
    assert footer["terminal"] == f"{fallback} (subprocess, /bin/sh, no shell integration)"
    assert f"terminal {shell} (/bin/sh) has no shell integration" in footer["note"]
    assert f"ran in subprocess terminal {fallback}" in footer["note"]
    table = cli("list", env=env).stdout.splitlines()
    assert "rich" not in next(row for row in table if row.startswith(f"{fallback} "))
