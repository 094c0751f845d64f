"""The decision: from one sample, the quiet time and the screen, what the terminal is doing.

Pure: no I/O, no clock.  The rule is the one measured in
shared/notes/input-wait-facts.md (39 of 39 cases, no confident false report):

* The shell itself in the foreground and no command running (our markers say so):
  ``idle`` -- or ``stoppedJob`` when one of its jobs is stopped (a background
  ``cat &`` is stopped by SIGTTIN the moment it reads).
* Waiting = at least one thread of the foreground group blocked reading the
  terminal, no thread running, and quiet (no output, none of our writes) for
  ``quiet`` (100 ms).  Counting our own writes matters: right after a write the
  kernel state is stale (git's password prompt was once taken for a plain prompt).
* A finite select/poll timeout under 1 s is a polling loop: it needs quiet of
  ``min(2 x timeout, 1 s)``.
* A wait set that also holds a socket is a proxy (ssh, docker exec): the far side is
  unknown; after 2 s of quiet only the screen can tell -- alternate screen, or a
  prompt-shaped cursor row -- and the answer is "possibly".
* A thread reading the terminal while another runs, and a sleeping group whose
  calls cannot be read (setuid sudo/su): "possibly", after longer quiet, the latter
  as a password when echo is off in canonical mode (300 ms).
* Labels: ``fullScreen`` when the foreground group switched the alternate screen on,
  or a known pager/editor turned keypad mode on (git runs less with ``LESS=FRX``: no
  alternate screen); ``waitingForPassword`` when ECHO is off and ICANON on;
  otherwise ``waitingForInput`` with the cursor row as the prompt.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Protocol

from .sample import ProcessState, Sample, ThreadState, Wait

__all__ = [
    "Certainty",
    "Decision",
    "Rules",
    "ScreenFacts",
    "TerminalState",
    "decide",
    "leave_keys",
    "looks_like_password_prompt",
    "looks_like_prompt",
]


class TerminalState(StrEnum):
    IDLE = "idle"
    RUNNING = "running"
    WAITING_FOR_INPUT = "waitingForInput"
    WAITING_FOR_PASSWORD = "waitingForPassword"
    FULL_SCREEN = "fullScreen"
    STOPPED_JOB = "stoppedJob"


class Certainty(StrEnum):
    CERTAIN = "certain"
    #: The kernel could not show it (a proxy's far side, a busy thread, a setuid
    #: program): said after a longer quiet period from the screen's evidence.
    POSSIBLY = "possibly"


class ScreenFacts(Protocol):
    """What the decision needs from the screen model (read lazily: prompt_line)."""

    @property
    def alternate_screen(self) -> bool:
        """On, and switched on by the current foreground group."""

    @property
    def application_keypad(self) -> bool: ...

    def prompt_line(self) -> str:
        """The cursor row's text (or the last non-blank row above it)."""


@dataclass(frozen=True)
class Rules:
    """The rule's time windows, in seconds (the note's figures)."""

    quiet: float = 0.1
    #: A select/poll timeout below this is a polling loop ...
    polling_timeout: float = 1.0
    #: ... and needs quiet of min(2 x timeout, this).
    polling_quiet_cap: float = 1.0
    #: Proxies, busy threads, unreadable programs without echo-off: "possibly" after.
    possibly_quiet: float = 2.0
    #: An unreadable (setuid) group with echo off in canonical mode: a password after.
    unreadable_password_quiet: float = 0.3
    #: Look again this soon after a sample that raced a returning call.
    raced_recheck: float = 0.02


@dataclass(frozen=True)
class Decision:
    """The verdict on one sample.

    ``state`` None means "not decided yet": keep the current state and look again
    in ``recheck_in`` seconds (more quiet is needed, or the sample raced a call).
    ``recheck_in`` on a decided state says when the verdict could change without
    output (a "possibly" rule becoming due).
    """

    state: TerminalState | None
    certainty: Certainty = Certainty.CERTAIN
    program: str | None = None
    pid: int | None = None
    prompt: str | None = None
    keys: tuple[str, ...] | None = None
    reason: str = ""
    recheck_in: float | None = None


_VI = ("Escape", ":qa!", "Enter")
_LEAVE_KEYS: dict[str, tuple[str, ...]] = {
    **dict.fromkeys(("less", "more", "most", "pg", "man", "info", "pinfo"), ("q",)),
    **dict.fromkeys(("top", "htop", "btop", "atop", "iotop", "nethogs", "glances"), ("q",)),
    **dict.fromkeys(("tig", "ranger", "nnn", "ncdu", "mutt", "neomutt", "lazygit"), ("q",)),
    **dict.fromkeys(("vi", "vim", "nvim", "view", "vimdiff", "vim.basic", "vim.tiny"), _VI),
    **dict.fromkeys(("rvim", "gvim", "ex", "vim.nox", "vim.gtk3"), _VI),
    **dict.fromkeys(("nano", "rnano", "pico"), ("C-x",)),
    **dict.fromkeys(("emacs", "emacs-nox", "mg", "jed"), ("C-x", "C-c")),
    "mc": ("F10",),
    "fzf": ("Escape",),
    "watch": ("C-c",),
}

#: Pagers and editors that are full screen when they turn keypad mode on, even
#: without the alternate screen (``less -X``, as git runs it).
_KEYPAD_PROGRAMS = frozenset(
    {"less", "more", "most", "man", "vi", "vim", "nvim", "view", "vim.basic", "vim.tiny"}
    | {"nano", "rnano", "pico", "top", "htop", "emacs", "mg", "tig"}
)


def leave_keys(program: str | None) -> tuple[str, ...] | None:
    """The named keys that leave a full-screen ``program``; None when unknown."""
    if program is None:
        return None
    return _LEAVE_KEYS.get(program) or _LEAVE_KEYS.get(program.rsplit("/", 1)[-1])


# Ends like a question or a prompt: "? ", ": ", "> ", "$ ", "# ", "] ", "» ", a
# zsh "% " (but not "45%": a percentage is progress, not a prompt).
_PROMPT_SHAPE = re.compile(r"(?:[?:>$#\])»❯]|(?<![0-9])%)\s*$")
_PASSWORD_WORDS = re.compile(r"pass(word|phrase)|\bPIN\b|verification code", re.IGNORECASE)


def looks_like_prompt(line: str) -> bool:
    return bool(line.strip()) and bool(_PROMPT_SHAPE.search(line))


def looks_like_password_prompt(line: str) -> bool:
    return looks_like_prompt(line) and bool(_PASSWORD_WORDS.search(line))


_DEFAULT_RULES = Rules()


def decide(
    sample: Sample,
    quiet: float,
    screen: ScreenFacts,
    command_running: bool,
    rules: Rules | None = None,
) -> Decision:
    """The state of the terminal ``sample`` was taken of.

    ``quiet``: seconds since the later of the last output and our last write.
    ``command_running``: our markers say a command line was started and has not
    ended (so the shell itself reading the terminal is ``read``, not its prompt).
    """
    rules = rules or _DEFAULT_RULES
    if sample.unstable:
        return Decision(
            None, reason="a blocked call changed while read", recheck_in=rules.raced_recheck
        )
    if sample.shell_in_foreground and not command_running:
        return _at_prompt(sample)
    return _foreground(sample, quiet, screen, rules)


def _at_prompt(sample: Sample) -> Decision:
    for job in sample.jobs:
        waits = {thread.wait for thread in job.threads}
        if Wait.STOPPED_ON_TERMINAL in waits:
            reason = (
                f"{job.name} (pid {job.pid}) was stopped reading the terminal in the background"
            )
            return Decision(TerminalState.STOPPED_JOB, program=job.name, pid=job.pid, reason=reason)
    for job in sample.jobs:
        if job.threads and all(t.wait is Wait.STOPPED for t in job.threads):
            reason = f"{job.name} (pid {job.pid}) is a stopped job"
            return Decision(TerminalState.STOPPED_JOB, program=job.name, pid=job.pid, reason=reason)
    return Decision(TerminalState.IDLE, reason="the shell is in the foreground")


def _foreground(sample: Sample, quiet: float, screen: ScreenFacts, rules: Rules) -> Decision:
    threads = [(process, thread) for process in sample.processes for thread in process.threads]
    if not threads:
        # The group ended (or left our tree) between tcgetpgrp and the walk.
        return Decision(
            None, reason="the foreground group has no threads we can see", recheck_in=rules.quiet
        )
    leader = _leader(sample)
    if all(thread.wait in (Wait.STOPPED, Wait.STOPPED_ON_TERMINAL) for _, thread in threads):
        return Decision(
            TerminalState.STOPPED_JOB,
            program=leader.name,
            pid=leader.pid,
            reason="the foreground group is stopped",
        )
    for process, thread in threads:
        if thread.wait is Wait.INNER_TERMINAL and thread.inner is not None:
            inner = _foreground(thread.inner, quiet, screen, rules)
            via = f"{process.name} (pid {process.pid}) relays a pty; inside it: {inner.reason}"
            return replace(inner, reason=via)
    running = [(p, t) for p, t in threads if t.wait is Wait.RUNNING]
    readers = [(p, t) for p, t in threads if t.wait in (Wait.TERMINAL, Wait.TERMINAL_AND_SOCKET)]
    unknown = [(p, t) for p, t in threads if t.wait is Wait.UNKNOWN]
    if readers:
        return _reading(sample, readers, bool(running), quiet, screen, rules)
    if running:
        process = running[0][0]
        return Decision(
            TerminalState.RUNNING,
            program=leader.name,
            pid=leader.pid,
            reason=f"{process.name} (pid {process.pid}) is running",
        )
    if unknown:
        return _unreadable(sample, unknown[0][0], quiet, screen, rules)
    return Decision(
        TerminalState.RUNNING,
        program=leader.name,
        pid=leader.pid,
        reason="the foreground group waits on something other than the terminal",
    )


def _reading(
    sample: Sample,
    readers: list[tuple[ProcessState, ThreadState]],
    busy: bool,
    quiet: float,
    screen: ScreenFacts,
    rules: Rules,
) -> Decision:
    process, _thread = readers[0]
    need = rules.quiet
    for _, thread in readers:
        if thread.timeout is not None and thread.timeout < rules.polling_timeout:
            need = max(need, min(2 * thread.timeout, rules.polling_quiet_cap))
    proxy = any(thread.wait is Wait.TERMINAL_AND_SOCKET for _, thread in readers)
    certainty = Certainty.CERTAIN
    why = f"{process.name} (pid {process.pid}) reads the terminal"
    if busy:
        # One thread reads the terminal, another computes: it may be waiting, or
        # about to print. Only a long quiet makes "possibly waiting" worth saying.
        if quiet < rules.possibly_quiet:
            return Decision(
                TerminalState.RUNNING,
                program=process.name,
                pid=process.pid,
                reason=f"{why}, but another thread is running",
                recheck_in=rules.possibly_quiet - quiet,
            )
        certainty = Certainty.POSSIBLY
        why += " while another thread is running"
    if proxy:
        need = max(need, rules.possibly_quiet)
        certainty = Certainty.POSSIBLY
        why = f"{process.name} (pid {process.pid}) relays the terminal to a socket"
    if quiet < need:
        return Decision(
            None,
            program=process.name,
            pid=process.pid,
            reason=f"{why}; not quiet long enough",
            recheck_in=need - quiet,
        )
    if proxy:
        return _by_screen(process, screen, certainty, why, echo_off_canonical=False)
    return _label(sample, process, screen, certainty, why)


def _label(
    sample: Sample, process: ProcessState, screen: ScreenFacts, certainty: Certainty, why: str
) -> Decision:
    name = process.name
    if screen.alternate_screen or (name in _KEYPAD_PROGRAMS and screen.application_keypad):
        how = "the alternate screen is on" if screen.alternate_screen else "keypad mode is on"
        return _full_screen(process, certainty, f"{why}; {how}")
    if sample.echo is False and sample.canonical is True:
        return Decision(
            TerminalState.WAITING_FOR_PASSWORD,
            certainty,
            name,
            process.pid,
            screen.prompt_line(),
            reason=f"{why}; echo is off in canonical mode",
        )
    return Decision(
        TerminalState.WAITING_FOR_INPUT,
        certainty,
        name,
        process.pid,
        screen.prompt_line(),
        reason=why,
    )


def _by_screen(
    process: ProcessState,
    screen: ScreenFacts,
    certainty: Certainty,
    why: str,
    echo_off_canonical: bool,
) -> Decision:
    """Only the screen can tell (proxy, unreadable): alternate screen or a prompt shape."""
    name = process.name
    if screen.alternate_screen:
        return _full_screen(process, certainty, f"{why}; the alternate screen is on")
    prompt = screen.prompt_line()
    if echo_off_canonical or looks_like_password_prompt(prompt):
        return Decision(
            TerminalState.WAITING_FOR_PASSWORD,
            certainty,
            name,
            process.pid,
            prompt,
            reason=f"{why}; the prompt asks for a password",
        )
    if looks_like_prompt(prompt):
        return Decision(
            TerminalState.WAITING_FOR_INPUT,
            certainty,
            name,
            process.pid,
            prompt,
            reason=f"{why}; the cursor row looks like a prompt",
        )
    return Decision(
        TerminalState.RUNNING,
        program=name,
        pid=process.pid,
        reason=f"{why}; the screen shows no prompt",
    )


def _full_screen(process: ProcessState, certainty: Certainty, why: str) -> Decision:
    # No prompt line: a full-screen program's cursor row is wherever it drew last
    # (drawing a screenful costs ~10 ms with pyte, and every redraw would be a
    # change); its name and the keys that leave it are what a caller needs.
    return Decision(
        TerminalState.FULL_SCREEN,
        certainty,
        process.name,
        process.pid,
        None,
        leave_keys(process.name),
        why,
    )


def _unreadable(
    sample: Sample, process: ProcessState, quiet: float, screen: ScreenFacts, rules: Rules
) -> Decision:
    """A sleeping group whose blocked calls we may not read (setuid, Yama)."""
    why = f"{process.name} (pid {process.pid}) sleeps in a call we cannot read"
    password_mode = sample.echo is False and sample.canonical is True
    need = rules.unreadable_password_quiet if password_mode else rules.possibly_quiet
    if quiet < need:
        return Decision(
            TerminalState.RUNNING,
            program=process.name,
            pid=process.pid,
            reason=why,
            recheck_in=need - quiet,
        )
    return _by_screen(process, screen, Certainty.POSSIBLY, why, echo_off_canonical=password_mode)


def _leader(sample: Sample) -> ProcessState:
    """The group's leader if we saw it, else its first process."""
    for process in sample.processes:
        if process.pid == sample.foreground:
            return process
    return sample.processes[0]
