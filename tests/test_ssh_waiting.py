"""Wait states and limits on a remote terminal (the private sshd of tests/sshd.py).

The kernel here sees only the local ``ssh``: a session on a ControlMaster waits on
its control socket alone (the master reads the terminal for it), so a remote
terminal's watcher is relayed (``Rules(relayed=True)``): a remote command waiting
for input is "possibly waiting", said after the longer quiet, with its prompt line
from the screen.  Limits that would bound the client here (memory, processes, CPU
time) are not applied; output and wall time are the server's and apply.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from registry.limits import Limits
from registry.registry import TerminalRegistry
from registry.run import RunState
from registry.terminals.ssh import SshTerminal
from registry.waiting import Certainty, TerminalState

from .sshd import PrivateSshd, sshd

__all__ = ["sshd"]


@pytest_asyncio.fixture
async def terminal(sshd: PrivateSshd) -> AsyncIterator[SshTerminal]:
    registry = TerminalRegistry(sshd.settings())
    found = await registry.get_or_create("~", "t", "ssh", target=sshd.alias)
    assert isinstance(found, SshTerminal)
    try:
        yield found
    finally:
        await registry.close()


async def test_a_remote_command_waiting_for_input_is_possibly_waiting(
    terminal: SshTerminal,
) -> None:
    run = await terminal.start('read -p "continue? " answer; echo "got $answer"')
    found = await asyncio.wait_for(terminal.until_waiting(), 15)
    assert (found.state, found.certainty) == (TerminalState.WAITING_FOR_INPUT, Certainty.POSSIBLY)
    assert (found.prompt, found.program) == ("continue? ", "ssh")
    await terminal.write("y\r")
    await asyncio.wait_for(run.wait(), 20)
    assert run.state is RunState.COMPLETED
    assert run.text().replace("\r\n", "\n").strip().endswith("continue? y\ngot y")
    assert terminal.wait_state.state is TerminalState.IDLE


async def test_a_nested_remote_shell_is_a_command_not_the_shell_back(
    terminal: SshTerminal,
) -> None:
    # Its prompt is the outer shell's; here only the client reads the terminal, so
    # that is no sign the outer shell took over (as it would be locally).
    run = await terminal.start("bash -i")
    found = await asyncio.wait_for(terminal.until_waiting(), 15)
    assert found.certainty is Certainty.POSSIBLY
    assert not run.done
    await terminal.write("exit 3\r")
    await asyncio.wait_for(run.wait(), 20)
    assert (run.state, run.exit_code) == (RunState.COMPLETED, 3)
    assert terminal.integration.value == "rich"


async def test_only_the_servers_limits_apply_on_a_host(terminal: SshTerminal) -> None:
    assert terminal.limits_by == {
        "memoryMb": "none",
        "pids": "none",
        "cpuSeconds": "none",
        "outputMb": "server",
        "wallSeconds": "server",
    }
    limits = Limits(memory_mb=1, pids=1, wall_seconds=0.5)
    run = await terminal.start("sleep 30", limits=limits)
    await asyncio.wait_for(run.wait(), 20)
    assert (run.state, run.limit) == (RunState.FAILED, "wallSeconds")
    assert run.limits == {"wallSeconds": 0.5}
    # The terminal (its connection) lives on.
    again = await asyncio.wait_for(terminal.run("echo still here", limits=limits), 20)
    assert (again.state, again.text().strip()) == (RunState.COMPLETED, "still here")
