"""Wait-state detection on a remote terminal: the kernel here sees only the local
``ssh``, which waits on the terminal and on its socket at once, so a remote command
waiting for input is "possibly waiting" -- said after the longer quiet -- and its
prompt line still comes from the screen.  An ssh mux client waits on its control
socket alone (the master reads the terminal for it), so the watcher must be told the
terminal is relayed (``Rules(relayed=True)``).  The watcher is the engine's, fed by
the terminal's own output; wiring it into every terminal is issue 8's.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from registry.registry import TerminalRegistry
from registry.run import RunState, TerminalRun
from registry.screen import ScreenModel
from registry.terminals.base import Terminal, TerminalListener
from registry.terminals.ssh import SshTerminal
from registry.waiting import (
    Certainty,
    Check,
    Rules,
    TerminalState,
    WaitState,
    WaitWatcher,
    WatchSettings,
)

from .sshd import PrivateSshd, sshd

__all__ = ["sshd"]


class Watched(TerminalListener):
    """A terminal's output into a screen model and a watcher; its states, awaited."""

    def __init__(self, terminal: SshTerminal) -> None:
        cols, rows = terminal.size
        self.screen = ScreenModel(cols, rows)
        self.states: list[WaitState] = []
        self.checks: list[Check] = []
        self._changed = asyncio.Event()
        self._checked = asyncio.Event()
        # The local PTY and the process on it (the ssh client): all the kernel shows.
        self.watcher = WaitWatcher(
            terminal._pty.fd,
            terminal.pid or 0,
            self.screen,
            lambda: terminal.busy,
            self._on_change,
            settings=WatchSettings(rules=Rules(relayed=True)),
            on_check=self._on_check,
        )
        terminal.subscribe(self)

    def _on_change(self, state: WaitState) -> None:
        self.states.append(state)
        self._changed.set()

    def _on_check(self, check: Check) -> None:
        self.checks.append(check)
        self._checked.set()

    async def next_check(self, timeout: float = 15) -> Check:
        """The watcher's next look (it looks once output has gone quiet)."""
        self._checked.clear()
        await asyncio.wait_for(self._checked.wait(), timeout)
        return self.checks[-1]

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        self.screen.feed(data)
        self.watcher.note_output()

    def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
        self.screen.mark_command_start()
        self.watcher.note_command()

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        self.watcher.note_command()

    async def until_waiting(self, timeout: float = 15) -> WaitState:
        async def waiting() -> WaitState:
            while True:
                found = [s for s in self.states if s.waiting]
                if found:
                    return found[0]
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(waiting(), timeout)


@pytest_asyncio.fixture
async def watched(sshd: PrivateSshd) -> AsyncIterator[tuple[SshTerminal, Watched]]:
    registry = TerminalRegistry(sshd.settings())
    terminal = await registry.get_or_create("~", "t", "ssh", target=sshd.alias)
    assert isinstance(terminal, SshTerminal)
    await asyncio.wait_for(terminal.run("true"), 20)
    watched = Watched(terminal)
    try:
        yield terminal, watched
    finally:
        watched.watcher.close()
        await registry.close()


async def test_a_remote_command_waiting_for_input_is_possibly_waiting(
    watched: tuple[SshTerminal, Watched],
) -> None:
    terminal, seen = watched
    run = await terminal.start('read -p "continue? " answer; echo "got $answer"')
    found = await seen.until_waiting()
    assert (found.state, found.certainty) == (TerminalState.WAITING_FOR_INPUT, Certainty.POSSIBLY)
    assert found.prompt == "continue? "
    assert found.program == "ssh"
    await terminal.write("y\r")
    await asyncio.wait_for(run.wait(), 20)
    assert run.state is RunState.COMPLETED
    assert run.text().replace("\r\n", "\n").strip().endswith("continue? y\ngot y")


async def test_an_idle_remote_shell_is_never_waiting(
    watched: tuple[SshTerminal, Watched],
) -> None:
    terminal, seen = watched
    # At its prompt the ssh client waits exactly as it does for a remote `read`; no
    # command runs, so the terminal is idle.
    await asyncio.wait_for(terminal.run("echo hello"), 20)
    assert not terminal.busy
    seen.watcher.note_output()  # have it look after the quiet (an event, not a sleep)
    check = await seen.next_check()
    assert check.decision.state in (None, TerminalState.IDLE)
    assert [s for s in seen.states if s.waiting] == []
