"""Telling that a command waits: for input, a password, a key in a full-screen program.

The kernel knows which process group owns a terminal, what its threads are blocked
in and whether echo is off; the output tells whether the alternate screen is up and
what the prompt says.  This package reads the first (:mod:`.probe`, with
:mod:`.procfs` and :mod:`.syscalls`), decides purely (:mod:`.decide` over a
:mod:`.sample`), and schedules the looking by events (:mod:`.watcher`).  The screen
model is :mod:`registry.screen`; named keys are :mod:`registry.keys`.
"""

from .decide import Certainty, Decision, Rules, TerminalState, decide, leave_keys
from .probe import TerminalProbe
from .sample import ProcessState, Sample, ThreadState, Wait
from .watcher import Check, WaitState, WaitWatcher, WatchSettings

__all__ = [
    "Certainty",
    "Check",
    "Decision",
    "ProcessState",
    "Rules",
    "Sample",
    "TerminalProbe",
    "TerminalState",
    "ThreadState",
    "Wait",
    "WaitState",
    "WaitWatcher",
    "WatchSettings",
    "decide",
    "leave_keys",
]
