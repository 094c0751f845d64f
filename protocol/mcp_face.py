"""``terminal-registry mcp``: the registry's terminals as an MCP server over stdio.

Only wiring lives here.  The MCP side is the official MCP Python SDK's ``MCPServer``
(its stdio transport, framing, schemas and tool dispatch); the registry side is our
Python client (:mod:`protocol.client`), connected

* by default to the per-user background server on the default socket, started as the
  CLI starts it (:func:`protocol.daemon.resolve_socket`), so terminals outlive the agent
  and are shared with the CLI and the VS Code extension;
* with ``--socket PATH`` to the server listening there;
* with ``--standalone`` to a private ``serve --stdio`` child that ends with us.

Who ends what: stdin closing (the agent host went away) or SIGTERM/SIGINT/SIGHUP ends
the MCP server; a tool call still waiting on a command is cancelled, which interrupts
that command; the session's task is released, so its terminals stay (idle, or running
what was started in the background or already handed back as "running") for the next
session to reuse and to report.  A private server is shut down, closing every terminal.
See docs/mcp.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import partial
from typing import Any, cast

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server

from . import daemon
from .cli_args import add_log_level
from .client import RegistryClient
from .errors import RegistryError
from .mcp_session import McpSession, SessionSettings
from .mcp_stdio import open_stdio
from .mcp_texts import INSTRUCTIONS
from .mcp_tools import tools

__all__ = ["build_server", "main"]

#: Bound on ending: interrupting waited-on commands, releasing, closing a private server.
_CLOSE_TIMEOUT = 30.0


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("terminal-registry")
    except PackageNotFoundError:
        return "0"


def build_server(session: McpSession) -> MCPServer[McpSession]:
    """The MCP server: our tools and instructions; the session is its lifespan state."""

    @asynccontextmanager
    async def lifespan(_: MCPServer[McpSession]) -> AsyncIterator[McpSession]:
        yield session

    timeout = session.settings.call_timeout
    server: MCPServer[McpSession] = MCPServer(
        "terminal-registry",
        title="terminal-registry",
        description="Real, persistent shells in PTYs with exact exit codes and live cwd.",
        instructions=INSTRUCTIONS.format(timeout=timeout),
        version=_version(),
        lifespan=lifespan,
        log_level="WARNING",
        tools=tools(timeout),
    )
    return server


async def _connect(args: argparse.Namespace) -> RegistryClient:
    if args.standalone:
        return await RegistryClient.spawn()
    # Blocking (it may start the background server and wait for it): off the loop.
    path, started = await asyncio.to_thread(daemon.resolve_socket, args.socket, start=True)
    if started:
        print(
            f"terminal-registry mcp: started a background server on {path} "
            "(terminals persist; `terminal-registry stop` ends it)",
            file=sys.stderr,
        )
        _reap_when_it_ends(path)
    try:
        return await RegistryClient.connect(path)
    except OSError as error:
        remedy = (
            f"start one with `terminal-registry serve --socket {path}`"
            if args.socket
            else f"see {daemon.log_path(path)}"
        )
        raise daemon.BackgroundServerError(
            f"cannot reach the server at {path} ({error.strerror or error}); {remedy}"
        ) from None


def _reap_when_it_ends(socket_path: str) -> None:
    """The background server just started is our child (the CLI exits at once and leaves
    it to init; we live on): wait for it in a thread, so that when it ends -- by
    ``terminal-registry stop``, which waits for it to go -- it leaves no zombie."""
    try:
        with open(daemon.pid_file(socket_path)) as f:
            pid = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return
    threading.Thread(target=_wait_child, args=(pid,), name="reap-server", daemon=True).start()


def _wait_child(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):  # not ours after all: nothing to reap
        os.waitpid(pid, 0)


async def _serve(args: argparse.Namespace) -> int:
    client = await _connect(args)
    settings = SessionSettings(call_timeout=args.call_timeout)
    if args.cwd:
        settings.cwd = os.path.abspath(os.path.expanduser(args.cwd))
    session = McpSession(partial(_connect, args), client, settings)
    server = build_server(session)
    # A private server ends with its terminals; on a shared one the session's task is
    # released and its terminals stay for the next session.
    release = not args.standalone
    async with anyio.create_task_group() as group:
        group.start_soon(_stop_on_signal, session, release)
        try:
            await _run_stdio(server)  # until stdin closes
        finally:
            with anyio.CancelScope(shield=True), anyio.move_on_after(_CLOSE_TIMEOUT):
                await session.close(release=release)
        group.cancel_scope.cancel()
    return 0


async def _run_stdio(server: MCPServer[McpSession]) -> None:
    """What ``server.run_stdio_async()`` does, on the event loop's own pipes.

    The SDK's transport and framing (``stdio_server``), given streams without worker
    threads (:mod:`protocol.mcp_stdio`).  ``MCPServer`` has no public way to run on
    given streams, so this reaches for its low-level server as the SDK's own in-memory
    client does; an SDK without that attribute gets its threaded default.
    """
    lowlevel: Any = getattr(server, "_lowlevel_server", None)
    if lowlevel is None:
        await server.run_stdio_async()
        return
    stdin, stdout = await open_stdio()
    async with stdio_server(stdin=cast(Any, stdin), stdout=cast(Any, stdout)) as (read, write):
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


async def _stop_on_signal(session: McpSession, release: bool) -> None:
    """SIGTERM, SIGINT, SIGHUP: end what a closed stdin would end, then die of the signal.

    Not by cancelling the server: with the SDK's default transport, stdin is read in a
    worker thread that no cancellation stops, so the server cannot finish while its
    stdin stays open.
    """
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for signum in signals:
            with anyio.move_on_after(_CLOSE_TIMEOUT):
                await session.stop(release=release)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return


def parser() -> argparse.ArgumentParser:
    """``terminal-registry mcp``'s options."""
    mcp = argparse.ArgumentParser(
        prog="terminal-registry mcp",
        description="An MCP server over stdio for agents (Claude Code, Codex, Cursor, VS "
        "Code): run_command, wait_for_command, write_input, send_keys, ... on the per-user "
        "background server's terminals (see docs/mcp.md).",
    )
    place = mcp.add_mutually_exclusive_group()
    place.add_argument("--socket", help="the server's socket (default: as for `run`)")
    place.add_argument(
        "--standalone",
        action="store_true",
        help="use a private server that ends, with its terminals, when this does",
    )
    mcp.add_argument(
        "--call-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="the longest a tool call waits on a command before returning its output so "
        "far (default 30; the command keeps running)",
    )
    mcp.add_argument(
        "--cwd",
        metavar="DIR",
        help="where commands run when the model gives no cwd (default: where this starts)",
    )
    add_log_level(mcp)
    return mcp


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    if args.log_level.upper() != "DEBUG":
        # pygls logs every error answer it reads with a traceback; the tool reports it.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)
    if args.call_timeout <= 0:
        print("terminal-registry mcp: --call-timeout must be positive", file=sys.stderr)
        return 2
    if args.cwd and not os.path.isdir(os.path.expanduser(args.cwd)):
        print(f"terminal-registry mcp: --cwd {args.cwd} is not a directory", file=sys.stderr)
        return 2
    try:
        return asyncio.run(_serve(args))
    except (daemon.BackgroundServerError, RegistryError, OSError) as error:
        print(f"terminal-registry mcp: {error}", file=sys.stderr)
        return 2
