"""One MCP session's view of the registry: its client, its task, and following commands.

An MCP server over stdio serves one agent session, so this process's
:class:`McpSession` is that session: it holds the registry client, the
:class:`~protocol.mcp_runs.RunTracker`, the session's task id (named after the MCP
client, e.g. ``claude-code-3fa2c1``) and where the task's last command left its shell
(so that a ``cd`` carries over when the model omits ``cwd``).  A command is started in
the background and followed with ``terminal/wait`` (which also answers when it waits
for input), so that a call can return at its bound while the command goes on.  The
tools of :mod:`protocol.mcp_tools` are thin on top of it; the registry's rules (reuse,
cleaning output, telling a wait for input, ending processes) stay in the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio

from . import types as wire
from .client import RegistryClient
from .errors import RegistryError, TerminalBusyError, UnknownTerminalError
from .mcp_results import CommandResult, TerminalSummary, Waiting, waiting_hint
from .mcp_runs import RunTracker

__all__ = ["Connect", "McpSession", "Progress", "SessionSettings", "explain"]

#: After an interrupt, how long to wait for the command's end (SIGINT, SIGTERM, SIGKILL
#: are a second apart by default).
_INTERRUPT_WAIT = 10.0
#: Runs whose shown output is remembered (the oldest are forgotten first).
_SHOWN_KEPT = 256
#: Progress notifications while a call waits on a command: at most this often.
PROGRESS_INTERVAL = 1.0


@dataclass
class SessionSettings:
    #: The longest a tool call waits on a command before returning its output so far.
    call_timeout: float = 30.0
    #: Where commands run when the model gives no cwd (the directory we were started in).
    cwd: str = field(default_factory=os.getcwd)


#: How a session (re)connects: the face's own choice of server.
Connect = Callable[[], Awaitable[RegistryClient]]
#: ``progress(seconds so far, message)``: an MCP progress notification.
Progress = Callable[[float, str], Awaitable[None]]


class McpSession:
    """The registry as one MCP session sees it."""

    def __init__(self, connect: Connect, client: RegistryClient, settings: SessionSettings) -> None:
        self._connect = connect
        self._connecting = asyncio.Lock()
        self.client = client
        self.settings = settings
        self.tracker = RunTracker(client)
        self._task_id: str | None = None
        #: task -> the terminal its last command ran in.
        self._last_terminal: dict[str, int] = {}
        #: terminal -> the run a tool call is waiting on there (None: whatever runs).
        self._waited: dict[int, int | None] = {}
        #: run -> the output of it the model has been shown (handed over once).
        self._shown: OrderedDict[int, str] = OrderedDict()

    async def ready(self) -> None:
        """Connected to a server: after one went away (stopped, or died), the next tool
        call connects again (a background server is started anew as the CLI does)."""
        if self.client.connected:
            return
        async with self._connecting:
            if self.client.connected:
                return
            lost = self.client
            self.client = await self._connect()
            self.tracker = RunTracker(self.client)
            if self._task_id is not None and self.scoped_task() is not None:
                self._task_id = self.scoped_task()
            self._last_terminal.clear()
            self._waited.clear()
            self._shown.clear()
            with contextlib.suppress(Exception):
                await lost.close()

    # -- the task ---------------------------------------------------------------------

    def task_id(self, client_name: str | None = None) -> str:
        """This session's task: ``<client name>-<6 hex digits>``, fixed at first use --
        unless we run inside one of the server's terminals, whose task is then ours."""
        if self._task_id is None:
            name = re.sub(r"[^a-z0-9]+", "-", (client_name or "mcp").lower()).strip("-")
            self._task_id = self.scoped_task() or f"{name[:24] or 'mcp'}-{secrets.token_hex(3)}"
        return self._task_id

    def scoped_task(self) -> str | None:
        """The task the server lets this connection act for, when it allows only one: we
        run inside one of its terminals (an agent started in a terminal of the registry)."""
        scope = self.client.capabilities.get("terminalRegistry", {}).get("scope")
        return str(scope["taskId"]) if isinstance(scope, dict) else None

    def default_cwd(self, task: str) -> str:
        """Where the task's last command left its shell; else the start directory."""
        terminal_id = self._last_terminal.get(task)
        info = self.tracker.terminals.get(terminal_id) if terminal_id is not None else None
        if info is not None and not info.get("closed") and info.get("cwd"):
            return str(info["cwd"])
        return self.settings.cwd

    def resolve_cwd(self, cwd: str) -> str:
        """``~`` expanded; a relative path is taken from the start directory."""
        return os.path.normpath(os.path.join(self.settings.cwd, os.path.expanduser(cwd)))

    def summary(self, info: Any, task: str) -> TerminalSummary:
        t = info if isinstance(info, dict) else _wire(info)
        return TerminalSummary(
            id=t["id"],
            task_id=t["taskId"],
            yours=t["taskId"] == task,
            busy=t["busy"],
            cwd=t["cwd"],
            last_command=t["lastCommand"],
            shell=t["shell"],
            provider=t["provider"],
            integration=t["shellIntegration"],
            state=t.get("state", "idle"),
            waiting_for=_waiting(t.get("waitingFor")),
        )

    # -- commands -----------------------------------------------------------------------

    async def start(
        self,
        command: str,
        *,
        task: str,
        cwd: str | None,
        terminal_id: int | None,
        timeout: float | None,
    ) -> wire.RunResult:
        """Start ``command`` in the background: its run, ``state: "running"``."""
        if terminal_id is not None and cwd is not None:
            raise ValueError(
                "give terminal_id or cwd, not both: a terminal runs where its shell stands "
                "(cd in the command to move it)"
            )
        if terminal_id is None:
            cwd = self.resolve_cwd(cwd) if cwd is not None else self.default_cwd(task)
        began = time.monotonic()
        started = await self.client.run(
            command,
            terminal_id=terminal_id,
            cwd=cwd,
            task_id=task if terminal_id is None else None,
            timeout=timeout,
            background=True,
        )
        self.tracker.note_start(started.run_id, started.terminal_id, command, began)
        self._last_terminal[task] = started.terminal_id
        return started

    async def follow(
        self,
        terminal_id: int,
        run_id: int | None,
        wait: float,
        *,
        yield_on_input: bool = True,
        progress: Progress | None = None,
    ) -> wire.RunResult:
        """``terminal/wait``: until the run (None: the terminal's current, else last)
        ends, waits for input (``yield_on_input``) or ``wait`` s pass.  A cancelled call
        interrupts the command.  ``progress(elapsed, message)`` is called at once and
        then every second while waiting."""
        reporter = (
            asyncio.ensure_future(self._report(terminal_id, run_id, progress))
            if progress is not None
            else None
        )
        self._waited[terminal_id] = run_id
        try:
            return await self.client.wait(
                run_id=run_id,
                terminal_id=terminal_id if run_id is None else None,
                timeout=wait,
                yield_on_input=yield_on_input,
            )
        except anyio.get_cancelled_exc_class():
            # notifications/cancelled, or the client went away: the command this call
            # was waiting on is interrupted (Ctrl-C, then its process tree).
            with anyio.CancelScope(shield=True):
                await self.interrupt(terminal_id, run_id)
            raise
        finally:
            self._waited.pop(terminal_id, None)
            if reporter is not None:
                reporter.cancel()

    async def interrupt(
        self, terminal_id: int, run_id: int | None
    ) -> tuple[wire.RunResult, bool] | None:
        """Ctrl-C, then the command's tree (``terminal/kill``), for the run ``run_id``
        (None: the one running now); its end once it came, and whether it was still
        running to be interrupted.

        The run is named before the kill and its end awaited by id: a line typed while
        it ran is run by the shell as soon as it is gone, and "the terminal's current
        run" would by then be that line.  A run that already ended is not killed (the
        kill would reach whatever the shell runs next) and is returned as it ended; the
        kill names the run too, so one that ends between the look and the kill is
        left alone by the server as well.
        """
        try:
            run = await self.client.wait(
                run_id=run_id,
                terminal_id=terminal_id if run_id is None else None,
                timeout=0,
                yield_on_input=False,
            )
            if run.state != "running":
                return run, False
            await self.client.kill(terminal_id, run.run_id)
            ended = await self.client.wait(
                run_id=run.run_id, timeout=_INTERRUPT_WAIT, yield_on_input=False
            )
            return ended, True
        except (RegistryError, ConnectionError):
            return None  # its terminal closed or its server went, meanwhile

    async def _report(self, terminal_id: int, run_id: int | None, progress: Progress) -> None:
        start = self.tracker.start_of(run_id) if run_id is not None else None
        start = start or self.tracker.running.get(terminal_id)
        began = start.at if start is not None else time.monotonic()
        command = start.command if start is not None else "the command"
        while True:
            elapsed = time.monotonic() - began
            line = self.tracker.last_line(terminal_id)
            message = f"{command} · {elapsed:.0f} s" + (f" · {line}" if line else "")
            await progress(elapsed, message)
            await asyncio.sleep(PROGRESS_INTERVAL)

    async def result(self, run: wire.RunResult, *, read: bool = True) -> CommandResult:
        """The command as the model should see it: state, exit code, cwd, unseen output.

        Output is handed over once.  While the command runs, ``terminal/output`` gives
        what it printed since (complete lines; the question it waits on is in
        ``waiting_for``) and counts it retrieved; once it has ended, the whole output
        came with its result, and what earlier calls showed of it is left out.  With
        ``read`` false (a background start) nothing is read: the output stays for
        read_output and environment_details.
        """
        shown = self._shown.get(run.run_id, "")
        output = ""
        if not read:
            pass  # even a run that ended already: its output was not shown
        elif run.state == "running":
            # A closed terminal whose last output was already taken is unknown now.
            with contextlib.suppress(UnknownTerminalError):
                output = await self.client.output(run.terminal_id, run_id=run.run_id)
            self._remember_shown(run.run_id, shown + output)
        else:
            # What is left after the part shown starts on a new line of its own.
            output = run.output.removeprefix(shown).lstrip("\n") if shown else run.output
            self._remember_shown(run.run_id, run.output)
        info = self.tracker.terminals.get(run.terminal_id, {})
        result = CommandResult(
            terminal_id=run.terminal_id,
            run_id=run.run_id,
            command=run.command_line,
            state=run.state,
            waiting_for=_waiting(wire.unstructure(run.waiting_for)),
            exit_code=run.exit_code,
            signal=run.signal,
            cwd=run.cwd or info.get("cwd"),
            duration_seconds=round(run.duration_ms / 1000, 3),
            output=output.rstrip("\n"),
            full_output_path=run.full_output_path,
            limit=run.limit,
            note=run.note,
            task_id=info.get("taskId"),
        )
        if result.waiting_for is not None:
            result.next_step = waiting_hint(result.waiting_for, run.terminal_id)
        elif run.state == "running":
            result.next_step = running_hint(run.terminal_id, self.settings.call_timeout)
        return result

    def _remember_shown(self, run_id: int, text: str) -> None:
        self._shown[run_id] = text
        self._shown.move_to_end(run_id)
        while len(self._shown) > _SHOWN_KEPT:
            self._shown.popitem(last=False)

    # -- ending ----------------------------------------------------------------------------

    async def stop(self, *, release: bool) -> None:
        """Interrupt the commands tool calls are waiting on, then :meth:`close`: what
        cancelling those calls would do, for when they cannot be cancelled."""
        for terminal_id, run_id in list(self._waited.items()):
            await self.interrupt(terminal_id, run_id)
        await self.close(release=release)

    async def close(self, *, release: bool) -> None:
        """Release the session's task (its terminals live on for the next session) --
        unless it is the task of the terminal we run in, which is not ours to end."""
        if release and self._task_id is not None and self.scoped_task() is None:
            with contextlib.suppress(RegistryError, ConnectionError, RuntimeError):
                await self.client.release(self._task_id)
        await self.client.close()


def running_hint(terminal_id: int, call_timeout: float) -> str:
    return (
        f"The command keeps running. Call wait_for_command with terminal_id {terminal_id} "
        f"to wait for it (up to {call_timeout:g} s per call; it returns at once if the "
        "command asks for input); read_output shows new output; kill_command stops it."
    )


def explain(error: RegistryError) -> str:
    """A registry error as a sentence for the model, with what to do about it."""
    message = error.message
    if isinstance(error, TerminalBusyError):
        return (
            f"{message}: wait for it with wait_for_command, stop it with kill_command, or "
            "run without terminal_id to get an idle terminal"
        )
    if isinstance(error, UnknownTerminalError):
        return f"{message}: list_terminals shows the terminals that exist"
    return message


def _waiting(data: Any) -> Waiting | None:
    """The wire's ``waitingFor`` as the tools' model."""
    if not isinstance(data, dict):
        return None
    return Waiting(
        kind=data["kind"],
        prompt=data.get("prompt"),
        program=data.get("program"),
        certain=data.get("certainty", "certain") == "certain",
        keys=data.get("keys"),
    )


def _wire(info: Any) -> dict[str, Any]:
    data: dict[str, Any] = wire.unstructure(info)
    return data
