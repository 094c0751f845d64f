"""``terminal-registry run``: a command in a registry terminal, followed to its end.

The run is started in the background (so its output stays "not yet retrieved" for
``terminal-registry env``, as it would for an agent's model) and followed through the
notifications: output live, then the end.

When the command waits for someone (its terminal's ``state`` says so in a
``terminal/didChange``), the CLI says so on stderr --
``[terminal-registry] waiting for input: 'continue? '`` -- and then:

* with a terminal on stdin, it has been forwarding what the person types all along
  (raw mode, as ssh does; the window size goes too), so they just answer;
* otherwise nobody can answer here: it exits with :data:`EXIT_WAITING` (75), leaving
  the command running, and names the terminal (``terminal-registry attach ID``).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from typing import Any, BinaryIO

from . import listing, methods
from .blocking import BlockingClient
from .console import Console, follow, say
from .errors import UnknownTerminalError

__all__ = ["EXIT_WAITING", "LIMIT_FLAGS", "describe_waiting", "run"]

#: The exit status of a run left waiting for input (sysexits' EX_TEMPFAIL: try again
#: once someone has answered).  The command goes on in its terminal.
EXIT_WAITING = 75

#: ``run``'s limit flags: (flag, wire name, type); each is the run's limit of that name.
LIMIT_FLAGS = (
    ("memory_mb", "memoryMb", int, "memory of all its processes together"),
    ("pids", "pids", int, "processes at once"),
    ("cpu_seconds", "cpuSeconds", float, "CPU seconds"),
    ("output_mb", "outputMb", float, "MB of output (default 1024; 0: none)"),
    ("wall_seconds", "wallSeconds", float, "seconds of running (then: failed)"),
)

#: The wire's longest duration (``timeoutMs``, ``cooldownTimeoutMs``: a 32-bit int of
#: milliseconds, ~24.8 days): what ``--timeout 0`` (no timeout) sends.
MOST_MS = 2**31 - 1

_WAITING_STATES = frozenset({"waitingForInput", "waitingForPassword", "fullScreen"})


def describe_waiting(waiting: dict[str, Any]) -> str:
    """``waiting for input: 'continue? '``, ``less is open full screen: press q``."""
    kind = waiting.get("kind")
    prompt = waiting.get("prompt")
    program = waiting.get("program") or "the program"
    if kind == "fullScreen":
        text = f"{program} is open full screen"
        if waiting.get("keys"):
            text += ": press " + " ".join(waiting["keys"])
    else:
        what = "a password" if kind == "password" else "input"
        text = f"waiting for {what}: {prompt!r}" if prompt else f"waiting for {what} ({program})"
    return ("possibly " if waiting.get("certainty") == "possibly" else "") + text


class PlainText:
    """A run's live output for a file or a pipe: what the terminal showed, as text.

    The escape sequences (colours, titles, fish's mode switches) and the CR LF in
    the stream are the PTY's, not the program's; a file wants ``hi\\n``.  Complete
    lines go through the canvas the server renders a model's text with
    (:func:`registry.render.render`), as they come, so a pipe still reads them live;
    a partial line waits for its end (a progress bar's frames fold into the last).
    """

    def __init__(self, out: BinaryIO) -> None:
        self._out = out
        self._pending = ""

    def feed(self, data: str) -> str:
        """Take ``data``; write and return what its complete lines showed."""
        self._pending += data
        cut = self._pending.rfind("\n") + 1
        shown, self._pending = self._pending[:cut], self._pending[cut:]
        return self._write(shown)

    def flush(self) -> str:
        """Write and return the partial line too (the run ended, or waits on it)."""
        shown, self._pending = self._pending, ""
        return self._write(shown)

    def _write(self, text: str) -> str:
        if not text:
            return ""
        # Imported on first output only: wcwidth's tables cost ~30 ms, and a CLI call
        # is timed in tens of milliseconds (docs/architecture.md, `run -- true`).
        from registry.render import render

        shown = render(text)
        self._out.write(shown.encode("utf-8"))
        self._out.flush()
        return shown


def run(args: argparse.Namespace, client: BlockingClient) -> int:
    out = sys.stdout.buffer
    # A person's terminal gets the live stream as the PTY gave it (colours, redraws);
    # a file or a pipe gets the text it showed.
    plain = None if os.isatty(out.fileno()) else PlainText(out)
    buffered: dict[int, list[str]] = {}
    ended: dict[int, dict[str, Any]] = {}
    seen: dict[int, dict[str, Any]] = {}
    mine: int | None = None
    terminal_id: int | None = None
    streamed: list[bool] = []
    console = Console()
    #: The state our terminal was last said to be in; what it waits for, if it does.
    last_state: list[str] = ["running"]
    left_waiting: list[dict[str, Any]] = []
    at_line_start = [True]

    def show(data: str) -> None:
        streamed.append(True)
        if plain is not None:
            data = plain.feed(data)
            if not data:
                return
        else:
            out.write(data.encode("utf-8"))
            out.flush()
        at_line_start[0] = data.endswith("\n")

    def on_write(params: dict[str, Any]) -> None:
        run_id = params.get("runId")
        if run_id is None:
            return
        if mine is None:
            buffered.setdefault(run_id, []).append(params["data"])
        elif run_id == mine and not args.json:
            show(params["data"])

    def on_terminal(params: dict[str, Any]) -> None:
        seen[params["id"]] = params
        if mine is not None and params["id"] == terminal_id:
            noticed(params)

    def noticed(terminal: dict[str, Any]) -> None:
        state = terminal.get("state", "running")
        was, last_state[0] = last_state[0], state
        if state not in _WAITING_STATES or was in _WAITING_STATES or mine in ended:
            return  # said once per question, not again as the person types
        waiting = terminal.get("waitingFor") or {}
        if console.interactive and waiting.get("kind") == "fullScreen":
            return  # the person sees it, and a line of ours would be drawn into it
        shown = plain.flush() if plain is not None else ""  # the prompt, before we say so
        if shown:
            at_line_start[0] = shown.endswith("\n")
        say(describe_waiting(waiting), raw=console.raw, fresh_line=not at_line_start[0])
        if not console.interactive:
            left_waiting.append(waiting)

    def on_end(params: dict[str, Any]) -> None:
        ended[params["runId"]] = params

    client.on(methods.DID_WRITE, on_write)
    client.on(methods.DID_END_RUN, on_end)
    client.on(methods.DID_OPEN, on_terminal)
    client.on(methods.DID_CHANGE, on_terminal)
    with console:
        started = client.request(methods.RUN, _params(args))
        mine = started["runId"]
        terminal_id = started["terminalId"]
        if not args.json:
            for chunk in buffered.pop(mine, []):
                show(chunk)
        if terminal_id in seen:  # it may have said it waits before we knew our run
            noticed(seen[terminal_id])

        def interrupt() -> None:
            client.send_request(methods.KILL, {"terminalId": terminal_id})

        def typed(text: str) -> None:
            if text:
                client.send_and_forget(methods.WRITE, {"terminalId": terminal_id, "data": text})

        def resized() -> None:
            size = console.size()
            if size is not None and mine not in ended:
                cols, rows = size
                client.send_and_forget(
                    methods.RESIZE, {"terminalId": terminal_id, "cols": cols, "rows": rows}
                )

        if console.interactive:
            resized()
        follow(
            client,
            lambda: mine in ended or bool(left_waiting),
            interrupt,
            console=console if console.interactive else None,
            typed=typed,
            resized=resized if console.interactive else None,
        )
    assert terminal_id is not None
    if plain is not None:
        plain.flush()
    if mine not in ended:
        return _left_waiting(args, client, started, left_waiting[0])
    return _summary(args, client, started, ended[mine], seen, bool(streamed))


def _params(args: argparse.Namespace) -> dict[str, Any]:
    params: dict[str, Any] = {"command": args.command, "background": True}
    if args.host is not None or args.container is not None:
        # A remote terminal: the cwd is the target's, as given ("~" by default).
        params["cwd"] = args.cwd if args.cwd is not None else "~"
        params["host" if args.host is not None else "container"] = args.host or args.container
        if args.provider is not None:
            params["provider"] = args.provider
    else:
        params["cwd"] = os.path.abspath(args.cwd if args.cwd is not None else os.getcwd())
        params["provider"] = args.provider or "shell"
    if args.task is not None:
        params["taskId"] = args.task
    if args.timeout:
        params["timeoutMs"] = round(args.timeout * 1000)
    elif args.timeout == 0:
        # 0 is no timeout here, as for the limits (and coreutils' timeout); on the
        # wire timeoutMs 0 means "end at once".  The longest the wire takes (~24.8
        # days) also overrides a server's commandTimeoutMs, which leaving it out would not.
        params["timeoutMs"] = MOST_MS
    limits = {wire: getattr(args, flag) for flag, wire, _, _ in LIMIT_FLAGS}
    if any(value is not None for value in limits.values()):
        params["limits"] = {k: v for k, v in limits.items() if v is not None}
    return params


def _left_waiting(
    args: argparse.Namespace, client: BlockingClient, started: dict[str, Any], waiting: Any
) -> int:
    """Nobody here can answer: the command goes on; say where it waits."""
    terminal_id = started["terminalId"]
    if args.json:
        own = {"terminalId": terminal_id, "runId": started["runId"], "peek": True}
        summary = {
            "runId": started["runId"],
            "terminalId": terminal_id,
            "commandLine": started["commandLine"],
            "state": "running",
            "waitingFor": waiting,
            "output": client.request(methods.OUTPUT, own)["output"],
        }
        print(json.dumps(summary, indent=2))
    else:
        say(
            f"terminal {terminal_id} still runs it and waits; stdin is not a terminal, so "
            f"nobody here can answer (`terminal-registry attach {terminal_id}` can); "
            f"exit status {EXIT_WAITING}"
        )
    return EXIT_WAITING


def _summary(
    args: argparse.Namespace,
    client: BlockingClient,
    started: dict[str, Any],
    end: dict[str, Any],
    seen: dict[int, dict[str, Any]],
    streamed: bool,
) -> int:
    terminal_id = started["terminalId"]
    try:
        terminal = client.request(methods.GET, {"terminalId": terminal_id})
    except UnknownTerminalError:
        # The command ended its shell (``exit``): the terminal is gone; its last
        # reported state stands.
        terminal = seen[terminal_id]
    code = end.get("exitCode")
    note = started.get("note")
    summary = {
        "runId": started["runId"],
        "terminalId": terminal_id,
        "commandLine": started["commandLine"],
        "state": end["state"],
        "exitCode": code,
        "signal": signal_name(code),
        "cwd": terminal["cwd"],
        **{k: terminal[k] for k in ("host", "container") if k in terminal},
        "shell": terminal["shell"],
        "provider": terminal["provider"],
        "shellIntegration": terminal["shellIntegration"],
        "note": note,
        "limit": end.get("limit"),
    }
    # This run's output, left unretrieved for `env` as the live output was: one path,
    # one meaning, with --json or without.
    own = {"terminalId": terminal_id, "runId": started["runId"], "peek": True}
    out = sys.stdout.buffer
    if args.json:
        summary["output"] = client.request(methods.OUTPUT, own)["output"]
        print(json.dumps(summary, indent=2))
    else:
        if not streamed:
            # Nothing came live (a line the shell refused: its message is on the
            # screen, not in a command's output): print what the run kept.
            text = client.request(methods.OUTPUT, own)["output"]
            if text:
                out.write(text.encode("utf-8") + (b"" if text.endswith("\n") else b"\n"))
                out.flush()
        lines = [
            f"exit code: {code if code is not None else 'unknown'}"
            + (f" ({summary['signal']})" if summary["signal"] else ""),
            f"state: {end['state']}",
            f"cwd: {listing.location(terminal)}",
            f"terminal: {terminal_id} ({terminal['provider']}, {terminal['shell']}, "
            f"{_integration(terminal)})",
        ]
        if note:
            lines.append(f"note: {note}")
        if end.get("limit"):
            lines.append(f"limit: the command hit its {end['limit']} limit and was ended")
        print("\n".join(f"[terminal-registry] {line}" for line in lines), file=sys.stderr)
    if code is not None:
        return int(code) & 0xFF
    return 0 if end["state"] == "completed" else 1


def _integration(terminal: dict[str, Any]) -> str:
    """``rich integration``; a subprocess terminal (a fallback's, say) has none."""
    has = listing.integration(terminal)
    return "no shell integration" if has == "-" else f"{has} integration"


def signal_name(code: int | None) -> str | None:
    """``SIGINT`` for 130: the shell's 128+N convention (as RunResult's ``signal``)."""
    if code is None or not 128 < code <= 128 + 64:
        return None
    try:
        return signal.Signals(code - 128).name
    except ValueError:
        return None
