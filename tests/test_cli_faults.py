"""The CLI against odd set-ups and another local user: clear errors, nothing followed
or signalled that is not ours."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from .test_cli import CLI, cli

NOBODY = 65534


@pytest.fixture
def no_runtime_dir(tmp_path: Path) -> Iterator[dict[str, str]]:
    """No XDG_RUNTIME_DIR: the default socket lives under $TMPDIR (a private temp dir)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    tmp.chmod(0o1777)
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("TERMINAL_REGISTRY_SOCKET", "XDG_RUNTIME_DIR")
    }
    env["TMPDIR"] = str(tmp)
    yield env
    cli("stop", env=env)


def _default_dir(env: dict[str, str]) -> Path:
    return Path(env["TMPDIR"]) / f"terminal-registry-{os.getuid()}"


needs_root = pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")


@needs_root
def test_a_directory_another_user_made_is_refused(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    planted = _default_dir(no_runtime_dir)
    planted.mkdir(mode=0o700)
    os.chown(planted, NOBODY, NOBODY)
    result = cli("list", env=no_runtime_dir)
    assert result.returncode == 2
    assert str(planted) in result.stderr
    assert "another user" in result.stderr
    assert "Traceback" not in result.stderr
    assert not (planted / "server.sock").exists()


def test_a_symlinked_or_open_directory_is_refused(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    planted = _default_dir(no_runtime_dir)
    planted.symlink_to(elsewhere)
    result = cli("list", env=no_runtime_dir)
    assert result.returncode == 2
    assert "symbolic link" in result.stderr
    assert list(elsewhere.iterdir()) == []
    planted.unlink()
    planted.mkdir(mode=0o775)
    planted.chmod(0o775)  # others in the group could have put something in it
    result = cli("list", env=no_runtime_dir)
    assert result.returncode == 2
    assert "0700" in result.stderr


def test_the_server_first_leaves_the_cli_a_private_directory(
    no_runtime_dir: dict[str, str],
) -> None:
    # An editor's server starts before any CLI call and makes its state directory
    # (.../terminal-registry-<uid>/servers); the parent it made on the way used to be
    # 0755, and every CLI call after it refused that parent as "open to other users".
    served = subprocess.run(
        [*CLI, "serve", "--stdio"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        env=no_runtime_dir,
    )
    assert served.returncode == 0, served.stderr
    assert stat.S_IMODE(_default_dir(no_runtime_dir).stat().st_mode) == 0o700
    result = cli("list", env=no_runtime_dir)
    assert result.returncode == 0, result.stderr


def test_an_open_directory_of_ours_nobody_else_can_write_is_closed_and_used(
    no_runtime_dir: dict[str, str],
) -> None:
    directory = _default_dir(no_runtime_dir)
    directory.mkdir(mode=0o755)
    directory.chmod(0o755)  # as an earlier build left it
    result = cli("list", env=no_runtime_dir)
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_the_log_is_never_followed_through_a_symlink(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    victim = tmp_path / "victim"
    victim.write_text("untouched\n")
    directory = _default_dir(no_runtime_dir)
    directory.mkdir(mode=0o700)
    (directory / "server.log").symlink_to(victim)
    result = cli("list", env=no_runtime_dir)
    assert victim.read_text() == "untouched\n"
    assert result.returncode == 2
    assert "server.log" in result.stderr


def test_stop_signals_only_our_own_server(no_runtime_dir: dict[str, str], tmp_path: Path) -> None:
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        directory = _default_dir(no_runtime_dir)
        directory.mkdir(mode=0o700)
        (directory / "server.sock.pid").write_text(str(bystander.pid))
        result = cli("stop", env=no_runtime_dir)
        assert result.returncode == 1
        assert "not a terminal-registry server" in result.stdout + result.stderr
        assert bystander.poll() is None  # still alive
    finally:
        bystander.kill()
        bystander.wait()
    # A real server started after that stale file is found and stopped.
    assert cli("list", env=no_runtime_dir).returncode == 0
    stopped = cli("stop", "--json", env=no_runtime_dir)
    assert stopped.returncode == 0
    assert json.loads(stopped.stdout)["stopped"] is True


def test_unreachable_socket_names_the_path_and_a_remedy(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "none.sock"
    result = cli("list", "--socket", str(path), env=no_runtime_dir)
    assert result.returncode == 2
    assert str(path) in result.stderr
    assert "serve --socket" in result.stderr
    as_json = cli("list", "--json", "--socket", str(path), env=no_runtime_dir)
    assert as_json.returncode == 2
    error = json.loads(as_json.stdout)["error"]
    assert str(path) in error["message"]


def test_an_overlong_socket_path_is_a_clear_error(no_runtime_dir: dict[str, str]) -> None:
    env = {**no_runtime_dir, "TERMINAL_REGISTRY_SOCKET": "/tmp/" + "x" * 200 + "/s.sock"}
    result = cli("list", env=env)
    assert result.returncode == 2
    assert "too long" in result.stderr
    assert "Traceback" not in result.stderr


def test_the_socket_variable_gets_a_server_started_on_demand(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    directory = tmp_path / "mine"
    directory.mkdir(mode=0o700)
    env = {**no_runtime_dir, "TERMINAL_REGISTRY_SOCKET": str(directory / "s.sock")}
    try:
        first = cli("list", env=env)
        assert first.returncode == 0, first.stderr
        assert "started a background server" in first.stderr
        assert cli("stop", env=env).returncode == 0
        again = cli("list", env=env)
        assert again.returncode == 0, again.stderr
    finally:
        cli("stop", env=env)


def test_errors_under_json_are_json(no_runtime_dir: dict[str, str]) -> None:
    result = cli("close", "--json", "987654", env=no_runtime_dir)
    assert result.returncode == 2
    error = json.loads(result.stdout)["error"]
    assert error["code"] == -32001
    assert "987654" in error["message"]


def test_kill_on_an_idle_terminal_says_so(no_runtime_dir: dict[str, str], tmp_path: Path) -> None:
    cli("run", "--cwd", str(tmp_path), "--", "true", env=no_runtime_dir)
    terminal_id = json.loads(cli("list", "--json", env=no_runtime_dir).stdout)[0]["id"]
    result = cli("kill", str(terminal_id), env=no_runtime_dir)
    assert result.returncode == 0
    assert "killed" not in result.stdout
    assert "no command" in result.stdout


def test_list_has_a_header_and_aligned_columns(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    cli(
        "run",
        "--task",
        "a-long-task-name",
        "--cwd",
        str(tmp_path),
        "--",
        "true",
        env=no_runtime_dir,
    )
    cli("run", "--task", "b", "--cwd", "/", "--", "true", env=no_runtime_dir)
    lines = cli("list", env=no_runtime_dir).stdout.splitlines()
    assert lines[0].split()[:3] == ["ID", "TASK", "PROVIDER"]
    rows = zip(lines[1:], [str(tmp_path), "/"], strict=True)
    cwd_column = {line.index(path) for line, path in rows}
    assert len(cwd_column) == 1  # the cwd column starts at the same place in every row


def test_env_without_a_task_peeks(no_runtime_dir: dict[str, str], tmp_path: Path) -> None:
    env = no_runtime_dir
    cli("run", "--task", "agent", "--cwd", str(tmp_path), "--", "echo for-the-agent", env=env)
    # A person looking (no --task) takes nothing from the agent ...
    assert "for-the-agent" in cli("env", env=env).stdout
    assert "for-the-agent" in cli("env", env=env).stdout
    # ... which still gets its output, once.
    assert "for-the-agent" in cli("env", "--task", "agent", env=env).stdout
    assert "for-the-agent" not in cli("env", "--task", "agent", env=env).stdout


def test_parallel_first_calls_share_one_background_server(
    no_runtime_dir: dict[str, str],
) -> None:
    # An agent's parallel tool calls, none of which finds a server: one starts it,
    # the others use it (they used to start their own, lose the socket to the first
    # and exit 2 with "the background server did not start").
    calls = [
        subprocess.Popen(
            [*CLI, "list"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=no_runtime_dir,
        )
        for _ in range(3)
    ]
    try:
        outcomes = [(call.wait(120), call.stderr.read()) for call in calls]  # type: ignore[union-attr]
    finally:
        for call in calls:
            call.kill()
            call.wait()
        cli("stop", env=no_runtime_dir)
    assert [code for code, _ in outcomes] == [0, 0, 0], outcomes
    assert sum("started a background server" in err for _, err in outcomes) == 1, outcomes


@pytest.mark.parametrize("command", [["serve", "--stdio"], ["mcp"]])
def test_an_unknown_log_level_is_a_usage_error(
    no_runtime_dir: dict[str, str], command: list[str]
) -> None:
    refused = cli(*command, "--log-level", "BOGUS", env=no_runtime_dir)
    assert refused.returncode == 2
    assert "Traceback" not in refused.stderr
    assert "--log-level" in refused.stderr
    assert "'BOGUS'" in refused.stderr
    assert f"usage: terminal-registry {command[0]}" in refused.stderr


def test_a_log_level_in_lower_case_is_taken(no_runtime_dir: dict[str, str]) -> None:
    # stdin at its end: the stdio session ends at once, cleanly.
    served = cli("serve", "--stdio", "--log-level", "info", env=no_runtime_dir)
    assert served.returncode == 0, served.stderr


def test_a_log_path_that_cannot_be_read_is_a_clear_error(
    no_runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    unreadable = cli("log", "--path", str(tmp_path), env=no_runtime_dir)
    assert unreadable.returncode == 2
    assert "Traceback" not in unreadable.stderr
    assert f"cannot read the audit log {tmp_path}" in unreadable.stderr
    as_json = cli("log", "--json", "--path", str(tmp_path), env=no_runtime_dir)
    assert as_json.returncode == 2
    assert str(tmp_path) in json.loads(as_json.stdout)["error"]["message"]


@pytest.mark.parametrize(
    ("words", "command", "named"),
    [
        (["run", "--bogus", "--", "echo"], "run", "--bogus"),
        (["--json", "run", "--bogus", "--", "echo"], "run", "--bogus"),
        (["run"], "run", "command"),
        (["list", "extra"], "list", "extra"),
        (["--socket", "/nowhere", "log"], "log", "--socket"),
    ],
)
def test_a_commands_error_prints_that_commands_usage(
    no_runtime_dir: dict[str, str], words: list[str], command: str, named: str
) -> None:
    refused = cli(*words, env=no_runtime_dir)
    assert refused.returncode == 2
    assert refused.stderr.startswith(f"usage: terminal-registry {command} ")
    assert f"terminal-registry {command}: error:" in refused.stderr
    assert named in refused.stderr.splitlines()[-1]


def test_an_option_before_any_command_is_the_top_levels_error(
    no_runtime_dir: dict[str, str],
) -> None:
    refused = cli("--bogus", "list", env=no_runtime_dir)
    assert refused.returncode == 2
    assert "terminal-registry: error:" in refused.stderr


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["run", "--timeout", "-5", "--", "true"], "--timeout must be >= 0, got -5"),
        (["run", "--timeout", "1.5e9", "--", "true"], "at most 2147483.647, got 1500000000"),
        (["run", "--timeout", "nan", "--", "true"], "--timeout must be a number of seconds"),
        (["run", "--wall-seconds", "-1", "--", "true"], "--wall-seconds must be >= 0, got -1"),
        (["run", "--memory-mb", "-2", "--", "true"], "--memory-mb must be >= 0, got -2"),
        (["env", "--cooldown", "-1"], "--cooldown must be >= 0, got -1"),
    ],
)
def test_a_bad_number_is_named_as_the_user_gave_it(
    no_runtime_dir: dict[str, str], words: list[str], said: str
) -> None:
    # Seconds on the command line are milliseconds on the wire: the error must not
    # quote the wire's field and value (timeoutMs ... got -5000).
    refused = cli(*words, env=no_runtime_dir)
    assert refused.returncode == 2
    assert said in refused.stderr
    assert "Ms" not in refused.stderr


def test_log_without_a_named_audit_log_says_how_to_get_one(
    no_runtime_dir: dict[str, str],
) -> None:
    # It used to read ~/.local/state/terminal-registry/audit.jsonl, which nothing
    # writes, and say "(no audit log at ...)" with exit 0.
    env = {k: v for k, v in no_runtime_dir.items() if k != "TERMINAL_REGISTRY_AUDIT_LOG"}
    result = cli("log", env=env)
    assert result.returncode == 2
    assert "--audit-log" in result.stderr
    assert "--path" in result.stderr
