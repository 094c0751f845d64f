"""``terminal-registry``'s command line as words: which command, with which options.

Split from :mod:`protocol.cli` (which runs the commands) by job.  Standard library
only, like the CLI: every call is a new process (see protocol/cli.py).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence

from .cli_run import EXIT_WAITING, LIMIT_FLAGS, MOST_MS

__all__ = [
    "COMMANDS",
    "LOG_LEVELS",
    "add_log_level",
    "check_numbers",
    "command_first",
    "parser",
]

#: What ``--log-level`` takes (logging's names, any case).
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def add_log_level(command: argparse.ArgumentParser) -> None:
    """``--log-level``, checked here: logging refuses an unknown name with a
    traceback, long after the command line was read."""
    command.add_argument(
        "--log-level",
        type=_log_level,
        default="WARNING",
        metavar="LEVEL",
        help="what is logged to stderr: " + ", ".join(LOG_LEVELS) + " (default WARNING)",
    )


def _log_level(value: str) -> str:
    """A level's name in any case, as logging spells it; the error quotes the user's."""
    if value.upper() not in LOG_LEVELS:
        known = ", ".join(LOG_LEVELS)
        raise argparse.ArgumentTypeError(f"unknown level {value!r} (one of {known})")
    return value.upper()


#: Each command's one-line help, in the order ``--help`` lists them.
COMMANDS = {
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


def parser(
    words: Sequence[str],
) -> tuple[argparse.ArgumentParser, argparse.ArgumentParser | None]:
    """The command line's parser, and the parser of the command named first in
    ``words`` (its errors print its usage).  Only that command gets its options
    (``--help`` without a command lists commands, not options): building every
    command's took a tenth of a CLI call's own time, and one call uses one command."""
    chosen = words[0] if words and words[0] in COMMANDS else None
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--socket",
        help="the server's socket (default: $TERMINAL_REGISTRY_SOCKET, else the per-user "
        "background server's, started on first use)",
    )
    common.add_argument("--json", action="store_true", help="machine-readable output")

    top = argparse.ArgumentParser(
        prog="terminal-registry",
        description="Own real shells in real PTYs for editors and agents.",
    )
    commands = top.add_subparsers(dest="subcommand", required=True)
    command = None
    for name, text in COMMANDS.items():
        if name != chosen:
            commands.add_parser(name, help=text)
            continue
        command = commands.add_parser(name, help=text, parents=[common] if name in _CLIENTS else [])
        _OPTIONS.get(name, _no_options)(command)
    return top, command


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
    add_log_level(serve)
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
    run.add_argument(
        "--timeout",
        type=float,
        metavar="SECONDS",
        help="end the command after this long (0: no timeout, over any server default)",
    )
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


def command_first(words: list[str]) -> list[str]:
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
    if not shared or at == len(words) or words[at] not in COMMANDS:
        return words
    return [words[at], *shared, *words[at + 1 :]]


#: The wire's longest duration, in the seconds the command line takes.
_MOST_SECONDS = MOST_MS / 1000
#: Numeric options, by dest: the most each may be (None: the server's bounds, in the
#: same unit as here, say it).
_NUMBERS: dict[str, float | None] = {
    "timeout": _MOST_SECONDS,
    "cooldown": _MOST_SECONDS,
    **{flag: None for flag, _wire, _kind, _text in LIMIT_FLAGS},
}


def check_numbers(args: argparse.Namespace, command: argparse.ArgumentParser) -> None:
    """Refuse a numeric option out of bounds, naming it and its value as given.

    The server would refuse it too, but in the wire's terms: ``--timeout -5`` is
    ``timeoutMs ... got -5000`` there (seconds here are milliseconds on the wire).
    """
    for dest, most in _NUMBERS.items():
        value = getattr(args, dest, None)
        if value is None:
            continue
        flag = "--" + dest.replace("_", "-")
        if not math.isfinite(value):
            command.error(f"{flag} must be a number of seconds, got {value}")
        if value < 0:
            command.error(f"{flag} must be >= 0, got {_said(value)}")
        if most is not None and value > most:
            command.error(f"{flag} must be at most {_said(most)}, got {_said(value)}")


def _said(value: float) -> str:
    """A number as a person writes it: ``-5`` (not ``-5.0``), ``2147483.647``."""
    return str(int(value)) if value == int(value) else repr(value)
