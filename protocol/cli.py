"""The ``terminal-registry`` command line."""

from __future__ import annotations


def main(argv: list[str] | None = None) -> int:
    raise SystemExit("terminal-registry: not implemented yet")
