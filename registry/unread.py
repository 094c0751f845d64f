"""Output not yet retrieved: per terminal, a queue of runs and what they have not handed out.

Completed runs stay queued on their terminal until their output has been retrieved;
retrieving marks it read, so the next report does not repeat it.  While a run is
still going only complete lines are handed out (a half-written line waits for its
end).  Text is decoded incrementally, so a character split across reads or across
retrievals stays whole, and cleaned for models on the way out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from .output import BoundedBuffer, IncrementalText, compress_terminal_output
from .run import RunState, TerminalRun

__all__ = ["RunOutputQueue", "UnreadRun"]


@dataclass(frozen=True)
class UnreadRun:
    """What one run had not yet handed out, cleaned for a model."""

    run_id: int
    command_line: str
    state: RunState
    exit_code: int | None
    ended: bool
    text: str


class _Entry:
    __slots__ = ("decoder", "pending", "run", "taken")

    def __init__(self, run: TerminalRun, cap: int) -> None:
        self.run = run
        self.pending = BoundedBuffer(cap)
        self.decoder = IncrementalText()
        self.taken = 0


class RunOutputQueue:
    """The unread output of one terminal's runs, oldest first."""

    def __init__(
        self,
        cap: int,
        line_limit: int = 500,
        char_limit: int = 50_000,
        compress_progress_bar: bool = True,
    ) -> None:
        self._cap = cap
        self._line_limit = line_limit
        self._char_limit = char_limit
        self._compress = compress_progress_bar
        self._entries: deque[_Entry] = deque()

    def run_started(self, run: TerminalRun) -> None:
        self._entries.append(_Entry(run, self._cap))

    def output(self, run: TerminalRun, data: bytes) -> None:
        # The newest entry is almost always the one: check it before searching.
        if self._entries and self._entries[-1].run is run:
            self._entries[-1].pending.append(data)
            return
        for entry in self._entries:
            if entry.run is run:
                entry.pending.append(data)
                return

    def run_ended(self, run: TerminalRun) -> None:
        for entry in self._entries:
            if entry.run is run and run.output_replaced and entry.taken == 0:
                # A heuristic run rebuilt its output (echo and prompt cut): use that.
                entry.pending.clear()
                entry.pending.append(run.output)

    def mark_retrieved(self, run: TerminalRun) -> None:
        """The caller has had this run's whole output (a foreground run's result)."""
        for entry in list(self._entries):
            if entry.run is run and run.done:
                self._entries.remove(entry)

    def has_unread_completed(self) -> bool:
        return any(e.run.done for e in self._entries)

    def disown(self, task_id: str) -> None:
        """The task released its terminals: its unread output is anyone's now."""
        for entry in self._entries:
            if entry.run.task_id == task_id:
                entry.run.task_id = None

    def has_unread_for(self, task_id: str) -> bool:
        """Whether a run of ``task_id`` has output not handed out yet."""
        return any(e.run.task_id == task_id for e in self._entries)

    def take(
        self, task_id: str | None = None, *, run_id: int | None = None, peek: bool = False
    ) -> list[UnreadRun]:
        """Hand out everything unread (complete lines of running runs); mark it read.

        With ``task_id``, only runs of that task and of no task: another task's output
        stays for that task; with ``run_id``, only that run's.  With ``peek``, nothing
        is marked read.
        """
        taken: list[UnreadRun] = []
        for entry in list(self._entries):
            run = entry.run
            if task_id is not None and run.task_id not in (task_id, None):
                continue
            if run_id is not None and run.id != run_id:
                continue
            ended = run.done
            data = entry.pending.getvalue()
            if not ended:
                cut = data.rfind(b"\n") + 1
                rest, data = data[cut:], data[:cut]
            else:
                rest = b""
            if peek:
                text = entry.decoder.peek(data, final=ended)
            else:
                entry.pending.clear()
                if rest:
                    entry.pending.append(rest)
                entry.taken += len(data)
                text = entry.decoder.decode(data, final=ended)
                if ended:
                    self._entries.remove(entry)
            if text or ended:
                taken.append(
                    UnreadRun(
                        run.id,
                        run.command_line,
                        run.state,
                        run.exit_code,
                        ended,
                        compress_terminal_output(
                            text, self._line_limit, self._char_limit, self._compress
                        ).rstrip("\n"),
                    )
                )
        return taken
