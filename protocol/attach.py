"""``terminal-registry attach ID``: a person takes over a registry terminal.

How a human takes over from an agent (or just watches): the terminal's recent output
is shown first (``terminal/replay``), then its live output (``terminal/didWrite``);
what the person types goes to it (``terminal/write``, raw mode: every key as typed)
and its size follows theirs (``terminal/resize`` now and on every SIGWINCH).  The
detach key (Ctrl-] by default, as telnet's escape) leaves it running, as does the
end of a non-terminal stdin; the terminal closing ends the attachment too.

Replay and live output join without a gap or a repeat: the server sends the
terminal's gathered ``didWrite`` before it answers the replay, so every ``didWrite``
before the answer is in the replay and every one after it is new.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from . import methods
from .blocking import BlockingClient
from .console import Console, follow, say
from .errors import InvalidParamsError

__all__ = ["attach", "detach_byte"]


def detach_byte(key: str) -> str:
    """The character a ``C-<char>`` detach key sends (``C-]`` -> ``\\x1d``)."""
    if len(key) == 3 and key[:2].upper() == "C-":
        char = key[2]
        if "a" <= char.lower() <= "z":
            return chr(ord(char.lower()) - ord("a") + 1)
        codes = {"@": 0, "[": 0x1B, "\\": 0x1C, "]": 0x1D, "^": 0x1E, "_": 0x1F}
        if char in codes:
            return chr(codes[char])
    raise InvalidParamsError(f"--detach-key must be C-<letter> or C-] (and the like), got {key!r}")


def attach(args: argparse.Namespace, client: BlockingClient) -> int:
    terminal_id = args.terminal_id
    detach = detach_byte(args.detach_key)
    info = client.request(methods.GET, {"terminalId": terminal_id})
    if info["provider"] == "subprocess":
        raise InvalidParamsError(
            f"terminal {terminal_id} is a subprocess terminal: it has no screen to attach to"
        )
    out = sys.stdout.buffer
    live = [False]
    state: dict[str, Any] = {"closed": False, "detached": False}

    def on_write(params: dict[str, Any]) -> None:
        if live[0] and params["terminalId"] == terminal_id:
            out.write(params["data"].encode("utf-8"))
            out.flush()

    def on_close(params: dict[str, Any]) -> None:
        if params["terminalId"] == terminal_id:
            state["closed"] = True

    client.on(methods.DID_WRITE, on_write)
    client.on(methods.DID_CLOSE, on_close)
    console = Console()

    def typed(text: str) -> None:
        if detach in text:
            text = text[: text.index(detach)]
            state["detached"] = True
        elif console.eof:
            state["detached"] = True  # stdin ended: nothing more will come
        if text:
            client.send_and_forget(methods.WRITE, {"terminalId": terminal_id, "data": text})

    def resized() -> None:
        size = console.size()
        if size is not None and not state["closed"]:
            cols, rows = size
            client.send_and_forget(
                methods.RESIZE, {"terminalId": terminal_id, "cols": cols, "rows": rows}
            )

    shell = info["shell"].rsplit("/", 1)[-1]
    with console:
        say(
            f"attached to terminal {terminal_id} ({shell}, {info['cwd']}); "
            f"{args.detach_key} detaches and leaves it running",
            raw=console.raw,
        )
        resized()
        replay = client.request(methods.REPLAY, {"terminalId": terminal_id})
        out.write(replay["data"].encode("utf-8"))
        out.flush()
        live[0] = True
        follow(
            client,
            lambda: state["closed"] or state["detached"],
            lambda: state.update(detached=True),
            console=console,
            typed=typed,
            resized=resized if console.interactive else None,
        )
        if state["closed"]:
            say(f"terminal {terminal_id} closed", raw=console.raw, fresh_line=True)
        else:
            say(
                f"detached from terminal {terminal_id} (it goes on)",
                raw=console.raw,
                fresh_line=True,
            )
    return 0
