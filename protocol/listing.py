"""How the command line shows terminals: where each stands, and the ``list`` table.

Works on the wire's ``Terminal`` as plain JSON (dicts), with the standard library
only, so the CLI stays light.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = ["COLUMNS", "integration", "location", "table"]

COLUMNS = ("ID", "TASK", "PROVIDER", "STATE", "INTEGRATION", "CWD", "LAST COMMAND")


def location(terminal: dict[str, Any]) -> str:
    """A terminal's cwd, as ``ssh://user@host/path`` or ``container://name/path`` when
    it is remote (as the environment details write it)."""
    if terminal.get("host"):
        return f"ssh://{terminal['host']}{terminal['cwd']}"
    if terminal.get("container"):
        return f"container://{terminal['container']}{terminal['cwd']}"
    return str(terminal["cwd"])


def integration(terminal: dict[str, Any]) -> str:
    """A terminal's shell integration, for people: ``rich``, ``none`` or ``pending``;
    ``-`` for a subprocess terminal, which has no shell to integrate with (the wire's
    ``rich`` there says only that its boundaries and exit codes are exact, each
    command being its own process)."""
    return "-" if terminal["provider"] == "subprocess" else str(terminal["shellIntegration"])


def table(terminals: Iterable[dict[str, Any]]) -> str:
    """The ``list`` table: one row per terminal, columns padded to their widest cell."""
    rows = [COLUMNS]
    for t in terminals:
        waits = t.get("state") in ("waitingForInput", "waitingForPassword", "fullScreen")
        activity = t["state"] if waits or t.get("state") == "stoppedJob" else None
        state = (activity or ("busy" if t["busy"] else "idle")) + (",hot" if t["hot"] else "")
        rows.append(
            (
                str(t["id"]),
                t["taskId"] or "-",
                t["provider"],
                state,
                integration(t),
                location(t),
                t["lastCommand"] or "",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    lines = []
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=False)]
        lines.append("  ".join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)
