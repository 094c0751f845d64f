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
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import audit, daemon, listing, methods
from .blocking import BlockingClient, ConnectionLost
from .cli_run import EXIT_WAITING, LIMIT_FLAGS, run
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


# -- parsing -----------------------------------------------------------------------------


#: Each command's one-line help, in the order ``--help`` lists them.
_COMMANDS = {
    "serve": "serve the registry over JSON-RPC",
    "run": "run a command in a real terminal; print exit code and cwd",
    "attach": "attach this terminal to a registry terminal (Ctrl-] detaches)",
    "env": "print the environment details",
    "list": "list the terminals",
    "kill": "end a terminal's running command",
    "close": "close a terminal",
    "stop": "stop the background server",
    "log": "print the audit log (see serve --audit-log)",
    # Its options are the face's own (protocol/mcp_face.py): main() hands it its argv.
    "mcp": "serve the terminals to MCP agents over stdio",
}
#: Commands that speak to a server, with the options they share.
_CLIENTS = {"run", "attach", "env", "list", "kill", "close", "stop"}


def _parser(
    words: Sequence[str],
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The command line's parser, and the parser of the command named first in
    ``words`` (its errors print its usage).  Only that command gets its options
    (``--help`` without a command lists commands, not options): building every
    command's took a tenth of a CLI call's own time, and one call uses one command."""
    chosen = words[0] if words and words[0] in _COMMANDS else None
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--socket",
        help="the server's socket (default: $TERMINAL_REGISTRY_SOCKET, else the per-user "
        "background server's, started on first use)",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")

    parser = argparse.ArgumentParser(
        prog="terminal-registry",
        description="Own real shells in real PTYs for editors and agents.",
    )
    commands = parser.add_subparsers(dest="subcommand", required=True)
    command = None
    for name, text in _COMMANDS.items():
        if name != chosen:
            commands.add_parser(name, help=text)
            continue
        command = commands.add_parser(name, help=text, parents=[common] if name in _CLIENTS else [])
        _OPTIONS.get(name, _no_options)(command)
    return parser, command


def _no_options(command: argparse.ArgumentParser) -> None:
    """A command without options of its own."""


def _serve_options(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout")
    serve.add_argument("--socket", help="also serve any number of clients on this socket")
    serve.add_argument(
        "--export-socket",
        action="store_true",
        help="tell the terminals where the socket is ($TERMINAL_REGISTRY_SOCKET), so "
        "agents running inside them can reach this registry",
    )
    serve.add_argument(
        "--max-queued-mb",
        type=int,
        default=64,
        help="disconnect a client that lets more than this wait unread (default 64)",
    )
    serve.add_argument(
        "--options",
        metavar="JSON",
        help="the server's default settings, as initializationOptions (each client's "
        'own go on top), e.g. \'{"sshConfigFile": "/path/ssh_config"}\'',
    )
    serve.add_argument(
        "--audit-log",
        metavar="PATH",
        help="append one JSON line per command to PATH (mode 0600, rotated at 10 MB); "
        "default: $TERMINAL_REGISTRY_AUDIT_LOG, else no audit log",
    )
    serve.add_argument("--log-level", default="WARNING")
    serve.add_argument("--ready-fd", type=int, help=argparse.SUPPRESS)


def _run_options(run: argparse.ArgumentParser) -> None:
    run.description = (
        "Run COMMAND in a terminal of the server (output streams live), "
        "then print the exit code and cwd. Exits with the command's exit code."
    )
    run.add_argument("--task", help="task id the terminal is bound to")
    run.add_argument(
        "--cwd", help="directory to run in (default: here; on a --host or --container, home)"
    )
    run.add_argument("--provider", choices=("shell", "subprocess", "ssh", "container"))
    where = run.add_mutually_exclusive_group()
    where.add_argument(
        "--host", help="run on this ssh host (alias, user@host or user@host:port; docs/remote.md)"
    )
    where.add_argument("--container", help="run in this running container (docker or podman)")
    run.add_argument("--timeout", type=float, help="seconds before the command is ended")
    for flag, _wire, kind, text in LIMIT_FLAGS:
        run.add_argument(
            f"--{flag.replace('_', '-')}", type=kind, metavar="N", help=f"limit: {text}"
        )
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND")
    run.epilog = (
        "When the command waits for input and stdin is a terminal, what you type goes to "
        f"it; otherwise the CLI exits with status {EXIT_WAITING}, leaving it running, and "
        "names its terminal (see attach)."
    )


def _attach_options(attach_command: argparse.ArgumentParser) -> None:
    attach_command.description = (
        "Show terminal ID's recent output, then its live output; what you type "
        "goes to it and its size follows yours. Ctrl-] (or --detach-key) detaches and "
        "leaves it running."
    )
    attach_command.add_argument("terminal_id", type=int, metavar="ID")
    attach_command.add_argument(
        "--detach-key",
        default="C-]",
        help="the key that detaches, as C-<char> (default C-])",
    )


def _env_options(env: argparse.ArgumentParser) -> None:
    env.add_argument("--task", help="task id (default: every terminal)")
    env.add_argument("--cooldown", type=float, help="seconds to wait for hot terminals")
    env.add_argument(
        "--peek",
        action="store_true",
        help="report without marking the output retrieved (the default without --task)",
    )


def _list_options(lst: argparse.ArgumentParser) -> None:
    lst.add_argument("--task", help="only this task's terminals")


def _terminal_id(action: argparse.ArgumentParser) -> None:
    action.add_argument("terminal_id", type=int, metavar="ID")


def _log_options(audit: argparse.ArgumentParser) -> None:
    audit.add_argument("--path", help="the audit log (default: $TERMINAL_REGISTRY_AUDIT_LOG)")
    audit.add_argument("--json", action="store_true", help="the entries as a JSON array")
    audit.add_argument("-n", "--last", type=int, metavar="N", help="only the last N commands")


_OPTIONS: dict[str, Callable[[argparse.ArgumentParser], None]] = {
    "serve": _serve_options,
    "run": _run_options,
    "attach": _attach_options,
    "env": _env_options,
    "list": _list_options,
    "kill": _terminal_id,
    "close": _terminal_id,
    "log": _log_options,
}


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


def _command_first(words: list[str]) -> list[str]:
    """``--json`` and ``--socket PATH`` before the command moved after it, where the
    parser looks for them (``terminal-registry --json list`` is how many type it); a
    command that does not take one then has the parser name it."""
    shared = []
    at = 0
    while at < len(words):
        word = words[at]
        if word == "--json" or word.startswith("--socket="):
            shared.append(word)
            at += 1
        elif word == "--socket" and at + 1 < len(words):
            shared += words[at : at + 2]
            at += 2
        else:
            break
    if not shared or at == len(words) or words[at] not in _COMMANDS:
        return words
    return [words[at], *shared, *words[at + 1 :]]


def main(argv: Sequence[str] | None = None) -> int:
    words = _command_first(list(sys.argv[1:] if argv is None else argv))
    if words[:1] == ["mcp"]:
        return _mcp(words[1:])
    parser, command = _parser(words)
    args = parser.parse_args(words)
    if args.subcommand == "serve":
        from .serve import serve  # the server's imports, for this command only

        return serve(args)
    if args.subcommand == "log":
        return audit.print_log(args.path, as_json=args.json, last=args.last)
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
