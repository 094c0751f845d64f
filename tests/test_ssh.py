"""The ssh provider against a real sshd (tests/sshd.py): a real OpenSSH client in a
real PTY, a real ControlMaster, a real remote bash -- nothing mocked.

Remote processes are found by the terminal's own tag (which the shell itself
reports) among the throwaway user's processes, never by name.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
from collections.abc import AsyncIterator
from pathlib import Path

import psutil
import pytest
import pytest_asyncio

from registry.errors import InvalidCwdError, SpawnError, UnknownTerminalError
from registry.output import strip_escape_sequences
from registry.registry import TerminalRegistry
from registry.run import RunState, TerminalRun
from registry.terminals.base import IntegrationState, Terminal
from registry.terminals.ssh import SshTerminal, parse_destination

from .conftest import SHELLS, started
from .sshd import PrivateSshd, sshd

__all__ = ["sshd"]


@pytest_asyncio.fixture
async def reg(sshd: PrivateSshd) -> AsyncIterator[TerminalRegistry]:
    registry = TerminalRegistry(sshd.settings())
    yield registry
    await registry.close()


async def remote(
    reg: TerminalRegistry, sshd: PrivateSshd, cwd: str = "~", task: str = "t"
) -> SshTerminal:
    terminal = await reg.get_or_create(cwd, task, "ssh", target=sshd.alias)
    assert isinstance(terminal, SshTerminal)
    return terminal


async def text(terminal: Terminal, command: str, timeout: float = 20) -> str:
    run = await asyncio.wait_for(terminal.run(command), timeout)
    assert run.state is RunState.COMPLETED, (run.state, run.note, run.output)
    return run.text().replace("\r\n", "\n").strip()


async def gone(procs: list[psutil.Process], timeout: float = 10) -> list[psutil.Process]:
    _gone, alive = await asyncio.to_thread(psutil.wait_procs, procs, timeout)
    return alive


# -- the basics, as local ---------------------------------------------------------------


async def test_exit_codes_output_and_identity(reg: TerminalRegistry, sshd: PrivateSshd) -> None:
    terminal = await remote(reg, sshd)
    assert terminal.provider == "ssh"
    assert terminal.host == f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert terminal.cwd == sshd.home  # "~" is the target's home, not ours
    assert terminal.display_cwd == f"ssh://{sshd.user}@127.0.0.1:{sshd.port}{sshd.home}"
    assert terminal.shell == "/bin/bash"
    assert await terminal.ready() is IntegrationState.RICH
    codes = {}
    for command in ("true", "false", "(exit 7)", "sh -c 'kill -TERM $$'"):
        run = await terminal.run(command)
        assert run.state is RunState.COMPLETED
        codes[command] = run.exit_code
    assert codes == {"true": 0, "false": 1, "(exit 7)": 7, "sh -c 'kill -TERM $$'": 143}
    assert await text(terminal, "id -un; echo $TERM $PAGER") == f"{sshd.user}\nxterm-256color cat"


async def test_multi_line_commands(reg: TerminalRegistry, sshd: PrivateSshd) -> None:
    terminal = await remote(reg, sshd)
    command = 'for i in 1 2 3; do\n  echo "line $i"\ndone\ncat <<\'EOF\'\na "b" $c\nEOF'
    assert await text(terminal, command) == 'line 1\nline 2\nline 3\na "b" $c'


@pytest.mark.parametrize("shell", SHELLS)
async def test_each_shell_on_the_host_as_locally(
    reg: TerminalRegistry, sshd: PrivateSshd, shell: str
) -> None:
    """The shell asked for gets only its own integration; boundaries, exit codes,
    the live cwd and multi-line input are the local provider's."""
    path = shutil.which(shell)
    assert path is not None
    terminal = await reg.get_or_create("~", "t", "ssh", shell=path, target=sshd.alias)
    assert isinstance(terminal, SshTerminal)
    assert (terminal.shell, await terminal.ready()) == (path, IntegrationState.RICH)
    run = await asyncio.wait_for(terminal.run("echo out; sh -c 'exit 5'"), 20)
    assert (run.state, run.exit_code, plain(run)) == (RunState.COMPLETED, 5, "out")
    run = await asyncio.wait_for(terminal.run("mkdir -p 'a b' && cd 'a b'"), 20)
    assert (run.exit_code, terminal.cwd) == (0, f"{sshd.home}/a b")
    run = await asyncio.wait_for(terminal.run("echo one\necho two"), 20)
    assert plain(run) == "one\ntwo"


def plain(run: TerminalRun) -> str:
    """What a person sees of a run's output (fish sets the title, as locally)."""
    return strip_escape_sequences(run.text()).replace("\r", "").strip()


async def test_live_cwd_with_odd_names_and_reuse_by_host_and_cwd(
    reg: TerminalRegistry, sshd: PrivateSshd
) -> None:
    odd = "odd dir;with 'quotes' & $dollar/ünï\\code"
    terminal = await remote(reg, sshd)
    quoted = "'" + odd.replace("'", "'\\''") + "'"
    run = await terminal.run(f"mkdir -p {quoted} && cd {quoted}")
    assert run.exit_code == 0
    where = f"{sshd.home}/{odd}"
    assert terminal.cwd == where
    assert run.cwd == where
    # Found again there, by the same task, under every spelling of that place.
    assert await reg.get_or_create(where, "t", "ssh", target=sshd.alias) is terminal
    assert await reg.get_or_create(f"~/{odd}/", "t", "ssh", target=sshd.alias) is terminal
    same_place = await reg.get_or_create(where, "t", "ssh", target=sshd.destination)
    assert same_place is terminal  # the alias and user@host:port resolve to one target
    # Tier 2: another task takes it once it is released; a busy one is never taken.
    reg.release("t")
    assert await reg.get_or_create(where, "u", "ssh", target=sshd.alias) is terminal
    other = await reg.get_or_create(where, "v", "ssh", target=sshd.alias)
    assert other is not terminal
    # Another directory on the target is another terminal.
    assert (await reg.get_or_create("/tmp", "t", "ssh", target=sshd.alias)).cwd == "/tmp"
    with pytest.raises(InvalidCwdError, match=r"does not exist on trssh"):
        await reg.get_or_create("/no/such/dir", "t", "ssh", target=sshd.alias)
    with pytest.raises(InvalidCwdError, match="is not a directory"):
        await reg.get_or_create("/etc/hostname", "t", "ssh", target=sshd.alias)


async def test_forged_markers_change_nothing(reg: TerminalRegistry, sshd: PrivateSshd) -> None:
    terminal = await remote(reg, sshd)
    forged = (
        r"printf '\033]633;D;0\007\033]633;P;Cwd=/etc\007\033]633;P;Remote=1;Cwd=/etc\007'; "
        "echo after; (exit 5)"
    )
    run = await terminal.run(forged)
    assert (run.exit_code, terminal.cwd) == (5, sshd.home)
    assert "after" in run.text()
    # A NonceWanted once the shell is up gets no answer: nothing is typed into it.
    asked = r"printf '\033]633;P;NonceWanted\007'; " 'read -t 1 answer; echo "[$answer]"'
    assert (await text(terminal, asked)).endswith("[]")


async def test_the_nonce_is_in_no_command_line_and_no_log(
    reg: TerminalRegistry, sshd: PrivateSshd
) -> None:
    terminal = await remote(reg, sshd)
    await text(terminal, "true")
    nonce = terminal._remote_nonce
    assert not [line for line in sshd.cmdlines() if nonce in line]
    log = Path(sshd.log).read_text(errors="replace")
    assert "exec /bin/sh -c" in log  # sshd logs the commands it runs ...
    assert nonce not in log  # ... and ours never held the nonce
    env = await text(terminal, "cat /proc/$$/environ | tr '\\0' '\\n'")
    assert nonce not in env


# -- ending what runs on the target -------------------------------------------------------


async def test_timeout_ends_the_remote_tree(reg: TerminalRegistry, sshd: PrivateSshd) -> None:
    terminal = await remote(reg, sshd)
    tag = await text(terminal, "echo $TERMINAL_REGISTRY_TERMINAL")
    # Everything in the job ignores SIGINT: only SIGTERM over the control channel ends
    # it; one child left the job's process group (and session), not its tree.
    job = (
        'sh -c \'trap "" INT; sleep 300 & '
        'setsid sh -c "echo es""caped; exec sleep 302" & sleep 301\''
    )
    run = await started(terminal, job, b"escaped", timeout=0.5)
    assert len(sshd.tagged(tag)) >= 5  # the shell, sh, three sleeps
    await asyncio.wait_for(run.wait(), 20)
    assert (run.state, run.exit_code) == (RunState.TIMED_OUT, 143)
    assert [p.pid for p in sshd.tagged(tag)] == [terminal.remote_pid]
    assert await text(terminal, "echo still here") == "still here"


async def test_a_raw_mode_program_that_ignores_sigint_is_ended(
    reg: TerminalRegistry, sshd: PrivateSshd
) -> None:
    terminal = await remote(reg, sshd)
    program = (
        "/usr/bin/python3 -c 'import signal, sys, tty; signal.signal(signal.SIGINT, "
        'signal.SIG_IGN); tty.setraw(0); print("rea" "dy", flush=True); sys.stdin.read()\''
    )
    run = await started(terminal, program, b"ready")
    await asyncio.wait_for(terminal.kill(), 20)
    assert (run.state, run.exit_code) == (RunState.CANCELLED, 143)
    assert await text(terminal, "echo back") == "back"


async def test_close_leaves_no_remote_process(reg: TerminalRegistry, sshd: PrivateSshd) -> None:
    terminal = await remote(reg, sshd)
    tag = await text(terminal, "echo $TERMINAL_REGISTRY_TERMINAL")
    scratch = await text(terminal, "echo $__tr_dir")
    assert scratch.startswith("/dev/shm/terminal-registry-remote-")
    assert oct(os.stat(scratch).st_mode & 0o777) == "0o700"
    # Each job says it is up through a FIFO the shell holds open (so no writer
    # blocks and no read ends early): one in the job's group, one in a session of
    # its own, one immune to SIGHUP, one to SIGHUP and SIGTERM.
    await text(
        terminal,
        'f=$(mktemp -u); mkfifo "$f"; exec 3<>"$f"\n'
        "sleep 300 &\n"
        'setsid sh -c "echo >$f; exec sleep 301" &\n'
        'nohup sh -c "echo >$f; exec sleep 302" >/dev/null 2>&1 &\n'
        "(trap '' HUP TERM; echo >\"$f\"; exec sleep 303) &\n"
        'read -u 3; read -u 3; read -u 3; exec 3>&-; rm -f "$f"',
    )
    assert len(sshd.tagged(tag)) >= 5
    await terminal.close()
    assert sshd.tagged(tag) == []
    assert not os.path.exists(scratch)
    assert terminal.id not in [t.id for t in reg.list()]


# -- connections that drop -----------------------------------------------------------------


async def test_the_client_killed_fails_the_run_and_the_next_run_reconnects(
    reg: TerminalRegistry, sshd: PrivateSshd
) -> None:
    terminal = await remote(reg, sshd)
    await text(terminal, "cd /tmp")
    tag = await text(terminal, "echo $TERMINAL_REGISTRY_TERMINAL")
    run = await started(terminal, "echo sleep''ing; sleep 300", b"sleeping")
    assert terminal.pid is not None
    os.kill(terminal.pid, signal.SIGKILL)  # the local ssh client
    await asyncio.wait_for(run.wait(), 20)
    assert run.state is RunState.FAILED
    assert run.note == f"connection to {sshd.user}@127.0.0.1:{sshd.port} lost"
    await asyncio.wait_for(terminal.wait_closed(), 20)
    assert sshd.tagged(tag) == []
    with pytest.raises(UnknownTerminalError):
        reg.get(terminal.id)
    # The next run on it opens a new terminal where it last stood, and says so.
    again = await asyncio.wait_for(reg.run("pwd", terminal_id=terminal.id, task_id="t"), 30)
    assert again.terminal_id != terminal.id
    assert again.exit_code == 0
    assert again.text().strip() == "/tmp"
    assert again.note is not None
    assert "was lost" in again.note
    assert f"terminal {terminal.id}" in again.note
    assert reg.task_of(again.terminal_id) == "t"


async def test_the_master_killed_loses_its_terminals_and_a_new_master_comes(
    reg: TerminalRegistry, sshd: PrivateSshd
) -> None:
    first = await remote(reg, sshd, task="a")
    second = await remote(reg, sshd, task="b")
    assert first.master_pid is not None
    assert first.master_pid == second.master_pid
    run = await started(first, "echo wait''ing; sleep 300", b"waiting")
    os.kill(first.master_pid, signal.SIGKILL)
    await asyncio.wait_for(run.wait(), 20)
    assert (run.state, run.note) == (
        RunState.FAILED,
        f"connection to {sshd.user}@127.0.0.1:{sshd.port} lost",
    )
    await asyncio.wait_for(second.wait_closed(), 20)
    assert second.lost is not None
    result = await asyncio.wait_for(
        reg.run("echo back", task_id="b", target=sshd.alias, provider="ssh"), 30
    )
    assert (result.exit_code, result.text().strip()) == (0, "back")
    assert result.note is not None
    assert "was lost" in result.note
    fresh = reg.get(result.terminal_id)
    assert isinstance(fresh, SshTerminal)
    assert fresh.master_pid not in (None, first.master_pid)


# -- many terminals, one connection ---------------------------------------------------------


async def test_ten_terminals_on_one_master_and_an_eleventh_beyond_max_sessions(
    sshd: PrivateSshd,
) -> None:
    # sshd allows 11 sessions a connection: ten terminals and the control session.
    reg = TerminalRegistry(sshd.settings(ssh_max_sessions=11))
    try:
        terminals = [await remote(reg, sshd, task=f"t{i}") for i in range(11)]
        masters = [t.master_pid for t in terminals]
        assert len(set(masters[:10])) == 1
        assert masters[10] not in (None, masters[0])
        tags = [text(t, "echo $TERMINAL_REGISTRY_TERMINAL") for t in terminals]
        outputs = await asyncio.gather(*tags)
        assert len(set(outputs)) == 11
        assert not [t for t in terminals if b"refused" in t.replay()]
        # The full master still has its control session: a job that ignores Ctrl-C ends.
        job = 'sh -c \'trap "" INT; echo u""p; sleep 300\''
        run = await started(terminals[0], job, b"up", timeout=0.3)
        await asyncio.wait_for(run.wait(), 20)
        assert (run.state, run.exit_code) == (RunState.TIMED_OUT, 143)
    finally:
        await reg.close()


async def test_more_terminals_than_the_server_allows_still_work(sshd: PrivateSshd) -> None:
    # We think sshd takes 20 sessions; it takes 11. The twelfth is refused, and its
    # client connects by itself; the master learns, and the next goes elsewhere.
    reg = TerminalRegistry(sshd.settings(ssh_max_sessions=20))
    try:
        terminals = [await remote(reg, sshd, task=f"t{i}") for i in range(13)]
        assert b"Session open refused by peer" in terminals[11].replay()
        assert await text(terminals[11], "echo works") == "works"
        assert terminals[12].master_pid != terminals[0].master_pid
        assert b"refused" not in terminals[12].replay()
    finally:
        await reg.close()


# -- errors ------------------------------------------------------------------------------


async def test_a_host_key_mismatch_is_a_clear_error_and_leaves_nothing(
    reg: TerminalRegistry, sshd: PrivateSshd
) -> None:
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    with pytest.raises(SpawnError) as caught:
        await reg.get_or_create("~", "t", "ssh", target=sshd.wrong_key_alias)
    message = str(caught.value)
    assert f"cannot connect to {sshd.user}@127.0.0.1:{sshd.port}" in message
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in message
    assert "Host key verification failed" in message
    assert reg.list() == []
    after = {p.pid for p in psutil.Process().children(recursive=True)}
    new = [psutil.Process(pid) for pid in after - before if psutil.pid_exists(pid)]
    assert await gone(new) == []


async def test_bad_hosts_are_refused_before_ssh_runs(reg: TerminalRegistry) -> None:
    for bad in ("-oProxyCommand=touch /tmp/x", "host name", "a:b:c", "http://host", ""):
        with pytest.raises(ValueError, match="invalid ssh host"):
            parse_destination(bad)
    assert parse_destination("me@box:2222") == "ssh://me@box:2222"
    assert parse_destination("alias") == "alias"
    with pytest.raises(ValueError, match="needs a host"):
        await reg.get_or_create("/tmp", "t", "ssh")
    with pytest.raises(ValueError, match="runs on this machine"):
        await reg.get_or_create("/tmp", "t", "subprocess", target="somewhere")
