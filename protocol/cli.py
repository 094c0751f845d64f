"""``terminal-registry``: the command line.

``serve`` runs the JSON-RPC server; ``mcp`` serves MCP agents over stdio
(:mod:`protocol.mcp_face`).  ``run`` (:mod:`protocol.cli_run`), ``attach``
(:mod:`protocol.attach`), ``env``, ``list``, ``kill`` and ``close`` are clients of a
server (:mod:`protocol.daemon` says which, starting the per-user background server on
first use), so that terminals persist from one call to the next; ``stop`` ends it.
``--json`` makes any command print machine-readable JSON, errors included
(``{"error": {"code", "message"}}`` on stdout, exit 2).

Every call is a new process, so start-up is what a user waits for: this module and
the client it talks through (:mod:`protocol.blocking`) import only the standard
library's light modules; ``serve`` and ``mcp`` load what they need when asked for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import audit, cli_args, daemon, listing, methods
from .blocking import BlockingClient, ConnectionLost
from .cli_run import run
from .errors import RegistryError

__all__ = ["main"]


class CliError(Exception):
    """A failure to report: its message, and the JSON error code (None: not a server's)."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


# -- mcp, stop ---------------------------------------------------------------------------


def _mcp(argv: list[str]) -> int:
    try:  # the MCP SDK: optional, and heavy to import
        from .mcp_face import main as serve_mcp
    except ImportError as error:
        hint = "needs `pip install 'terminal-registry[mcp]'`"
        print(f"terminal-registry mcp: {hint} ({error})", file=sys.stderr)
        return 2
    return serve_mcp(argv)


def _stop(args: argparse.Namespace) -> int:
    path, _ = daemon.resolve_socket(args.socket, start=False)
    try:
        pid = daemon.stop_server(path)
    except daemon.NoServerError:
        _emit(args, {"stopped": False, "socket": path}, f"no server running on {path}")
        return 1
    except daemon.BackgroundServerError as error:
        _emit(args, {"stopped": False, "socket": path, "reason": str(error)}, str(error))
        return 1
    _emit(args, {"stopped": True, "socket": path, "pid": pid}, f"stopped the server on {path}")
    return 0


# -- talking to a server -----------------------------------------------------------------


def _emit(args: argparse.Namespace, data: Any, text: str) -> None:
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(text)


def _connect(args: argparse.Namespace) -> BlockingClient:
    path, may_start = daemon.socket_path(args.socket)
    try:
        return BlockingClient.connect(path)
    except ConnectionLost:
        raise
    except OSError as error:
        if not may_start:
            remedy = f"start one with `terminal-registry serve --socket {path}`"
            raise CliError(_unreachable(path, error, remedy)) from None
    # Nothing listens: start the user's background server. The failed connect was the
    # probe (probing first cost every call a second connection the server set up).
    if daemon.start_background_server(path):
        print(
            f"terminal-registry: started a background server on {path} "
            "(terminals persist between calls; `terminal-registry stop` ends it)",
            file=sys.stderr,
        )
    try:
        return BlockingClient.connect(path)
    except ConnectionLost:
        raise
    except OSError as error:
        raise CliError(_unreachable(path, error, f"see {daemon.log_path(path)}")) from None


def _unreachable(path: str, error: OSError, remedy: str) -> str:
    return f"cannot reach the server at {path} ({error.strerror or error}); {remedy}"


def _terminal(client: BlockingClient, terminal_id: int) -> dict[str, Any]:
    result: dict[str, Any] = client.request(methods.GET, {"terminalId": terminal_id})
    return result


# -- env, list, kill, close ----------------------------------------------------------------


def _env(args: argparse.Namespace, client: BlockingClient) -> int:
    params: dict[str, Any] = {}
    if args.task is not None:
        params["taskId"] = args.task
    if args.cooldown is not None:
        params["cooldownTimeoutMs"] = round(args.cooldown * 1000)
    # Without a task it is a person looking: the agents' output stays theirs to take.
    if args.peek or args.task is None:
        params["peek"] = True
    details = client.request(methods.ENVIRONMENT_DETAILS, params)
    if args.json:
        print(json.dumps(details, indent=2))
    else:
        print(details["markdown"] or "(no terminal has output not yet seen)")
    return 0


def _list(args: argparse.Namespace, client: BlockingClient) -> int:
    params = {"taskId": args.task} if args.task is not None else {}
    terminals: list[dict[str, Any]] = client.request(methods.LIST, params)
    if args.json:
        print(json.dumps(terminals, indent=2))
        return 0
    print(listing.table(terminals) if terminals else "(no terminals)")
    return 0


def _kill(args: argparse.Namespace, client: BlockingClient) -> int:
    busy = _terminal(client, args.terminal_id)["busy"]
    if busy:
        client.request(methods.KILL, {"terminalId": args.terminal_id})
    text = (
        f"killed the command in terminal {args.terminal_id}"
        if busy
        else f"terminal {args.terminal_id} has no command running: nothing to kill"
    )
    _emit(args, {"terminalId": args.terminal_id, "kill": busy}, text)
    return 0


def _close(args: argparse.Namespace, client: BlockingClient) -> int:
    client.request(methods.CLOSE, {"terminalId": args.terminal_id})
    _emit(
        args, {"terminalId": args.terminal_id, "close": True}, f"closed terminal {args.terminal_id}"
    )
    return 0


def _attach(args: argparse.Namespace, client: BlockingClient) -> int:
    from .attach import attach  # the console's imports, for this command only

    return attach(args, client)


_CLIENT_COMMANDS: dict[str, Callable[[argparse.Namespace, BlockingClient], int]] = {
    "run": run,
    "attach": _attach,
    "env": _env,
    "list": _list,
    "kill": _kill,
    "close": _close,
}


def main(argv: Sequence[str] | None = None) -> int:
    words = cli_args.command_first(list(sys.argv[1:] if argv is None else argv))
    if words[:1] == ["mcp"]:
        return _mcp(words[1:])
    parser, command = cli_args.parser(words)
    # A command's parser hands the words it does not know up to the top one, whose
    # error would print the top-level usage: the command's own says what it takes.
    args, unknown = parser.parse_known_args(words)
    if unknown:
        (command or parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    if command is not None:
        cli_args.check_numbers(args, command)
    if args.subcommand == "serve":
        from .serve import serve  # the server's imports, for this command only

        return serve(args)
    if args.subcommand == "log":
        path = args.path or os.environ.get(audit.AUDIT_LOG_VARIABLE)
        if not path:
            # No file is written unless the server was told one: there is none to guess.
            text = (
                "no audit log named: a server keeps one only when started with "
                f"`serve --audit-log PATH` or ${audit.AUDIT_LOG_VARIABLE} set; "
                "give --path PATH"
            )
            return _fail(args, text, text, None)
        try:
            return audit.print_log(path, as_json=args.json, last=args.last)
        except OSError as error:  # a directory, a file we may not read
            text = f"cannot read the audit log {error.filename}: {error.strerror or error}"
            return _fail(args, text, text, None)
    if args.subcommand == "run":
        assert command is not None  # the command named first is the one parsed
        words = args.command[1:] if args.command[:1] == ["--"] else args.command
        args.command = " ".join(words)
        if not args.command.strip():
            # The shell would run nothing and report a meaningless exit code; the
            # server refuses it too (InvalidParams naming `command`).
            what = "is empty or blank" if words else "is missing"
            command.error(f"the command {what}: give one after --, e.g. run -- 'make test'")
    try:
        if args.subcommand == "stop":
            return _stop(args)
        with _connect(args) as client:
            return _CLIENT_COMMANDS[args.subcommand](args, client)
    except RegistryError as error:
        return _fail(args, f"{error.message} (error {error.code})", error.message, error.code)
    except CliError as error:
        return _fail(args, error.message, error.message, error.code)
    except (daemon.BackgroundServerError, ConnectionLost) as error:
        return _fail(args, str(error), str(error), None)


def _fail(args: argparse.Namespace, text: str, message: str, code: int | None) -> int:
    if args.json:
        print(json.dumps({"error": {"code": code, "message": message}}, indent=2))
    else:
        print(f"terminal-registry: {text}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
