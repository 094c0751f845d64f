"""The MCP tools: module-level functions over :class:`~protocol.mcp_session.McpSession`.

Each tool takes the MCP request context first (the SDK injects it; the session is the
server's lifespan state), checks nothing the registry checks itself, makes one or two
calls through the Python client, and answers with :mod:`protocol.mcp_results`.  A
registry error becomes a tool error (``isError``) whose text says what was wrong and
what to do instead.  :func:`tools` builds them all for an ``MCPServer``, with the
titles and descriptions of :mod:`protocol.mcp_texts`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import Field

from .daemon import BackgroundServerError
from .errors import InvalidParamsError, RegistryError
from .mcp_arguments import CheckedTool
from .mcp_results import (
    CloseResult,
    CommandResult,
    EnvironmentResult,
    InputResult,
    KillResult,
    TerminalList,
    json_list,
    render_close,
    render_command,
    render_environment,
    render_input,
    render_kill,
    render_terminals,
    tool_result,
)
from .mcp_session import McpSession, Progress, explain
from .mcp_texts import DESCRIPTIONS
from .types import TerminalInfo

__all__ = ["TOOLS", "tools"]


TerminalId = Annotated[
    int, Field(ge=1, description="The terminal, as given by run_command or list_terminals.")
]
OptionalTask = Annotated[
    str | None,
    Field(
        min_length=1,
        description="Another task's id instead of this session's (rarely needed).",
    ),
]


def _state(ctx: Context) -> McpSession:
    session = ctx.request_context.lifespan_context
    assert isinstance(session, McpSession)
    return session


async def _session(ctx: Context) -> McpSession:
    """The session, connected (again, if its server went away since the last call)."""
    session = _state(ctx)
    with _tool_errors():
        await session.ready()
    return session


def _task(ctx: Context, given: str | None) -> str:
    if given:
        return given
    params = ctx.session.client_params
    return _state(ctx).task_id(params.client_info.name if params is not None else None)


def _progress(ctx: Context) -> Progress | None:
    """A reporter when the client asked for progress (sent a progress token)."""
    meta: Any = ctx.request_context.meta
    if not meta or meta.get("progress_token") is None:
        return None

    async def report(elapsed: float, message: str) -> None:
        await ctx.report_progress(round(elapsed, 1), None, message)

    return report


@contextlib.contextmanager
def _tool_errors() -> Iterator[None]:
    """Registry errors and bad values as tool errors (isError) the model can act on."""
    try:
        yield
    except RegistryError as error:
        raise ToolError(explain(error)) from None
    except ValueError as error:
        raise ToolError(str(error)) from None
    except ConnectionError:
        raise ToolError(
            "the terminal-registry server went away (stopped, or it died): its terminals "
            "and their commands are gone; the next call reaches a server again"
        ) from None
    except BackgroundServerError as error:
        raise ToolError(f"no terminal-registry server: {error}") from None


def _wait_bound(session: McpSession, asked: float | None) -> float:
    bound = session.settings.call_timeout
    return bound if asked is None else min(asked, bound)


# -- the tools ---------------------------------------------------------------------------


async def run_command(
    ctx: Context,
    command: Annotated[
        str,
        Field(
            min_length=1,
            description="The command line as typed at a prompt: pipes, &&, several lines "
            "are fine. Do not end it with & (use background).",
        ),
    ],
    cwd: Annotated[
        str | None,
        Field(
            description="Directory to run in: absolute, or relative to the directory this "
            "server started in (~ works). Omit to continue where your previous command "
            "left the shell."
        ),
    ] = None,
    timeout_seconds: Annotated[
        float | None,
        Field(
            gt=0,
            le=2_000_000,
            description="End the command (Ctrl-C, then its process tree) after this many "
            "seconds. Omit for no limit; the call itself returns early either way.",
        ),
    ] = None,
    background: Annotated[
        bool,
        Field(
            description="Return as soon as it has started: for servers, watchers and long "
            "builds. Follow it with read_output, wait_for_command or environment_details."
        ),
    ] = False,
    yield_on_input: Annotated[
        bool,
        Field(
            description="Return as soon as the command waits for input (a prompt, a "
            "password, a pager), where the server can tell, so you can answer it."
        ),
    ] = True,
    terminal_id: Annotated[
        int | None,
        Field(
            ge=1,
            description="Run in this idle terminal, where its shell stands, instead "
            "of choosing one by cwd (give one or the other).",
        ),
    ] = None,
    task_id: OptionalTask = None,
) -> Annotated[CallToolResult, CommandResult]:
    session = await _session(ctx)
    task = _task(ctx, task_id)
    with _tool_errors():
        run = await session.start(
            command, task=task, cwd=cwd, terminal_id=terminal_id, timeout=timeout_seconds
        )
        if not background:
            bound = session.settings.call_timeout
            run = await session.follow(
                run.terminal_id,
                run.run_id,
                bound,
                yield_on_input=yield_on_input,
                progress=_progress(ctx),
            )
        result = await session.result(run, read=not background)
    if background:
        result.next_step = (
            f"Started in the background in terminal {run.terminal_id}: read_output shows "
            "its output, wait_for_command waits for it (and says when it asks for input), "
            "kill_command stops it, and environment_details reports it once it ends."
        )
    return tool_result(render_command(result, show_output=not background), result)


async def wait_for_command(
    ctx: Context,
    terminal_id: TerminalId,
    max_wait_seconds: Annotated[
        float | None,
        Field(gt=0, description="Wait at most this long (capped by the server's call limit)."),
    ] = None,
    yield_on_input: Annotated[
        bool,
        Field(
            description="Also return as soon as the command waits for input (a question, a "
            "password, a key in a pager), so you can answer it. False: wait for the end."
        ),
    ] = True,
) -> Annotated[CallToolResult, CommandResult]:
    session = await _session(ctx)
    with _tool_errors():
        # The terminal's current run, else its last (which answers at once).
        run = await session.follow(
            terminal_id,
            None,
            _wait_bound(session, max_wait_seconds),
            yield_on_input=yield_on_input,
            progress=_progress(ctx),
        )
        result = await session.result(run)
    return tool_result(render_command(result), result)


async def write_input(
    ctx: Context,
    terminal_id: TerminalId,
    text: Annotated[str, Field(description="What to type, e.g. y, a name, a password.")],
    press_enter: Annotated[bool, Field(description="Press Enter after the text.")] = True,
) -> Annotated[CallToolResult, InputResult]:
    data = text + ("\r" if press_enter else "")
    return await _send(ctx, terminal_id, data)


async def send_keys(
    ctx: Context,
    terminal_id: TerminalId,
    keys: Annotated[
        list[str],
        Field(
            min_length=1,
            description="Keys in order: named keys (Enter, Escape, Tab, BTab, Backspace, "
            "Space, Up, Down, Left, Right, Home, End, Insert, Delete, PageUp, PageDown, "
            "F1-F12); with modifiers C- (Ctrl), M- (Alt), S- (Shift), e.g. C-c, C-d, M-x, "
            "S-Tab; any other string is typed as it is.",
        ),
    ],
) -> Annotated[CallToolResult, InputResult]:
    session = await _session(ctx)
    with _tool_errors():
        info = await session.client.get(terminal_id)
        try:
            await session.client.send_keys(terminal_id, keys)
        except InvalidParamsError as error:
            # Its remedy names the protocol's request; the model has the tool.
            raise ToolError(error.message.replace("terminal/write", "write_input")) from None
    return _sent(terminal_id, json_list(keys), info)


async def _send(ctx: Context, terminal_id: int, data: str) -> CallToolResult:
    session = await _session(ctx)
    with _tool_errors():
        if not data:
            raise ValueError("nothing to send: text is empty and press_enter is false")
        info = await session.client.get(terminal_id)
        await session.client.write(terminal_id, data)
    sent = repr(data)[1:-1]  # Enter shows as \r
    if info.state == "waitingForPassword":
        # Not repeated into the host's transcript and logs.
        secret = data.removesuffix("\r")
        sent = f"({len(secret)} characters, not shown)" + ("\\r" if secret != data else "")
    return _sent(terminal_id, sent, info)


def _sent(terminal_id: int, sent: str, info: TerminalInfo) -> CallToolResult:
    step = (
        "The command gets it if it reads input; if not, its shell reads it once the "
        f"command ends (a line then runs as a command). Call wait_for_command with "
        f"terminal_id {terminal_id} to see what the command does with it."
        if info.busy
        else "No command was running: the shell itself received it (a command line "
        "typed at the prompt runs when Enter is pressed)."
    )
    # While busy, the terminal's last command is the one running.
    command = info.last_command if info.busy else None
    result = InputResult(
        terminal_id=terminal_id, sent=sent, busy=info.busy, command=command, next_step=step
    )
    return tool_result(render_input(result), result)


async def read_output(
    ctx: Context, terminal_id: TerminalId
) -> Annotated[CallToolResult, CommandResult]:
    session = await _session(ctx)
    with _tool_errors():
        info = await session.client.get(terminal_id)  # an unknown id is an error
        if info.last_command is None and not info.busy:
            result = CommandResult(
                terminal_id=terminal_id,
                run_id=None,
                command=None,
                state="idle",
                exit_code=None,
                signal=None,
                cwd=info.cwd,
                duration_seconds=None,
                output="",
                task_id=info.task_id,
            )
        else:
            # Not waiting: the terminal's current run (else its last) as it stands.
            run = await session.client.wait(terminal_id=terminal_id, timeout=0)
            result = await session.result(run)
    return tool_result(render_command(result, output_label="new output"), result)


async def list_terminals(
    ctx: Context,
    only_mine: Annotated[bool, Field(description="Only this session's terminals.")] = False,
    task_id: Annotated[
        str | None, Field(min_length=1, description="Only this task's terminals.")
    ] = None,
) -> Annotated[CallToolResult, TerminalList]:
    session = await _session(ctx)
    task = _task(ctx, None)
    with _tool_errors():
        infos = await session.client.list(task if only_mine else task_id)
    result = TerminalList(task_id=task, terminals=[session.summary(t, task) for t in infos])
    return tool_result(render_terminals(result), result)


async def kill_command(
    ctx: Context, terminal_id: TerminalId
) -> Annotated[CallToolResult, KillResult]:
    session = await _session(ctx)
    with _tool_errors():
        info = await session.client.get(terminal_id)  # (an unknown terminal: its error)
        interrupted = await session.interrupt(terminal_id, None) if info.busy else None
        if interrupted is None:  # nothing ran, or its terminal went meanwhile
            result = KillResult(terminal_id=terminal_id, killed=False, result=None)
            return tool_result(render_kill(result), result)
        run, killed = interrupted
        # Its end is shown either way: one that ended just before the kill has output
        # the model has not seen, and nothing else will hand it over now.
        command = await session.result(run)
    result = KillResult(terminal_id=terminal_id, killed=killed, result=command)
    return tool_result(render_kill(result), result)


async def close_terminal(
    ctx: Context, terminal_id: TerminalId
) -> Annotated[CallToolResult, CloseResult]:
    session = await _session(ctx)
    with _tool_errors():
        await session.client.close_terminal(terminal_id)
    result = CloseResult(terminal_id=terminal_id, closed=True)
    return tool_result(render_close(result), result)


async def environment_details(
    ctx: Context, task_id: OptionalTask = None
) -> Annotated[CallToolResult, EnvironmentResult]:
    session = await _session(ctx)
    task = _task(ctx, task_id)
    cooldown = min(5.0, session.settings.call_timeout)
    with _tool_errors():
        details = await session.client.environment_details(task, cooldown_timeout=cooldown)
    result = EnvironmentResult(
        task_id=task,
        markdown=details.markdown,
        terminals=[session.summary(t, task) for t in details.terminals],
    )
    return tool_result(render_environment(result), result)


# -- registration ----------------------------------------------------------------------------

_READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)
_ACTS = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
_ENDS = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)

#: name -> (function, annotations); titles and descriptions are in mcp_texts.
TOOLS: dict[str, tuple[Callable[..., Any], ToolAnnotations]] = {
    "run_command": (run_command, _ACTS),
    "wait_for_command": (wait_for_command, _READ_ONLY),
    "write_input": (write_input, _ACTS),
    "send_keys": (send_keys, _ACTS),
    "read_output": (read_output, _READ_ONLY),
    "list_terminals": (list_terminals, _READ_ONLY),
    "kill_command": (kill_command, _ENDS),
    "close_terminal": (close_terminal, _ENDS),
    "environment_details": (environment_details, _READ_ONLY),
}


def tools(call_timeout: float) -> list[Tool]:
    """Every tool, for ``MCPServer(tools=...)``: built as ``MCPServer.add_tool`` builds
    them, as :class:`~protocol.mcp_arguments.CheckedTool` so that bad arguments are
    told in words."""
    assert TOOLS.keys() == DESCRIPTIONS.keys()
    built: list[Tool] = []
    for name, (fn, hints) in TOOLS.items():
        title, description = DESCRIPTIONS[name]
        built.append(
            CheckedTool.from_function(
                fn,
                name=name,
                title=title,
                description=description.format(timeout=call_timeout),
                annotations=hints,
            )
        )
    return built
