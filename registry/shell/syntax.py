"""Shell syntax we write into a terminal: POSIX shells (bash, zsh) and fish alike."""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["quote", "with_exports"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


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
