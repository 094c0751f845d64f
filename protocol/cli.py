"""The ``terminal-registry`` command line.

``serve`` runs the JSON-RPC server (``--stdio`` for an IDE, ``--socket PATH`` for
any number of clients).  ``run``, ``env``, ``list``, ``kill`` and ``close`` are
clients of a server: the one named by ``--socket`` or ``$TERMINAL_REGISTRY_SOCKET``,
else a per-user background server on a default socket, started on first use (and
said so), so that terminals persist from one CLI call to the next; ``stop`` ends
it.  ``--json`` makes any command print machine-readable JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from . import daemon, methods
from . import types as wire
from .client import RegistryClient
from .errors import RegistryError, UnknownTerminalError

__all__ = ["main"]

# -- serve -------------------------------------------------------------------------------


def _serve(args: argparse.Namespace) -> int:
    import logging

    from .server import Hub

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    if args.log_level.upper() != "DEBUG":
        # pygls logs every answered error with a traceback; the client has the answer.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)
    if not args.stdio and not args.socket:
        print("terminal-registry serve: give --stdio, --socket PATH, or both", file=sys.stderr)
        return 2

    async def serve() -> int:
        server = Hub()
        if args.socket:
            await server.serve_socket(args.socket)
            daemon.write_pid_file(args.socket)
        if args.ready_fd is not None:
            os.write(args.ready_fd, b"ready\n")
            os.close(args.ready_fd)
        try:
            return await server.run(stdio=args.stdio, socket_path=None)
        finally:
            if args.socket:
                with contextlib.suppress(OSError):
                    os.unlink(daemon.pid_file(args.socket))

    try:
        return asyncio.run(serve())
    except (OSError, PermissionError) as error:
        print(f"terminal-registry serve: {error}", file=sys.stderr)
        return 2


def _stop(args: argparse.Namespace) -> int:
    path, _ = daemon.resolve_socket(args.socket, start=False)
    pid = daemon.stop_server(path)
    if pid is None:
        _emit(args, {"stopped": False, "socket": path}, f"no server running on {path}")
        return 1
    _emit(args, {"stopped": True, "socket": path, "pid": pid}, f"stopped the server on {path}")
    return 0


# -- client commands -----------------------------------------------------------------------


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(text)


async def _connect(args: argparse.Namespace) -> RegistryClient:
    path, started = daemon.resolve_socket(args.socket, start=True)
    if started:
        print(
            f"terminal-registry: started a background server on {path} "
            "(terminals persist between calls; `terminal-registry stop` ends it)",
            file=sys.stderr,
        )
    return await RegistryClient.connect(path)


async def _run(args: argparse.Namespace) -> int:
    client = await _connect(args)
    try:
        return await _run_with(client, args)
    finally:
        await client.close()


async def _run_with(client: RegistryClient, args: argparse.Namespace) -> int:
    """Start in the background and follow the notifications: output live, then the end.

    Started in the background so that the run's output stays "not yet retrieved" for
    ``terminal-registry env``, as it would for an agent's model.
    """
    out = sys.stdout.buffer
    buffered: dict[int, list[str]] = {}
    ended: dict[int, dict[str, Any]] = {}
    mine: int | None = None
    done = asyncio.Event()

    def on_write(params: dict[str, Any]) -> None:
        run_id = params.get("runId")
        if run_id is None:
            return
        if mine is None:
            buffered.setdefault(run_id, []).append(params["data"])
        elif run_id == mine and not args.json:
            out.write(params["data"].encode("utf-8"))
            out.flush()

    def on_end(params: dict[str, Any]) -> None:
        ended[params["runId"]] = params
        if params["runId"] == mine:
            done.set()

    seen: dict[int, dict[str, Any]] = {}

    def on_terminal(params: dict[str, Any]) -> None:
        seen[params["id"]] = params

    client.on(methods.DID_WRITE, on_write)
    client.on(methods.DID_END_RUN, on_end)
    client.on(methods.DID_OPEN, on_terminal)
    client.on(methods.DID_CHANGE, on_terminal)
    started = await client.run(
        args.command,
        cwd=os.path.abspath(args.cwd),
        task_id=args.task,
        provider=args.provider,
        timeout=args.timeout,
        background=True,
    )
    mine = started.run_id
    if not args.json:
        for chunk in buffered.pop(mine, []):
            out.write(chunk.encode("utf-8"))
        out.flush()
    if mine in ended:
        done.set()
    loop = asyncio.get_running_loop()
    with contextlib.suppress(NotImplementedError):
        loop.add_signal_handler(
            signal.SIGINT, lambda: asyncio.ensure_future(client.kill(started.terminal_id))
        )
    await done.wait()
    end = ended[mine]
    try:
        terminal = await client.get(started.terminal_id)
    except UnknownTerminalError:
        # The command ended its shell (``exit``): the terminal is gone; its last
        # reported state stands.
        terminal = wire.converter.structure(seen[started.terminal_id], wire.TerminalInfo)
    code = end.get("exitCode")
    summary = {
        "runId": mine,
        "terminalId": started.terminal_id,
        "commandLine": started.command_line,
        "state": end["state"],
        "exitCode": code,
        "signal": _signal_name(code),
        "cwd": terminal.cwd,
        "shell": terminal.shell,
        "provider": terminal.provider,
        "shellIntegration": terminal.shell_integration,
        "note": started.note,
    }
    if args.json:
        summary["output"] = await client.output(started.terminal_id)
        print(json.dumps(summary, indent=2))
    else:
        lines = [
            f"exit code: {code if code is not None else 'unknown'}"
            + (f" ({summary['signal']})" if summary["signal"] else ""),
            f"state: {end['state']}",
            f"cwd: {terminal.cwd}",
            f"terminal: {terminal.id} ({terminal.provider}, {terminal.shell}, "
            f"{terminal.shell_integration} integration)",
        ]
        if started.note:
            lines.append(f"note: {started.note}")
        print("\n".join(f"[terminal-registry] {line}" for line in lines), file=sys.stderr)
    if code is not None:
        return int(code) & 0xFF
    return 0 if end["state"] == "completed" else 1


def _signal_name(code: int | None) -> str | None:
    """``SIGINT`` for 130: the shell's 128+N convention (as RunResult's ``signal``)."""
    if code is None or not 128 < code <= 128 + 64:
        return None
    try:
        return signal.Signals(code - 128).name
    except ValueError:
        return None


async def _env(args: argparse.Namespace) -> int:
    client = await _connect(args)
    try:
        details = await client.environment_details(args.task, args.cooldown)
    finally:
        await client.close()
    if args.json:
        from .types import unstructure

        print(
            json.dumps(
                {"markdown": details.markdown, "terminals": unstructure(details.terminals)},
                indent=2,
            )
        )
    else:
        print(details.markdown or "(no terminal has output not yet seen)")
    return 0


async def _list(args: argparse.Namespace) -> int:
    from .types import unstructure

    client = await _connect(args)
    try:
        terminals = await client.list(args.task)
    finally:
        await client.close()
    if args.json:
        print(json.dumps(unstructure(terminals), indent=2))
        return 0
    if not terminals:
        print("(no terminals)")
    for t in terminals:
        state = "busy" if t.busy else "idle"
        if t.hot:
            state += ",hot"
        print(
            f"{t.id:>4}  {t.provider:<10} {state:<9} {t.shell_integration:<5} "
            f"task={t.task_id or '-':<12} {t.cwd}  {t.last_command or ''}"
        )
    return 0


async def _terminal_action(args: argparse.Namespace) -> int:
    client = await _connect(args)
    try:
        if args.subcommand == "kill":
            await client.kill(args.terminal_id)
        else:
            await client.close_terminal(args.terminal_id)
    finally:
        await client.close()
    verb = "killed the command in" if args.subcommand == "kill" else "closed"
    _emit(
        args,
        {"terminalId": args.terminal_id, args.subcommand: True},
        f"{verb} terminal {args.terminal_id}",
    )
    return 0


# -- parsing -----------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--socket", help="server socket (default: $TERMINAL_REGISTRY_SOCKET)")
    common.add_argument("--json", action="store_true", help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="terminal-registry",
        description="Own real shells in real PTYs for editors and agents.",
    )
    commands = parser.add_subparsers(dest="subcommand", required=True)

    serve = commands.add_parser("serve", help="serve the registry over JSON-RPC")
    serve.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout")
    serve.add_argument("--socket", help="also serve any number of clients on this socket")
    serve.add_argument("--log-level", default="WARNING")
    serve.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)

    run = commands.add_parser(
        "run",
        parents=[common],
        help="run a command in a real terminal; print exit code and cwd",
        description="Run COMMAND in a terminal of the server (output streams live), "
        "then print the exit code and cwd. Exits with the command's exit code.",
    )
    run.add_argument("--task", help="task id the terminal is bound to")
    run.add_argument("--cwd", default=os.getcwd(), help="directory to run in")
    run.add_argument("--provider", choices=("shell", "subprocess"), default="shell")
    run.add_argument("--timeout", type=float, help="seconds before the command is ended")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND")

    env = commands.add_parser("env", parents=[common], help="print the environment details")
    env.add_argument("--task", help="task id (default: every terminal)")
    env.add_argument("--cooldown", type=float, help="seconds to wait for hot terminals")

    lst = commands.add_parser("list", parents=[common], help="list the terminals")
    lst.add_argument("--task", help="only this task's terminals")

    for name, text in (("kill", "end a terminal's running command"), ("close", "close a terminal")):
        action = commands.add_parser(name, parents=[common], help=text)
        action.add_argument("terminal_id", type=int, metavar="ID")

    commands.add_parser("stop", parents=[common], help="stop the background server")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.subcommand == "serve":
        return _serve(args)
    if args.subcommand == "stop":
        return _stop(args)
    if args.subcommand == "run":
        words = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not words:
            parser.error("run needs a command after --")
        args.command = " ".join(words)
    handlers = {"run": _run, "env": _env, "list": _list, "kill": _terminal_action}
    handler = handlers.get(args.subcommand, _terminal_action)
    try:
        return asyncio.run(handler(args))
    except RegistryError as error:
        print(f"terminal-registry: {error.message} (error {error.code})", file=sys.stderr)
        return 2
    except daemon.BackgroundServerError as error:
        print(f"terminal-registry: {error}", file=sys.stderr)
        return 2
    except (ConnectionError, FileNotFoundError) as error:
        print(f"terminal-registry: cannot reach the server: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
