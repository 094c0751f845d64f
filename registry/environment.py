"""Environment details: a markdown rendering of what a task's terminals are doing.

The report an agent puts in front of its model: active terminals (working directory,
the command they run, what it waits for, output not seen yet), then inactive
terminals whose completed runs have output not seen yet (or with a stopped job).
Nothing to report gives empty markdown.

A terminal that waits says so in one line the model can act on (:func:`describe_wait`):
"waiting for input: `continue? `", "`less` is open full screen: press q", "a
background job is stopped on terminal input (`cat`, pid 4242)".

Output goes in fenced code blocks, each fence longer than any run of backticks in
it: a ``#``, ``*`` or ``<b>`` a command printed stays text, and a preview shows each
output as the block it is.  Output between commands (a background job's) is
reported as such, under no command line.

This module only formats.  The registry decides which terminals are covered, waits
for hot ones to cool down, and takes the snapshots rendered here
(:class:`ReportedTerminal`, :class:`ReportedRun`), retrieving their unread output so
the next report does not repeat it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from .run import RunState
from .waiting import Certainty, TerminalState, WaitState

__all__ = [
    "EnvironmentReport",
    "ReportedRun",
    "ReportedTerminal",
    "code_span",
    "describe_wait",
    "fenced",
    "render_report",
]


@dataclass(frozen=True)
class ReportedRun:
    #: None (and no command line) for output between runs.
    run_id: int | None
    command_line: str | None
    state: str
    exit_code: int | None
    ended: bool
    output: str


@dataclass(frozen=True)
class ReportedTerminal:
    terminal_id: int
    task_id: str | None
    cwd: str
    active: bool
    command_line: str | None
    runs: list[ReportedRun] = field(default_factory=list)
    #: What it waits for, when it waits for someone or has a stopped job.
    wait: WaitState | None = None


@dataclass(frozen=True)
class EnvironmentReport:
    markdown: str
    terminals: list[ReportedTerminal]

    @property
    def active(self) -> list[ReportedTerminal]:
        return [t for t in self.terminals if t.active]

    @property
    def inactive(self) -> list[ReportedTerminal]:
        return [t for t in self.terminals if not t.active]


def render_report(terminals: Sequence[ReportedTerminal]) -> EnvironmentReport:
    """The report on ``terminals`` (oldest first): the active ones, then the rest."""
    active = [t for t in terminals if t.active]
    inactive = [t for t in terminals if not t.active]
    return EnvironmentReport(_markdown(active, inactive), [*active, *inactive])


def _markdown(active: list[ReportedTerminal], inactive: list[ReportedTerminal]) -> str:
    parts: list[str] = []
    if active:
        parts.append("# Actively Running Terminals")
        for terminal in active:
            parts.append(f"## Terminal {terminal.terminal_id} (Active)")
            parts.append(f"### Working Directory: `{terminal.cwd}`")
            parts.append(f"### Original command: `{terminal.command_line}`")
            _state_line(parts, terminal)
            body = _runs_text(terminal.runs, current=terminal.command_line)
            if body:
                parts.append("### New Output")
                parts.append(body)
    if inactive:
        if parts:
            parts.append("")
        parts.append("# Inactive Terminals with Completed Process Output")
        for terminal in inactive:
            parts.append(f"## Terminal {terminal.terminal_id} (Inactive)")
            parts.append(f"### Working Directory: `{terminal.cwd}`")
            _state_line(parts, terminal)
            if terminal.runs:
                parts.append("### New Output")
                parts.append(_runs_text(terminal.runs, current=None))
    return "\n".join(parts) + ("\n" if parts else "")


def _state_line(parts: list[str], terminal: ReportedTerminal) -> None:
    text = describe_wait(terminal.wait) if terminal.wait is not None else None
    if text:
        parts.append(f"### State: {text}")


def describe_wait(state: WaitState) -> str | None:
    """One line on what a terminal waits for; None when it waits for nobody."""
    kind = state.state
    program = f"`{state.program}`" if state.program else "the program"
    if kind is TerminalState.FULL_SCREEN:
        text = f"{program} is open full screen"
        if state.keys:
            text += ": press " + " ".join(state.keys)
    elif kind in (TerminalState.WAITING_FOR_INPUT, TerminalState.WAITING_FOR_PASSWORD):
        what = "input" if kind is TerminalState.WAITING_FOR_INPUT else "a password"
        text = f"waiting for {what}"
        text += f": `{state.prompt}`" if state.prompt and state.prompt.strip() else f" ({program})"
    elif kind is TerminalState.STOPPED_JOB:
        where = f" ({program}, pid {state.pid})" if state.pid else f" ({program})"
        if "reading the terminal" in state.reason:
            text = "a background job is stopped on terminal input" + where
        else:
            text = "a job is stopped" + where
    else:
        return None
    if state.certainty is Certainty.POSSIBLY:
        text = "possibly " + text
    return text


def _runs_text(runs: list[ReportedRun], current: str | None) -> str:
    """Completed runs each under their command line, output between runs under its
    own heading; the running one's output without one.  Every output fenced."""
    blocks: list[str] = []
    for run in runs:
        if run.command_line is None:
            blocks.append(f"Output between commands (background jobs):\n{fenced(run.output)}")
            continue
        if not run.ended:
            if run.output:
                blocks.append(fenced(run.output))
            continue
        header = f"Command: {code_span(run.command_line)} ({_outcome(run)})"
        blocks.append(f"{header}\n{fenced(run.output)}" if run.output else header)
    return "\n".join(blocks)


_BACKTICKS = re.compile("`+")


def _longest_backticks(text: str) -> int:
    return max((len(found) for found in _BACKTICKS.findall(text)), default=0)


def fenced(text: str) -> str:
    """``text`` as a fenced code block whose fence no line of it can close."""
    fence = "`" * max(3, _longest_backticks(text) + 1)
    return f"{fence}\n{text}\n{fence}"


def code_span(text: str) -> str:
    """``text`` as inline code, whatever backticks it holds (CommonMark's rule)."""
    ticks = "`" * (_longest_backticks(text) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _outcome(run: ReportedRun) -> str:
    code = "unknown" if run.exit_code is None else str(run.exit_code)
    if run.state == RunState.COMPLETED:
        return f"exit code {code}"
    label = {
        RunState.TIMED_OUT: "timed out",
        RunState.CANCELLED: "cancelled",
        RunState.FAILED: "failed",
    }.get(RunState(run.state), run.state)
    return f"{label}, exit code {code}"
