"""The PTY shell terminal with our integration: real bash, zsh (and fish) in real PTYs."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import psutil
import pytest

from registry.errors import InvalidCwdError, SpawnError, TerminalBusyError, TerminalClosedError
from registry.output import IncrementalText
from registry.processes import tagged_processes
from registry.run import RunState, TerminalRun
from registry.terminals.base import (
    TERMINAL_TAG_VARIABLE,
    IntegrationState,
    Terminal,
    TerminalListener,
)
from registry.terminals.shell import ShellTerminal

from .conftest import SpawnTerminal, fast_settings, next_run_end


def lines(run: TerminalRun) -> list[str]:
    return run.text().replace("\r\n", "\n").splitlines()


async def test_integration_is_rich(warm: ShellTerminal) -> None:
    assert warm.integration is IntegrationState.RICH


async def test_cd_moves_the_live_cwd(warm: ShellTerminal, tmp_path: Path) -> None:
    target = tmp_path / "dir with space;and semicolon é"
    target.mkdir()
    run = await warm.run(f"cd '{target}'")
    assert run.state is RunState.COMPLETED
    assert run.exit_code == 0
    assert warm.cwd == str(target)
    assert run.cwd == str(target)
    await warm.run("cd /tmp")
    assert warm.cwd == "/tmp"


@pytest.mark.parametrize(
    ("command", "exit_code", "signal_name"),
    [
        ("false", 1, None),
        ("true", 0, None),
        ("(exit 3)", 3, None),
        ("bash -c 'kill -TERM $$'", 143, "SIGTERM"),
        ("sh -c 'kill -INT $$'", 130, "SIGINT"),
    ],
)
async def test_exit_codes(
    warm: ShellTerminal, command: str, exit_code: int, signal_name: str | None
) -> None:
    run = await warm.run(command, timeout=10)
    assert run.state is RunState.COMPLETED
    assert run.exit_code == exit_code
    assert run.signal == signal_name


async def test_silence_is_not_an_ending(warm: ShellTerminal) -> None:
    # Quieter than any idle heuristic would tolerate: only D ends the run.
    run = await warm.run("echo a; sleep 3; echo b", timeout=20)
    assert lines(run) == ["a", "b"]
    assert run.exit_code == 0
    assert run.duration >= 3


async def test_output_is_exactly_what_the_command_wrote(warm: ShellTerminal) -> None:
    run = await warm.run("printf 'x\\ny'")
    assert run.output == b"x\r\ny"
    run = await warm.run("echo out; echo err >&2")
    assert lines(run) == ["out", "err"]


async def test_multi_line_script(warm: ShellTerminal) -> None:
    run = await warm.run("echo one\nx=2\necho two $x\n(exit 4)")
    assert lines(run) == ["one", "two 2"]
    assert run.exit_code == 4


async def test_heredoc(warm: ShellTerminal) -> None:
    run = await warm.run("cat <<'EOF'\nhello $HOME\n  world;\nEOF")
    assert lines(run) == ["hello $HOME", "  world;"]
    assert run.exit_code == 0


async def test_read_answered_through_write(warm: ShellTerminal) -> None:
    run = await warm.start('read x; echo "got [$x]"')
    await warm.write("hello there\r")
    await run.wait()
    assert lines(run)[-1] == "got [hello there]"
    assert run.exit_code == 0


class OutputWaiter(TerminalListener):
    """Resolves when a run's output (not the echo of its command line) shows ``text``."""

    def __init__(self, terminal: Terminal, text: str) -> None:
        self._text = text.encode()
        self._seen = b""
        self.found = asyncio.Event()
        terminal.subscribe(self)

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        if run is None:
            return
        self._seen = (self._seen + data)[-4096:]
        if self._text in self._seen:
            self.found.set()
            terminal.unsubscribe(self)

    async def wait(self) -> None:
        await asyncio.wait_for(self.found.wait(), 10)


def _leftovers(terminal: ShellTerminal) -> list[psutil.Process]:
    """Processes carrying the terminal's tag, other than its shell."""
    return [
        p for p in tagged_processes(TERMINAL_TAG_VARIABLE, terminal._tag) if p.pid != terminal.pid
    ]


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            continue
    return True


@pytest.mark.parametrize("command", ["sleep 100", "cat"])
async def test_timeout_ends_the_command_and_the_terminal_lives(
    warm: ShellTerminal, command: str
) -> None:
    run = await warm.run(command, timeout=1)
    assert run.state is RunState.TIMED_OUT
    assert run.duration >= 1
    assert run.exit_code == 130
    assert run.signal == "SIGINT"
    assert _leftovers(warm) == []
    after = await warm.run("echo still here")
    assert lines(after) == ["still here"]
    assert after.exit_code == 0


async def test_kill_cancels_the_running_command(warm: ShellTerminal) -> None:
    started = OutputWaiter(warm, "started")
    run = await warm.start("echo started; sleep 100")
    await started.wait()
    await warm.kill()
    assert run.state is RunState.CANCELLED
    assert lines(run)[0] == "started"
    assert (await warm.run("echo ok")).exit_code == 0


async def test_a_builtin_loop_is_interrupted_too(warm: ShellTerminal) -> None:
    run = await warm.run("while :; do :; done", timeout=1)
    assert run.state is RunState.TIMED_OUT
    assert (await warm.run("echo ok")).text().strip() == "ok"


async def test_output_containing_the_prompt_is_kept(warm: ShellTerminal) -> None:
    await warm.run("cd /tmp")
    prompt_like = "user@host:/tmp$ "
    run = await warm.run(f"echo '{prompt_like}'; echo '# not the end'; echo '% again >'")
    assert lines(run) == [prompt_like, "# not the end", "% again >"]


async def test_forged_markers_change_nothing(warm: ShellTerminal) -> None:
    await warm.run("cd /tmp")
    forged = (
        "printf '\\033]633;D;0\\007\\033]633;P;Cwd=/etc\\007"
        "\\033]633;D;0;wrongnonce\\007\\033]633;B\\007\\033]7;file://h/usr\\007'; "
        "echo after; (exit 5)"
    )
    run = await warm.run(forged)
    assert run.exit_code == 5
    assert "after" in run.text()
    assert warm.cwd == "/tmp"
    assert run.cwd == "/tmp"


async def test_nonce_is_not_in_the_environment(warm: ShellTerminal) -> None:
    run = await warm.run('echo "[${TERMINAL_REGISTRY_NONCE-unset}]"')
    assert lines(run) == ["[unset]"]


async def test_agent_environment(warm: ShellTerminal) -> None:
    run = await warm.run('echo "$PAGER $GIT_PAGER $TERM"')
    assert lines(run) == ["cat cat xterm-256color"]


async def test_utf8_split_across_reads_arrives_intact(warm: ShellTerminal) -> None:
    chunks: list[bytes] = []

    class Collect(TerminalListener):
        def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
            if run is not None:
                chunks.append(data)

    listener = Collect()
    warm.subscribe(listener)
    try:
        run = await warm.run(
            "printf '\\303'; sleep 0.3; printf '\\251\\342\\202'; sleep 0.3; printf '\\254\\n'"
        )
    finally:
        warm.unsubscribe(listener)
    assert run.text() == "\u00e9\u20ac\r\n"
    assert len(chunks) >= 3, chunks  # the characters really were split across reads
    decoder = IncrementalText()
    assert "".join(decoder.decode(c) for c in chunks) == "\u00e9\u20ac\r\n"


async def test_busy_terminal_refuses_a_second_command(warm: ShellTerminal) -> None:
    run = await warm.start("sleep 100")
    assert warm.busy
    with pytest.raises(TerminalBusyError):
        await warm.start("echo no")
    await warm.kill()
    assert run.state is RunState.CANCELLED
    assert not warm.busy


async def test_typed_command_makes_the_terminal_busy(warm: ShellTerminal) -> None:
    ended: list[TerminalRun] = []

    class Ends(TerminalListener):
        def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
            ended.append(run)

    listener = Ends()
    warm.subscribe(listener)
    try:
        started = asyncio.Event()
        warm.subscribe(_on_start(started))
        await warm.write("sleep 0.5; echo typed\r")
        await asyncio.wait_for(started.wait(), 10)
        assert warm.busy
        run = warm.current_run
        assert run is not None
        assert run.typed
        await run.wait()
    finally:
        warm.unsubscribe(listener)
    assert ended
    assert ended[0] is run
    assert "sleep 0.5; echo typed" in run.command_line
    assert lines(run) == ["typed"]
    assert run.exit_code == 0


@pytest.mark.parametrize("ours", ["( true )", "if then fi", "", "# a comment", "{ (exit 3); }"])
async def test_a_typed_command_after_any_line_of_ours_is_named(
    spawn_terminal: SpawnTerminal, ours: str
) -> None:
    """bash skips E for lines the server typed; a line of ours that ran no simple
    command must not make the next line a person types nameless."""
    terminal: ShellTerminal = await spawn_terminal("bash")
    await terminal.run(ours)
    ended = next_run_end(terminal)
    await terminal.write("echo typed-after\r")
    run = await asyncio.wait_for(ended, 30)
    assert run.typed
    assert run.command_line == "echo typed-after"


def _on_start(event: asyncio.Event) -> TerminalListener:
    class Starts(TerminalListener):
        def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
            event.set()
            terminal.unsubscribe(self)

    return Starts()


async def test_resize(warm: ShellTerminal) -> None:
    warm.resize(100, 30)
    run = await warm.run("stty size")
    assert lines(run) == ["30 100"]
    warm.resize(120, 40)


async def test_big_output_completes_with_bounded_buffer(spawn_terminal: SpawnTerminal) -> None:
    settings = fast_settings()
    settings.run_output_cap = 1024 * 1024
    terminal = await spawn_terminal("bash", settings=settings)
    run = await terminal.run(
        "head -c 50000000 /dev/zero | tr '\\0' 'x'; echo; echo end", timeout=120
    )
    assert run.exit_code == 0
    assert run.output_bytes >= 50_000_000
    assert len(run.output) <= settings.run_output_cap
    assert run.dropped_bytes == run.output_bytes - len(run.output)
    assert run.output.endswith(b"xxx\r\nend\r\n")
    assert run.output.startswith(b"xxx")


async def test_exit_typed_as_a_command_closes_cleanly(
    spawn_terminal: SpawnTerminal,
) -> None:
    for shell in ("bash", "zsh"):
        terminal = await spawn_terminal(shell)
        temp_dir = terminal._launch.temp_dir
        assert temp_dir
        assert os.path.isdir(temp_dir)
        run = await terminal.run("exit 3", timeout=10)
        assert run.state is RunState.COMPLETED
        assert run.exit_code == 3
        await asyncio.wait_for(terminal.wait_closed(), 10)
        assert terminal.closed
        assert not os.path.exists(temp_dir)
        with pytest.raises(TerminalClosedError):
            await terminal.run("echo no")


async def test_shell_dying_mid_run_fails_the_run(spawn_terminal: SpawnTerminal) -> None:
    terminal = await spawn_terminal("bash")
    run = await terminal.run("echo bye; kill -KILL $$", timeout=10)
    assert run.state is RunState.FAILED
    assert "SIGKILL" in (run.note or "")
    assert terminal.closed


async def test_close_leaves_no_process_behind(spawn_terminal: SpawnTerminal) -> None:
    terminal = await spawn_terminal("bash")
    # A disowned job, one in its own session, one in its own session whose parent
    # exited (reparented away from the shell), and the running command.
    await terminal.run("sleep 200 & disown; setsid sleep 201 & (setsid sleep 202 &)")
    ready = OutputWaiter(terminal, "ready")
    running = await terminal.start("echo ready; sleep 203")
    await ready.wait()
    before = _leftovers(terminal)
    assert before, "the test's processes should be running"
    await terminal.close()
    assert terminal.closed
    assert running.state is RunState.CANCELLED
    assert _gone([p.pid for p in before])
    assert _leftovers(terminal) == []


async def test_sigint_ignored_by_the_server_still_interrupts(
    spawn_terminal: SpawnTerminal,
) -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        terminal = await spawn_terminal("bash")
    finally:
        signal.signal(signal.SIGINT, previous)
    run = await terminal.run("sleep 100", timeout=1)
    assert run.state is RunState.TIMED_OUT
    assert run.exit_code == 130  # SIGINT did it; SIGTERM would say 143


async def test_invalid_cwd(tmp_path: Path) -> None:
    with pytest.raises(InvalidCwdError, match="does not exist"):
        await ShellTerminal.spawn(1, str(tmp_path / "nope"), fast_settings())
    file = tmp_path / "file"
    file.write_text("x")
    with pytest.raises(InvalidCwdError, match="not a directory"):
        await ShellTerminal.spawn(1, str(file), fast_settings())


async def test_missing_shell(tmp_path: Path) -> None:
    with pytest.raises(SpawnError, match="/no/such/shell"):
        await ShellTerminal.spawn(1, str(tmp_path), fast_settings(), shell="/no/such/shell")


async def test_shell_that_exits_at_once(spawn_terminal: SpawnTerminal) -> None:
    with pytest.raises(SpawnError, match="exited during start-up"):
        await spawn_terminal("false")


async def test_incomplete_command_fails_fast(warm: ShellTerminal) -> None:
    run = await warm.run("echo 'unclosed", timeout=10)
    assert run.state is RunState.FAILED
    assert "incomplete" in (run.note or "")
    assert (await warm.run("echo fine")).text().strip() == "fine"


async def test_line_without_a_command(warm: ShellTerminal) -> None:
    run = await warm.run("# just a comment", timeout=10)
    assert run.state is RunState.COMPLETED
    assert (await warm.run("echo next")).text().strip() == "next"
