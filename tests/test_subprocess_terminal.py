"""The plain subprocess provider: real child processes, no PTY."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from registry.errors import InvalidCwdError, TerminalBusyError, TerminalClosedError
from registry.processes import tagged_processes
from registry.run import RunState
from registry.terminals.subprocess import RUN_TAG_VARIABLE, SubprocessTerminal

from .conftest import fast_settings


@pytest_asyncio.fixture
async def sub(tmp_path: Path) -> AsyncIterator[SubprocessTerminal]:
    terminal = await SubprocessTerminal.create(1, str(tmp_path), fast_settings())
    yield terminal
    await terminal.close()


async def test_stdout_and_stderr_apart_and_merged(sub: SubprocessTerminal) -> None:
    run = await sub.run("echo out; echo err >&2; echo out2")
    assert run.stdout == b"out\nout2\n"
    assert run.stderr == b"err\n"
    assert sorted(run.output.splitlines()) == [b"err", b"out", b"out2"]
    assert run.exit_code == 0


@pytest.mark.parametrize(
    ("command", "code", "signal_name"),
    [
        ("false", 1, None),
        ("exit 7", 7, None),
        ("kill -TERM $$", 143, "SIGTERM"),
        ("echo (", 2, None),
    ],
)
async def test_exit_codes(
    sub: SubprocessTerminal, command: str, code: int, signal_name: str | None
) -> None:
    run = await sub.run(command)
    assert run.exit_code == code
    assert run.signal == signal_name
    assert run.state is RunState.COMPLETED


async def test_cd_and_exports_carry_over(sub: SubprocessTerminal, tmp_path: Path) -> None:
    (tmp_path / "sub dir").mkdir()
    run = await sub.run("cd 'sub dir' && export GREETING='hello world'")
    assert run.cwd == str(tmp_path / "sub dir")
    assert sub.cwd == str(tmp_path / "sub dir")
    run = await sub.run('pwd; echo "$GREETING"')
    assert run.stdout == f"{tmp_path / 'sub dir'}\nhello world\n".encode()
    await sub.run("unset GREETING; cd ..; exit 3")  # exit still reports where it stood
    run = await sub.run('echo "${GREETING-unset}"; pwd')
    assert run.stdout == f"unset\n{tmp_path}\n".encode()


async def test_per_run_env_does_not_persist(sub: SubprocessTerminal) -> None:
    run = await sub.run('echo "$ONLY_NOW"', env={"ONLY_NOW": "yes"})
    assert run.stdout == b"yes\n"
    run = await sub.run('echo "${ONLY_NOW-gone}"')
    assert run.stdout == b"gone\n"


async def test_agent_environment(tmp_path: Path) -> None:
    # The same environment as a shell terminal's (children.agent_environment), for a
    # terminal without a PTY: no pager, no stale window size, none of our own variables.
    env = {"COLUMNS": "80", "TERMINAL_REGISTRY_NONCE": "leaked", "PAGER": "less"}
    sub = await SubprocessTerminal.create(1, str(tmp_path), fast_settings(), env=env)
    try:
        run = await sub.run(
            'echo "$PAGER $GIT_PAGER $TERM ${COLUMNS-unset} ${TERMINAL_REGISTRY_NONCE-unset}"'
        )
        assert run.stdout == b"cat cat dumb unset unset\n"
    finally:
        await sub.close()


async def test_interactive_command_fails_fast(sub: SubprocessTerminal) -> None:
    run = await sub.run('read answer; echo "read exited $?"', timeout=10)
    assert run.stdout == b"read exited 1\n"
    run = await sub.run("python3 -c 'input()'", timeout=10)
    assert run.exit_code == 1
    assert b"EOFError" in (run.stderr or b"")
    assert "stdin" in (run.note or "")


async def test_timeout_kills_the_tree_including_setsid_grandchild(
    sub: SubprocessTerminal,
) -> None:
    run = await sub.start("setsid sleep 300 & (setsid sleep 301 &); sleep 302", timeout=1)
    await run.wait()
    assert run.state is RunState.TIMED_OUT
    assert run.exit_code == 143
    tag = f"{sub._tag}.{run.id}"
    assert tagged_processes(RUN_TAG_VARIABLE, tag) == []


async def test_background_child_does_not_hold_the_run(sub: SubprocessTerminal) -> None:
    run = await sub.run("sleep 30 & echo started", timeout=10)
    assert run.state is RunState.COMPLETED
    assert run.stdout == b"started\n"
    assert run.duration < 10
    await sub.close()
    assert tagged_processes("TERMINAL_REGISTRY_TERMINAL", sub._tag) == []


async def test_kill_cancels(sub: SubprocessTerminal) -> None:
    run = await sub.start("echo begun; sleep 100")
    assert sub.busy
    with pytest.raises(TerminalBusyError):
        await sub.start("true")
    await sub.kill()
    assert run.state is RunState.CANCELLED
    assert not sub.busy
    assert (await sub.run("echo again")).stdout == b"again\n"


async def test_no_stdin_to_write_to(sub: SubprocessTerminal) -> None:
    with pytest.raises(TerminalClosedError, match="no stdin"):
        await sub.write("x")


async def test_invalid_cwd(tmp_path: Path) -> None:
    with pytest.raises(InvalidCwdError):
        await SubprocessTerminal.create(1, str(tmp_path / "missing"))


async def test_sigint_ignored_by_the_server_is_not_inherited(sub: SubprocessTerminal) -> None:
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run = await sub.start("trap - INT; kill -INT $$; echo survived")
    finally:
        signal.signal(signal.SIGINT, previous)
    await run.wait()
    assert run.exit_code == 130


async def test_pid_is_the_running_command(sub: SubprocessTerminal) -> None:
    run = await sub.start("sleep 5")
    pid = sub.pid
    assert pid is not None
    assert psutil.Process(pid).is_running()
    await sub.kill()
    await asyncio.wait_for(run.wait(), 5)
    assert sub.pid is None
    assert os.getpid() != pid
