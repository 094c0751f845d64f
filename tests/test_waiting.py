"""Wait-states of real programs in a real PTY: a plain bash, real programs, the real watcher.

Each test types a command into ``bash --norc --noprofile`` (tests/waitpty.py) and
awaits the watcher's state change -- a bounded await on the callback, never a sleep.
The negatives run to their end (or until the watcher has looked after long quiet)
and assert no waiting state was ever reported.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from registry.waiting import Certainty, TerminalProbe, TerminalState, WaitState
from registry.waiting.sample import Wait

from .waitpty import PtyShell

T = TerminalState
WAITING = {T.WAITING_FOR_INPUT, T.WAITING_FOR_PASSWORD, T.FULL_SCREEN}
PY = sys.executable
PYNAME = Path(PY).name[:15]


@pytest_asyncio.fixture
async def shell(tmp_path: Path) -> AsyncIterator[PtyShell]:
    sh = PtyShell(str(tmp_path))
    try:
        await sh.ready()
        yield sh
    finally:
        sh.close()


async def answer_and_finish(sh: PtyShell, data: bytes) -> None:
    """Answer, then the command ends and the terminal is idle again."""
    sh.write(data)
    await sh.until_prompt()
    await sh.until_state(T.IDLE)


@pytest.mark.parametrize(
    ("command", "state", "prompt", "program", "answer"),
    [
        ('read -p "continue? " x', T.WAITING_FOR_INPUT, "continue? ", "bash", b"y\r"),
        (f"{PY} -c 'input(\"name? \")'", T.WAITING_FOR_INPUT, "name? ", PYNAME, b"x\r"),
        (f"{PY} -q", T.WAITING_FOR_INPUT, ">>> ", PYNAME, b"exit()\r"),
        ("cat", T.WAITING_FOR_INPUT, "", "cat", b"\x04"),
        ("( read x )", T.WAITING_FOR_INPUT, "", "bash", b"\r"),
        ("read x | cat", T.WAITING_FOR_INPUT, "", "bash", b"\r"),
        (
            f"{PY} -c 'import getpass; getpass.getpass()'",
            T.WAITING_FOR_PASSWORD,
            "Password: ",
            PYNAME,
            b"secret\r",
        ),
        (
            # apt's question: lines of output, then a buffered stdin read.
            f'{PY} -c \'import sys; print("The following NEW packages will be installed:");'
            ' print("  foo"); sys.stdout.write("Do you want to continue? [Y/n] ");'
            " sys.stdout.flush();"
            " sys.stdin.readline()'",
            T.WAITING_FOR_INPUT,
            "Do you want to continue? [Y/n] ",
            PYNAME,
            b"y\r",
        ),
    ],
    ids=["read-p", "input", "repl", "cat", "subshell", "pipeline", "getpass", "apt-style"],
)
async def test_waiting_for_input(
    shell: PtyShell, command: str, state: T, prompt: str, program: str, answer: bytes
) -> None:
    shell.submit(command)
    found = await shell.until(lambda s: s.state is not T.RUNNING and s.state is not T.IDLE)
    assert (found.state, found.prompt, found.program) == (state, prompt, program)
    assert found.certainty is Certainty.CERTAIN
    await answer_and_finish(shell, answer)


async def test_answering_turns_waiting_back_into_running(shell: PtyShell) -> None:
    shell.submit("read -p 'first? ' a; sleep 0.3; read -p 'second? ' b")
    first = await shell.until_state(T.WAITING_FOR_INPUT)
    assert first.prompt == "first? "
    shell.write(b"1\r")
    await shell.until_state(T.RUNNING)
    second = await shell.until(lambda s: s.waiting and s.prompt == "second? ")
    assert second.state is T.WAITING_FOR_INPUT
    await answer_and_finish(shell, b"2\r")


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
async def test_node_readline(shell: PtyShell) -> None:
    script = (
        "const rl = require('readline')"
        ".createInterface({input: process.stdin, output: process.stdout});"
        " rl.question('package name: ', a => { console.log(a); rl.close(); });"
    )
    shell.submit(f'node -e "{script}"')
    found = await shell.until_state(T.WAITING_FOR_INPUT, timeout=15)
    assert found.prompt == "package name: "
    assert found.program == "node"
    await answer_and_finish(shell, b"demo\r")


@pytest.mark.skipif(shutil.which("less") is None, reason="less is not installed")
async def test_less_is_full_screen_and_q_leaves(shell: PtyShell, tmp_path: Path) -> None:
    (tmp_path / "long.txt").write_text("\n".join(f"line {n}" for n in range(200)))
    shell.submit("LESS= less long.txt")
    found = await shell.until_state(T.FULL_SCREEN)
    assert found.program == "less"
    assert found.keys == ("q",)
    assert shell.screen.alternate_screen
    shell.send_keys(list(found.keys))
    await shell.until_prompt()
    await shell.until_state(T.IDLE)


@pytest.mark.parametrize("editor", ["vim", "vi"])
async def test_vim_is_full_screen_and_its_keys_leave(
    shell: PtyShell, tmp_path: Path, editor: str
) -> None:
    if shutil.which(editor) is None:
        pytest.skip(f"{editor} is not installed")
    shell.submit(f"{editor} -u NONE -N notes.txt")
    found = await shell.until_state(T.FULL_SCREEN)
    assert found.program is not None
    assert found.program.startswith("vi")
    assert found.keys == ("Escape", ":qa!", "Enter")
    shell.send_keys(["i", "typed", *found.keys])
    await shell.until_prompt()
    await shell.until_state(T.IDLE)
    assert not (tmp_path / "notes.txt").exists()  # :qa! left without writing


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A repository whose one commit's log is longer than the screen."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    message = "subject\n\n" + "\n".join(f"body line {n}" for n in range(60))
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", message], check=True)
    return repo


@pytest.mark.skipif(
    shutil.which("git") is None or shutil.which("less") is None, reason="needs git and less"
)
async def test_git_log_pager_without_the_alternate_screen(git_repo: Path) -> None:
    sh = PtyShell(str(git_repo), env={"LESS": "FRX"})
    try:
        await sh.ready()
        sh.submit("git log")
        found = await sh.until_state(T.FULL_SCREEN)
        assert found.program == "less"
        assert not sh.screen.alternate_screen  # LESS=FRX: -X keeps the normal screen
        assert sh.screen.application_keypad
        sh.send_keys(["q"])
        await sh.until_prompt()
        await sh.until_state(T.IDLE)
    finally:
        sh.close()


async def test_a_background_reader_is_a_stopped_job(shell: PtyShell) -> None:
    shell.submit("cat &")
    await shell.until_prompt()
    found = await shell.until_state(T.STOPPED_JOB)
    assert found.program == "cat"
    assert "stopped reading the terminal" in found.reason
    shell.submit("kill -9 $!; wait $!")
    await shell.until_prompt()
    await shell.until_state(T.IDLE)


async def test_a_leftover_alternate_screen_belongs_to_nobody(shell: PtyShell) -> None:
    # A program that crashed with the alternate screen on must not make the next
    # command look full screen: only the group that switched it on counts.
    shell.submit("printf '\\033[?1049h'")
    await shell.until_prompt()
    assert shell.screen.alternate_screen
    shell.submit("cat")
    found = await shell.until(lambda s: s.waiting)
    assert found.state is T.WAITING_FOR_INPUT
    await answer_and_finish(shell, b"\x04")


@pytest.mark.skipif(shutil.which("script") is None, reason="script (util-linux) is missing")
async def test_a_pty_relay_is_followed_inside(shell: PtyShell) -> None:
    shell.submit("script -qc 'read -p \"inner? \" x' /dev/null")
    found = await shell.until_state(T.WAITING_FOR_INPUT)
    assert found.prompt == "inner? "
    assert "relays a pty" in found.reason
    await answer_and_finish(shell, b"\r")


async def test_a_proxy_is_possibly_waiting_after_long_quiet(shell: PtyShell) -> None:
    # Like ssh: waits on the terminal and a socket at once; only the screen can say.
    program = (
        "import select, socket, sys; a, b = socket.socketpair();"
        " sys.stdout.write('remote$ '); sys.stdout.flush();"
        " select.select([sys.stdin, a], [], [])"
    )
    shell.submit(f'{PY} -c "{program}"')
    found = await shell.until(lambda s: s.waiting, timeout=10)
    assert found.state is T.WAITING_FOR_INPUT
    assert found.certainty is Certainty.POSSIBLY
    assert "relays the terminal to a socket" in found.reason
    quiet_when_reported = found.since - shell.last_output
    assert quiet_when_reported >= 2.0
    await answer_and_finish(shell, b"\r")


async def test_a_reader_with_a_busy_thread_is_possibly_waiting(shell: PtyShell) -> None:
    program = (
        "import threading; threading.Thread(target=lambda: [0 for _ in iter(int, 1)],"
        " daemon=True).start(); input('go? ')"
    )
    shell.submit(f'{PY} -c "{program}"')
    found = await shell.until(lambda s: s.waiting, timeout=10)
    assert found.certainty is Certainty.POSSIBLY
    assert found.prompt == "go? "
    await answer_and_finish(shell, b"\r")


async def test_without_syscalls_echo_off_is_possibly_a_password(tmp_path: Path) -> None:
    # What a setuid program (sudo) leaves us: stat and termios, no blocked call.
    sh = PtyShell(str(tmp_path))
    try:
        await sh.ready()
        sh.watcher.close()
        blind = TerminalProbe(sh.fd, sh.process.pid, table=None)
        from registry.waiting import WaitWatcher

        sh.watcher = WaitWatcher(
            sh.fd, sh.process.pid, sh.screen, lambda: sh.running, sh._on_change, probe=blind
        )
        sh.submit(f"{PY} -c 'import getpass; getpass.getpass(\"[sudo] password for me: \")'")
        found = await sh.until_state(T.WAITING_FOR_PASSWORD)
        assert found.certainty is Certainty.POSSIBLY
        sample = blind.sample()
        assert sample is not None
        assert {t.wait for p in sample.processes for t in p.threads} == {Wait.UNKNOWN}
        sh.write(b"x\r")
        await sh.until_prompt()
    finally:
        sh.close()


async def test_backspace_sends_the_terminals_erase_character(shell: PtyShell) -> None:
    probe = TerminalProbe(shell.fd, shell.process.pid)
    assert probe.erase_character() == b"\x7f"  # Linux ptys start with ^?
    shell.submit("stty erase '^H'")
    await shell.until_prompt()
    assert probe.erase_character() == b"\x08"


# -- negatives: never reported waiting -------------------------------------------------


def never_waiting(states: list[WaitState]) -> None:
    assert not [s for s in states if s.waiting], states


@pytest.mark.parametrize(
    "command",
    ["sleep 1", "sleep 1 | cat", "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.2; done"],
)
async def test_never_waiting_until_it_ends(shell: PtyShell, command: str) -> None:
    shell.submit(command)
    await shell.until_prompt()
    await shell.until_state(T.IDLE)
    assert any(check.deep for check in shell.checks)  # it did look while it ran
    never_waiting(shell.states)


async def test_a_busy_program_is_running(shell: PtyShell) -> None:
    shell.submit("yes > /dev/null")
    await shell.until_checks(lambda c: c.deep and c.quiet >= 1.5)
    assert shell.watcher.state.state is T.RUNNING
    never_waiting(shell.states)
    shell.write(b"\x03")
    await shell.until_prompt()


async def test_the_shell_reading_is_not_called_waiting_while_its_output_is_unread(
    shell: PtyShell,
) -> None:
    """A command that just ended: the shell has written its end and reads again, but
    we have not read that yet. (On a loaded machine a look landed there and called
    the ended command "waiting for input (bash)".)"""
    await shell.ready()
    shell.loop.remove_reader(shell.fd)  # from here, what the shell prints stays unread
    shell.submit("true")  # "running" from here on: the prompt that ends it goes unread
    await shell.until_checks(lambda check: "output unread" in check.decision.reason)
    assert all(state.state is not TerminalState.WAITING_FOR_INPUT for state in shell.states)
    # Read at last, the shell still reads with a "command running": its own `read`,
    # as far as anyone can tell, and said so once confirmed.
    os.read(shell.fd, 65536)
    waiting = await shell.until_state(TerminalState.WAITING_FOR_INPUT)
    assert waiting.program == "bash"
