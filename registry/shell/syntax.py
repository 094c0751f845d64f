"""Shell syntax we write into a terminal: POSIX shells (bash, zsh) and fish alike."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["LONG_COMMAND_BYTES", "quote", "source_line", "with_exports"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

#: A command longer than this (UTF-8 bytes) is not typed: it is written to a file
#: the shell sources.  Line editors redraw the whole line as it is typed (zsh took
#: over 2 s for a 70 KB line and never ran it, fish 1 MB the same), the E marker of a
#: line over the marker parser's 64 KB bound would come out as output, and one
#: argument of a command line may not exceed 128 KB (Linux's MAX_ARG_STRLEN).
LONG_COMMAND_BYTES = 4096


def quote(value: str) -> str:
    """``value`` as one single-quoted word (``'`` written as ``'\\''``)."""
    return "'" + value.replace("'", "'\\''") + "'"


def with_exports(env: Mapping[str, str], command: str) -> str:
    """``export NAME='value'; ...`` before ``command``: the variables persist in the shell."""
    parts = []
    for name, value in env.items():
        if not _NAME.fullmatch(name):
            raise ValueError(f"invalid environment variable name {name!r}")
        parts.append(f"export {name}={quote(value)}")
    return "; ".join([*parts, command]) if parts else command


def source_line(kind: str | None, path: str) -> str:
    """The line that runs the commands in ``path`` in the shell itself.

    Sourced, not run as a script: ``cd``, variables and functions stay with the
    shell, as when the command is typed.  fish spells it ``source``; POSIX shells
    ``.`` (bash's and zsh's ``source`` is the same builtin).
    """
    return f"source {quote(path)}" if kind == "fish" else f". {quote(path)}"
