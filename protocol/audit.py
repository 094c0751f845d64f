"""The audit log's file: one JSON line per command, appended, rotated, private.

Written by the server (:mod:`protocol.audit_trail` says what goes in a line), read by
``terminal-registry log``.  Standard library only: the CLI imports this module.

* Appended with ``O_APPEND``: each line is one ``write``, so lines of several
  servers sharing a file never interleave.
* Mode 0600 in a 0700 directory: command lines and directories are the user's
  business.  An existing file open to others is made private again; one owned by
  someone else is refused.
* Rotated by size: past ``max_bytes`` the file becomes ``PATH.1`` (``PATH.1``
  becomes ``PATH.2``, ...; ``keep`` old files in all).

Why not :class:`logging.handlers.RotatingFileHandler`: it opens files with the
process's umask (a mode can only be forced through its private ``_open``, or a
process-wide umask change that every terminal started meanwhile would inherit).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Iterator
from typing import Any

__all__ = [
    "AUDIT_LOG_VARIABLE",
    "AuditFile",
    "format_entry",
    "print_log",
    "read_entries",
]

#: Where the background server writes its audit log (set: on; unset: off).
AUDIT_LOG_VARIABLE = "TERMINAL_REGISTRY_AUDIT_LOG"

#: Rotation: a file grows to this size before it becomes PATH.1.
MAX_BYTES = 10 * 1024 * 1024
#: Old files kept (PATH.1 ... PATH.KEEP).
KEEP = 3


class AuditFile:
    """The audit log, open for appending."""

    def __init__(self, path: str, max_bytes: int = MAX_BYTES, keep: int = KEEP) -> None:
        self.path = os.path.abspath(path)
        self._max_bytes = max_bytes
        self._keep = keep
        directory = os.path.dirname(self.path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        self._fd = self._open()

    def _open(self) -> int:
        fd = os.open(
            self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o600
        )
        info = os.fstat(fd)
        if info.st_uid != os.getuid():
            os.close(fd)
            raise PermissionError(f"audit log {self.path} belongs to uid {info.st_uid}, not us")
        if info.st_mode & 0o077:
            os.fchmod(fd, 0o600)
        return fd

    def write(self, entry: dict[str, Any]) -> None:
        """Append one entry as one line (rotating first if the file is full)."""
        line = json.dumps(entry, ensure_ascii=False, separators=(",", ":")) + "\n"
        data = line.encode("utf-8", "surrogateescape")
        if os.fstat(self._fd).st_size + len(data) > self._max_bytes:
            self._rotate()
        os.write(self._fd, data)

    def _rotate(self) -> None:
        os.close(self._fd)
        for index in range(self._keep - 1, 0, -1):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}.{index}", f"{self.path}.{index + 1}")
        with contextlib.suppress(FileNotFoundError):
            os.replace(self.path, f"{self.path}.1")
        self._fd = self._open()

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def read_entries(path: str, *, rotated: bool = True) -> Iterator[dict[str, Any]]:
    """Every entry, oldest first (rotated files first); a damaged line is skipped."""
    paths = [f"{path}.{i}" for i in range(KEEP, 0, -1)] if rotated else []
    for name in [*paths, path]:
        try:
            with open(name, encoding="utf-8", errors="replace") as f:
                lines = f.readlines()
        except FileNotFoundError:
            continue
        for line in lines:
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    yield entry


def format_entry(entry: dict[str, Any]) -> str:
    """One entry as a line for people: when, who, where, what, how it ended."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(entry.get("time", 0)))
    client = entry.get("client") or {}
    who = (
        f"{client.get('transport', '?')} pid {client.get('pid', '?')}"
        if client
        else "typed in the terminal"
    )
    code = entry.get("exitCode")
    ended = f"exit {code}" if code is not None else "exit ?"
    if entry.get("signal"):
        ended += f" ({entry['signal']})"
    ended += f", {entry.get('state', '?')}"
    if entry.get("limit"):
        ended += f", limit {entry['limit']}"
    where = entry.get("cwdBefore") or "?"
    if entry.get("cwdAfter") and entry["cwdAfter"] != where:
        where += f" -> {entry['cwdAfter']}"
    return (
        f"{when}  task {entry.get('task') or '-'}  terminal {entry.get('terminal')} "
        f"({entry.get('provider')})  {who}\n"
        f"    $ {entry.get('command', '')}\n"
        f"    {ended}; {entry.get('durationMs', 0) / 1000:.2f} s; "
        f"{_size(entry.get('outputBytes', 0))} of output; in {where}"
    )


def print_log(path: str, *, as_json: bool = False, last: int | None = None) -> int:
    """``terminal-registry log``: the entries for people, or as a JSON array."""
    entries = list(read_entries(path))
    if last is not None:
        entries = entries[-last:] if last > 0 else []
    if as_json:
        print(json.dumps(entries, indent=2, ensure_ascii=False))
    elif not entries:
        exists = os.path.exists(path)
        print(f"(no commands in {path})" if exists else f"(no audit log at {path})")
    else:
        print("\n".join(format_entry(entry) for entry in entries))
    return 0


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB"):
        if count < 1024 or unit == "MiB":
            return f"{count} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count = count / 1024  # type: ignore[assignment]
    return f"{count} bytes"  # pragma: no cover
