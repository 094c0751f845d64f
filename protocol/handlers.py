"""One small handler per PROTOCOL.md method, each a thin call into the registry.

Handlers take the raw params (a dict, or None), structure them strictly into the
types of :mod:`protocol.types`, call the registry, and return wire dicts.  Engine
exceptions become the JSON-RPC errors of :mod:`protocol.errors`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp

from registry.output import compress_terminal_output
from registry.run import TerminalRun

from . import types as wire
from .errors import to_rpc_error

if TYPE_CHECKING:
    from .server import RegistryLanguageServer, RegistryServer

__all__ = ["register_handlers", "run_result"]

Handler = Callable[[Any], Awaitable[Any]]

#: $/progress reports at most this often.
PROGRESS_INTERVAL = 0.25


def _rpc(handler: Handler) -> Handler:
    """Engine exceptions become JSON-RPC errors; cancellation passes through."""

    @functools.wraps(handler)
    async def wrapper(params: Any) -> Any:
        try:
            return await handler(params)
        except asyncio.CancelledError:
            raise
        except Exception as error:
            raise to_rpc_error(error) from None

    return wrapper


def run_result(hub: RegistryServer, run: TerminalRun) -> wire.RunResult:
    settings = hub.settings
    text = run.text()
    output = compress_terminal_output(
        text,
        settings.output_line_limit,
        settings.output_character_limit,
        settings.compress_progress_bar,
    )
    stdout = run.stdout
    stderr = run.stderr
    return wire.RunResult(
        run_id=run.id,
        terminal_id=run.terminal_id,
        command_line=run.command_line,
        state=run.state.value,
        exit_code=run.exit_code,
        signal=run.signal,
        output=output,
        truncated=run.dropped_bytes > 0 or "omitted...]" in output[: len(output)],
        cwd=run.cwd,
        duration_ms=round(run.duration * 1000),
        stdout=stdout.decode("utf-8", "replace") if stdout is not None else None,
        stderr=stderr.decode("utf-8", "replace") if stderr is not None else None,
        note=run.note,
    )


def register_handlers(ls: RegistryLanguageServer) -> None:
    hub = ls.hub
    registry = hub.registry

    def feature(name: str) -> Callable[[Handler], Handler]:
        def register(handler: Handler) -> Handler:
            wrapped = _rpc(handler)
            ls.feature(name)(wrapped)
            return wrapped

        return register

    @feature("terminal/acquire")
    async def acquire(params: Any) -> Any:
        p = wire.structure_params(wire.AcquireParams, params)
        terminal = await registry.get_or_create(p.cwd, p.task_id, p.provider)
        return wire.unstructure(hub.info(terminal))

    @feature("terminal/run")
    async def run(params: Any) -> Any:
        p = wire.structure_params(wire.RunParams, params)
        timeout = p.timeout_ms / 1000 if p.timeout_ms is not None else None
        if p.terminal_id is None and p.cwd is None:
            raise ValueError("terminal/run needs a terminalId or a cwd")
        started = await registry.run(
            p.command,
            cwd=p.cwd,
            task_id=p.task_id,
            terminal_id=p.terminal_id,
            provider=p.provider or "shell",
            timeout=timeout,
            env=p.env,
            background=True,
        )
        if p.background:
            return wire.unstructure(run_result(hub, started))
        progress = _Progress(ls, p.work_done_token, started) if p.work_done_token else None
        try:
            await started.wait()
        except asyncio.CancelledError:
            # $/cancelRequest: interrupt the command (Ctrl-C, then its process tree).
            with contextlib.suppress(Exception):
                await asyncio.shield(registry.get(started.terminal_id).kill())
            raise
        finally:
            if progress is not None:
                progress.end()
        registry.mark_retrieved(started)
        return wire.unstructure(run_result(hub, started))

    @feature("terminal/write")
    async def write(params: Any) -> Any:
        p = wire.structure_params(wire.WriteParams, params)
        await registry.get(p.terminal_id).write(p.data)
        return None

    @feature("terminal/resize")
    async def resize(params: Any) -> Any:
        p = wire.structure_params(wire.ResizeParams, params)
        registry.get(p.terminal_id).resize(p.cols, p.rows)
        return None

    @feature("terminal/kill")
    async def kill(params: Any) -> Any:
        p = wire.structure_params(wire.TerminalIdParams, params)
        await registry.get(p.terminal_id).kill()
        return None

    @feature("terminal/close")
    async def close(params: Any) -> Any:
        p = wire.structure_params(wire.TerminalIdParams, params)
        await registry.close_terminal(p.terminal_id)
        return None

    @feature("terminal/list")
    async def list_terminals(params: Any) -> Any:
        p = wire.structure_params(wire.ListParams, params)
        return [wire.unstructure(hub.info(t)) for t in registry.list(p.task_id, p.busy)]

    @feature("terminal/output")
    async def output(params: Any) -> Any:
        p = wire.structure_params(wire.TerminalIdParams, params)
        return wire.unstructure(wire.OutputResult(registry.unretrieved_output(p.terminal_id)))

    @feature("terminal/get")
    async def get(params: Any) -> Any:
        p = wire.structure_params(wire.TerminalIdParams, params)
        return wire.unstructure(hub.info(registry.get(p.terminal_id)))

    @feature("terminal/replay")
    async def replay(params: Any) -> Any:
        p = wire.structure_params(wire.ReplayParams, params)
        if p.max_bytes is not None and p.max_bytes < 0:
            raise ValueError("maxBytes must not be negative")
        terminal = registry.get(p.terminal_id)
        # didWrite still gathering is sent first: everything in the replay was then
        # already sent, and every didWrite after this answer is new to a mirror.
        hub.flush_writes(p.terminal_id)
        data = terminal.replay(p.max_bytes)
        return wire.unstructure(wire.ReplayResult(data.decode("utf-8", "replace")))

    @feature("terminal/release")
    async def release(params: Any) -> Any:
        p = wire.structure_params(wire.ReleaseParams, params)
        registry.release(p.task_id)
        return None

    @feature("environment/details")
    async def environment_details(params: Any) -> Any:
        p = wire.structure_params(wire.EnvironmentDetailsParams, params)
        cooldown = p.cooldown_timeout_ms / 1000 if p.cooldown_timeout_ms is not None else None
        report = await registry.environment_details(p.task_id, cooldown)
        terminals = [
            hub.info(e.terminal)
            for e in registry.covered_entries(p.task_id)
            if not e.terminal.closed
        ]
        return wire.unstructure(wire.EnvironmentDetailsResult(report.markdown, terminals))

    @ls.feature(lsp.SHUTDOWN)
    async def shutdown(*_: Any) -> None:
        # The IDE that started us is leaving: every terminal goes with it. A socket
        # client's shutdown ends only its own connection: the terminals are shared.
        if ls.connection.owner:
            await registry.close()


class _Progress:
    """``$/progress`` for one run: begin, a report of the last line every 250 ms, end."""

    def __init__(self, ls: RegistryLanguageServer, token: int | str, run: TerminalRun) -> None:
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
            terminal = self._ls.hub.registry.get(self._run.terminal_id)
            self._kill = asyncio.ensure_future(terminal.kill())

    async def _report(self) -> None:
        last = ""
        started = time.monotonic()
        while not self._run.done:
            await asyncio.sleep(PROGRESS_INTERVAL)
            text = self._run.output[-4096:].decode("utf-8", "replace")
            lines = [line for line in compress_terminal_output(text).splitlines() if line.strip()]
            line = lines[-1] if lines else ""
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
