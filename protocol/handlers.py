"""One handler per request of docs/protocol.md: module-level, the server injected.

pygls passes each handler its connection's server as ``ls`` (the first parameter's
name tells it to), as in jedi-language-server.  A handler structures the raw params
(a dict, or None) strictly into the types of :mod:`protocol.types`, makes one call
into the registry, and returns wire dicts.  Exceptions become JSON-RPC errors in
:meth:`protocol.connection.ConnectionProtocol._send_handler_result`.

:data:`HANDLERS` maps each method of :mod:`protocol.methods` to its handler; the hub
registers them on every connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from lsprotocol import types as lsp

from registry.errors import UnknownTerminalError
from registry.full_output import run_output
from registry.model_text import TextLimits, last_line
from registry.run import TerminalRun

from . import methods
from . import types as wire
from .audit_trail import REQUESTER, Requester
from .connection import ConnectionServer
from .errors import InvalidParamsError
from .notifications import terminal_info, waiting_for
from .options import engine_limits

__all__ = ["HANDLERS", "run_result"]

#: $/progress reports at most this often.
PROGRESS_INTERVAL = 0.25


def _info(ls: ConnectionServer, terminal: Any) -> Any:
    return wire.unstructure(terminal_info(ls.registry, terminal))


async def run_result(ls: ConnectionServer, run: TerminalRun) -> wire.RunResult:
    output = await run_output(run, ls.registry, ls.settings)
    stdout = run.stdout
    stderr = run.stderr
    return wire.RunResult(
        run_id=run.id,
        terminal_id=run.terminal_id,
        command_line=run.command_line,
        state=run.state.value,
        exit_code=run.exit_code,
        signal=run.signal,
        output=output.text.text,
        truncated=output.text.truncated,
        cwd=run.cwd,
        duration_ms=round(run.duration * 1000),
        stdout=stdout.decode("utf-8", "replace") if stdout is not None else None,
        stderr=stderr.decode("utf-8", "replace") if stderr is not None else None,
        note=run.note,
        full_output_path=output.full_output_path,
        limit=run.limit,
        waiting_for=_waiting_for(ls, run),
    )


def _where(provider: str | None, host: str | None, container: str | None) -> tuple[str, str | None]:
    """The provider and target a request names: ``host`` means a shell over ssh,
    ``container`` a shell in that container (docs/remote.md)."""
    if host is not None and container is not None:
        raise ValueError("give host or container, not both")
    for target, remote in ((host, "ssh"), (container, "container")):
        if target is not None:
            if provider not in (None, "shell", remote):
                raise ValueError(f"provider {provider!r} runs on this machine: it takes no host")
            return remote, target
    return provider or "shell", None


def _waiting_for(ls: ConnectionServer, run: TerminalRun) -> wire.WaitingFor | None:
    """What the run's terminal waits for, while the run goes on."""
    if run.done:
        return None
    try:
        terminal = ls.registry.get(run.terminal_id)
    except UnknownTerminalError:  # it closed meanwhile
        return None
    return waiting_for(terminal.wait_state)


async def acquire(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.AcquireParams, params)
    provider, target = _where(p.provider, p.host, p.container)
    terminal = await ls.registry.get_or_create(
        p.cwd,
        p.task_id,
        provider,
        settings=ls.settings,
        target=target,
        limits=engine_limits(p.limits),
    )
    return _info(ls, terminal)


async def run(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.RunParams, params)
    timeout = p.timeout_ms / 1000 if p.timeout_ms is not None else None
    if p.terminal_id is None and p.cwd is None and p.host is None and p.container is None:
        raise ValueError("terminal/run needs a terminalId or a cwd")
    registry = ls.registry
    provider, target = _where(p.provider, p.host, p.container)
    connection = ls.connection
    # Whose run this is, for the audit log: the run starts inside this task.
    REQUESTER.set(
        Requester(
            connection.peer_pid or connection.client_pid,
            connection.peer_uid,
            connection.name.partition(":")[0],
        )
    )
    started = await registry.run(
        p.command,
        cwd=p.cwd,
        task_id=p.task_id,
        terminal_id=p.terminal_id,
        provider=provider,
        timeout=timeout,
        env=p.env,
        background=True,
        settings=ls.settings,
        target=target,
        limits=engine_limits(p.limits),
    )
    if p.background:
        return wire.unstructure(await run_result(ls, started))
    progress = _Progress(ls, p.work_done_token, started) if p.work_done_token else None
    try:
        await registry.wait(started, yield_on_input=p.yield_on_input)
    except asyncio.CancelledError:
        # $/cancelRequest: interrupt the command (Ctrl-C, then its process tree).
        with contextlib.suppress(Exception):
            await asyncio.shield(registry.get(started.terminal_id).kill())
        raise
    finally:
        if progress is not None:
            progress.end()
    return wire.unstructure(await run_result(ls, started))


async def wait(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.WaitParams, params)
    if (p.run_id is None) == (p.terminal_id is None):
        raise InvalidParamsError("terminal/wait needs a runId or a terminalId (one of them)")
    registry = ls.registry
    run = registry.find_run(p.run_id, p.terminal_id)
    scope = ls.connection.scope
    if scope is not None and run.task_id != scope.task_id:
        # A run by id names no terminal for the connection's scope to check.
        raise InvalidParamsError(
            f"run {run.id} is not this connection's: it acts for task {scope.task_id!r} only"
        )
    timeout = p.timeout_ms / 1000 if p.timeout_ms is not None else None
    # Cancelling a wait stops the waiting, not the command (terminal/kill does that).
    await registry.wait(run, timeout=timeout, yield_on_input=p.yield_on_input)
    return wire.unstructure(await run_result(ls, run))


async def send_keys(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.SendKeysParams, params)
    await ls.registry.get(p.terminal_id).send_keys(p.keys)
    return None


async def write(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.WriteParams, params)
    await ls.registry.get(p.terminal_id).write(p.data)
    return None


async def resize(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.ResizeParams, params)
    ls.registry.get(p.terminal_id).resize(p.cols, p.rows)
    return None


async def kill(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.KillParams, params)
    terminal = ls.registry.get(p.terminal_id)
    if p.run_id is not None:
        run = ls.registry.find_run(p.run_id)
        if run.terminal_id != terminal.id:
            raise InvalidParamsError(f"run {run.id} is not a run of terminal {terminal.id}")
        if terminal.current_run is not run:
            # It ended: what runs now (a line typed behind it) is not what was meant.
            return None
    await terminal.kill()
    return None


async def close(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.TerminalIdParams, params)
    await ls.registry.close_terminal(p.terminal_id)
    return None


async def list_terminals(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.ListParams, params)
    return [_info(ls, t) for t in ls.registry.list(p.task_id, p.busy)]


async def output(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.OutputParams, params)
    text = ls.registry.unretrieved_output(p.terminal_id, run_id=p.run_id, peek=p.peek)
    return wire.unstructure(wire.OutputResult(text))


async def get(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.TerminalIdParams, params)
    return _info(ls, ls.registry.get(p.terminal_id))


async def replay(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.ReplayParams, params)
    terminal = ls.registry.get(p.terminal_id)
    # didWrite still gathering is sent first: everything in the replay was then
    # already sent, and every didWrite after this answer is new to a mirror.
    ls.shared.fanout.flush_writes(p.terminal_id)
    data = terminal.replay(p.max_bytes)
    return wire.unstructure(wire.ReplayResult(data.decode("utf-8", "replace")))


async def release(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.ReleaseParams, params)
    ls.registry.release(p.task_id)
    return None


async def environment_details(ls: ConnectionServer, params: Any) -> Any:
    p = wire.structure_params(wire.EnvironmentDetailsParams, params)
    cooldown = p.cooldown_timeout_ms / 1000 if p.cooldown_timeout_ms is not None else None
    registry = ls.registry
    report = await registry.environment_details(
        p.task_id, cooldown, settings=ls.settings, peek=p.peek
    )
    terminals = [
        terminal_info(registry, e.terminal)
        for e in registry.covered_entries(p.task_id)
        if not e.terminal.closed
    ]
    return wire.unstructure(wire.EnvironmentDetailsResult(report.markdown, terminals))


async def shutdown(ls: ConnectionServer, params: Any) -> None:
    # The IDE that started us is leaving: every terminal goes with it. A socket
    # client's shutdown ends only its own connection: the terminals are shared.
    if ls.connection.owner:
        await ls.registry.close()


Handler = Callable[[ConnectionServer, Any], Awaitable[Any]]

#: Every request's handler (``shutdown`` runs after pygls's own).
HANDLERS: dict[str, Handler] = {
    methods.ACQUIRE: acquire,
    methods.RUN: run,
    methods.WRITE: write,
    methods.RESIZE: resize,
    methods.KILL: kill,
    methods.CLOSE: close,
    methods.LIST: list_terminals,
    methods.OUTPUT: output,
    methods.GET: get,
    methods.REPLAY: replay,
    methods.RELEASE: release,
    methods.ENVIRONMENT_DETAILS: environment_details,
    methods.WAIT: wait,
    methods.SEND_KEYS: send_keys,
    methods.SHUTDOWN: shutdown,
}


class _Progress:
    """``$/progress`` for one run: begin, a report of the last line every 250 ms, end."""

    def __init__(self, ls: ConnectionServer, token: int | str, run: TerminalRun) -> None:
        self._ls = ls
        self._token = token
        self._run = run
        progress = ls.work_done_progress
        progress.begin(
            token,
            lsp.WorkDoneProgressBegin(
                title="terminal/run", message=run.command_line, cancellable=True
            ),
        )
        # window/workDoneProgress/cancel cancels this future: it interrupts the run.
        cancelled = progress.tokens.get(token)
        if cancelled is not None:
            cancelled.add_done_callback(lambda f: self._on_cancel(f))
        self._kill: asyncio.Future[None] | None = None
        self._task = asyncio.ensure_future(self._report())

    def _on_cancel(self, future: Any) -> None:
        if future.cancelled() and not self._run.done:
            terminal = self._ls.registry.get(self._run.terminal_id)
            self._kill = asyncio.ensure_future(terminal.kill())

    async def _report(self) -> None:
        last = ""
        started = time.monotonic()
        limits = TextLimits.of(self._ls.settings)
        while not self._run.done:
            await asyncio.sleep(PROGRESS_INTERVAL)
            line = last_line(self._run.output[-4096:].decode("utf-8", "replace"), limits)
            if line != last:
                last = line
                elapsed = time.monotonic() - started
                self._ls.work_done_progress.report(
                    self._token, lsp.WorkDoneProgressReport(message=f"{line} ({elapsed:.0f} s)")
                )

    def end(self) -> None:
        self._task.cancel()
        code = self._run.exit_code
        message = f"exit code {code}" if code is not None else self._run.state.value
        self._ls.work_done_progress.end(self._token, lsp.WorkDoneProgressEnd(message=message))
        # pygls never frees progress tokens; this run's is done.
        self._ls.work_done_progress.tokens.pop(self._token, None)
