"""Full outputs: when a run's text for a model was cut, everything kept, in a file.

A model that got head and tail can search the rest (``grep -n error PATH``).  The
file holds the run's output as the terminal showed it -- cleaned, never cut; only
what the run's raw buffer already dropped (past ``run_output_cap``) is missing, and
a line in the file says how much.  Files live in the terminal's own scratch
directory (private, 0700), so they go when the terminal closes; a terminal keeps
at most ``cap`` bytes of them, the oldest removed first.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import OrderedDict
from dataclasses import dataclass
from typing import Protocol

from .config import Settings
from .errors import UnknownTerminalError
from .model_text import ModelText, TextLimits, full_text, run_text
from .run import TerminalRun
from .terminals.base import Terminal
from .terminals.shell import ShellTerminal

__all__ = ["FullOutputs", "RunOutput", "run_output"]

log = logging.getLogger(__name__)


class FullOutputs:
    """One terminal's full-output files, oldest first, bounded in total size."""

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._files: OrderedDict[int, tuple[str, int]] = OrderedDict()
        self._total = 0

    def path(self, run_id: int) -> str | None:
        """The file kept for ``run_id``, if one is (and still exists)."""
        kept = self._files.get(run_id)
        return kept[0] if kept is not None and os.path.exists(kept[0]) else None

    def keep(self, directory: str | None, run_id: int, text: str) -> str | None:
        """Write ``text`` as ``run_id``'s full output; its path, or None when there is
        nowhere to write (no scratch directory, the terminal has closed)."""
        existing = self.path(run_id)
        if existing is not None or directory is None:
            return existing
        path = os.path.join(directory, f"output-{run_id}.txt")
        data = text.encode("utf-8", "replace")
        try:
            # Never through a symlink, never over a file someone else put there.
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(data)
        except OSError as error:
            log.info("cannot keep the full output of run %s: %s", run_id, error)
            with contextlib.suppress(OSError):
                os.unlink(path)
            return None
        self._files[run_id] = (path, len(data))
        self._total += len(data)
        self._trim(keep=run_id)
        return path

    def _trim(self, keep: int) -> None:
        """Remove the oldest files until the rest fit in the cap (the newest stays)."""
        for run_id in list(self._files):
            if self._total <= self._cap or run_id == keep:
                break
            path, size = self._files.pop(run_id)
            self._total -= size
            with contextlib.suppress(OSError):
                os.unlink(path)


@dataclass(frozen=True)
class RunOutput:
    """A run's text for a model, and the file with all of it when that text was cut."""

    text: ModelText
    full_output_path: str | None = None


class _Place(Protocol):
    """A terminal's entry, as far as its outputs go (:class:`~registry.entry.TerminalEntry`)."""

    terminal: Terminal
    full_outputs: FullOutputs


class _Places(Protocol):
    """Where entries are found by terminal id (:class:`~registry.registry.TerminalRegistry`)."""

    def entry(self, terminal_id: int) -> _Place: ...


async def run_output(run: TerminalRun, places: _Places, settings: Settings) -> RunOutput:
    """``run``'s text for a model (``settings``' limits, on its terminal's screen); once
    it has ended and that text was cut, its full output kept in a file.

    Cleaning megabytes takes a while (about a second for 8 MiB of progress bars):
    it runs in a thread, so other terminals keep being served.
    """
    try:
        place: _Place | None = places.entry(run.terminal_id)
    except UnknownTerminalError:  # closed: its scratch directory has gone with it
        place = None
    terminal = place.terminal if place is not None else None
    rows = terminal.size[1] if isinstance(terminal, ShellTerminal) else None
    limits = TextLimits.of(settings, rows)
    text = run_text(run, limits)
    if not text.truncated or not run.done or place is None or place.terminal.closed:
        return RunOutput(text)
    path = place.full_outputs.path(run.id)
    if path is None and place.terminal.scratch is not None:
        full = await asyncio.to_thread(full_text, run.kept_output(), limits)
        path = place.full_outputs.keep(place.terminal.scratch, run.id, full)
    return RunOutput(text, path)
