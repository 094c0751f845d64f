"""Output not yet retrieved: per terminal, a queue of runs and what they have not handed out.

Output between runs (a background job's, a job notice) is queued too, in time order
with the runs, as the output of no command: ``run_id`` and ``command_line`` None.
Only its complete lines are handed out; a line left open when the next command
starts is the prompt's or what was typed there, and is dropped.

Completed runs stay queued on their terminal until their output has been retrieved;
retrieving marks it read, so the next report does not repeat it.  While a run is
still going only complete lines are handed out (a half-written line waits for its
end).  Text is decoded incrementally, so a character split across reads or across
retrievals stays whole, and cleaned for models on the way out.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from dataclasses import dataclass

from .model_text import TextLimits, model_text
from .output import BoundedBuffer, IncrementalText
from .run import RunState, TerminalRun

__all__ = ["MAX_UNREAD_RUNS", "RunOutputQueue", "UnreadRun"]

#: Ended runs kept unread per terminal; older ones are dropped (and said to be).
MAX_UNREAD_RUNS = 16
#: Raw bytes kept per unread run, at least: unread output is only ever handed out
#: as text cut to the character limit (50,000), so 8 bytes a character (escape
#: sequences, overwritten progress bars) is plenty; the run keeps its own output.
UNREAD_RAW_MIN = 1024 * 1024


@dataclass(frozen=True)
class UnreadRun:
    """What one run had not yet handed out, cleaned for a model."""

    #: None for output between runs (of no command).
    run_id: int | None
    command_line: str | None
    state: RunState
    exit_code: int | None
    ended: bool
    text: str


class _Between:
    """Output between two runs, standing in for a run in the queue."""

    id: int | None = None
    command_line: str | None = None
    state = RunState.COMPLETED
    exit_code: int | None = None
    output_replaced = False

    def __init__(self, task_id: str | None) -> None:
        self.task_id = task_id
        #: The next run has started: nothing more joins this.
        self.done = False


class _Entry:
    __slots__ = ("decoder", "pending", "run", "taken", "trimmed")

    def __init__(self, run: TerminalRun | _Between, cap: int) -> None:
        self.run = run
        self.pending = BoundedBuffer(cap)
        self.decoder = IncrementalText()
        self.taken = 0
        #: Unread bytes let go because the terminal held too much unread output.
        self.trimmed = 0


class RunOutputQueue:
    """The unread output of one terminal's runs, oldest first."""

    def __init__(self, cap: int, limits: TextLimits | None = None) -> None:
        self._limits = limits or TextLimits()
        char_limit = self._limits.characters or 50_000
        self._cap = min(cap, max(UNREAD_RAW_MIN, 8 * char_limit))
        self._entries: deque[_Entry] = deque()
        #: Unread runs dropped whole (past MAX_UNREAD_RUNS), not yet said.
        self._dropped_runs = 0
        self._held = 0

    def run_started(self, run: TerminalRun) -> None:
        if self._entries and isinstance(self._entries[-1].run, _Between):
            self._entries[-1].run.done = True
        self._entries.append(_Entry(run, self._cap))
        ended = [e for e in self._entries if e.run.done]
        while len(ended) > MAX_UNREAD_RUNS:
            # Nobody is reading this terminal: the oldest news goes first.
            oldest = ended.pop(0)
            self._entries.remove(oldest)
            self._dropped_runs += 1

    def between_runs(self, data: bytes, task_id: str | None) -> None:
        """Output of no command (the terminal's task was ``task_id``)."""
        entries = self._entries
        last = entries[-1] if entries else None
        target = None
        if last is not None and not last.run.done and len(entries) > 1:
            # A command has just started (bash's job notices come right after its
            # start marker): what it did not write belongs with what came before it.
            before = entries[-2]
            if isinstance(before.run, _Between) and before.run.task_id == task_id:
                target = before
        if target is None:
            if last is None or not isinstance(last.run, _Between) or last.run.done:
                last = _Entry(_Between(task_id), self._cap)
                entries.append(last)
            target = last
        target.pending.append(data)
        self._held += len(data)
        if self._held > 3 * self._cap:
            self._trim()

    def output(self, run: TerminalRun, data: bytes) -> None:
        # The newest entry is almost always the one: check it before searching.
        if self._entries and self._entries[-1].run is run:
            self._entries[-1].pending.append(data)
        else:
            for entry in self._entries:
                if entry.run is run:
                    entry.pending.append(data)
                    break
        self._held += len(data)
        if self._held > 3 * self._cap:
            self._trim()

    def _trim(self) -> None:
        """Hold at most about three times one run's cap unread in all (one run alone
        holds up to about twice): the oldest runs' unread output goes first."""
        self._held = sum(e.pending.held for e in self._entries)
        for entry in list(self._entries)[:-1]:
            if self._held <= 3 * self._cap:
                break
            held = entry.pending.held
            if held:
                entry.trimmed += entry.pending.total - entry.pending.dropped
                entry.pending.clear()
                self._held -= held

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
            between = isinstance(run, _Between)
            data = entry.pending.getvalue()
            if entry.trimmed and not peek:
                data = _trimmed_notice(entry.trimmed) + data
                entry.trimmed = 0
            if not ended or between:
                # A line still open between runs is the prompt's or what was typed.
                cut = data.rfind(b"\n") + 1
                rest, data = data[cut:], data[:cut]
            if ended:
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
            if text.strip() if between else text or ended:
                taken.append(
                    UnreadRun(
                        run.id,
                        run.command_line,
                        run.state,
                        run.exit_code,
                        ended,
                        model_text(text, self._limits).text.rstrip("\n"),
                    )
                )
        if self._dropped_runs and taken and not peek and run_id is None:
            # Said once, on the first run handed out next.
            count, self._dropped_runs = self._dropped_runs, 0
            notice = (
                f"[the output of {count} earlier run(s) was not kept: a terminal keeps "
                f"at most {MAX_UNREAD_RUNS} unread runs]"
            )
            taken[0] = dataclasses.replace(taken[0], text=f"{notice}\n{taken[0].text}")
        return taken


def _trimmed_notice(count: int) -> bytes:
    return (
        f"[{count} bytes of this run's output were not kept: the terminal held too "
        "much unread output]\n"
    ).encode()
