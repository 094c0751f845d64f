"""Hot processes: is a terminal's command still producing output worth waiting for?

A terminal is hot while output arrived within ``hot_timeout`` (2 s), or within
``compiling_timeout`` (15 s) while its recent output looks like a build in progress
-- a build word (``compiling``, ``building`` ...) with no completion word after it.
Words match whole (``Building frontend`` is building; ``0 errors`` is no failure),
with the usual inflections of the completion words (``finished``, ``failed``).

The clock is injectable so tests can move time instead of sleeping through it.
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["HotTracker"]

_BUILD_WORDS = frozenset(
    {"compiling", "building", "bundling", "transpiling", "generating", "starting"}
)
_COMPLETION_WORDS = frozenset(
    {
        *("compiled", "success", "successful", "successfully", "succeed", "succeeded"),
        *("succeeds", "finish", "finished", "finishes", "complete", "completed"),
        *("completes", "done", "stop", "stopped", "stops", "exit", "exited", "exits"),
        *("terminate", "terminated", "error", "fail", "failed", "fails", "failure"),
    }
)
#: Stems to search for; the whole word around a hit is then checked against the sets.
_BUILD_STEMS = ("compiling", "building", "bundling", "transpiling", "generating", "starting")
_COMPLETION_STEMS = (
    *("compiled", "succe", "finish", "complete", "done"),
    *("stop", "exit", "terminate", "error", "fail"),
)
#: Characters of earlier text kept so that a word split across reads is found.
_CARRY = 24


class HotTracker:
    """Tracks one terminal's output timing and whether it looks mid-build."""

    def __init__(
        self,
        hot_timeout: float = 2.0,
        compiling_timeout: float = 15.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.hot_timeout = hot_timeout
        self.compiling_timeout = compiling_timeout
        self._clock = clock
        self._last_output: float | None = None
        self._recent = ""
        self._compiling = False

    def feed(self, text: str) -> None:
        """Note output (decoded text) arriving now.

        Only the new text is scanned (with a few characters of the previous text, so
        a word split between two reads is still whole): cost per read, not per
        window.
        """
        if not text:
            return
        self._last_output = self._clock()
        window = self._recent + text
        state = _build_state(window)
        if state is not None:
            self._compiling = state
        self._recent = window[-_CARRY:]

    def reset(self) -> None:
        """A new command starts: earlier build words no longer count."""
        self._recent = ""
        self._compiling = False

    @property
    def compiling(self) -> bool:
        return self._compiling

    def is_hot(self) -> bool:
        if self._last_output is None:
            return False
        quiet_for = self._clock() - self._last_output
        window = self.compiling_timeout if self._compiling else self.hot_timeout
        return quiet_for < window

    def cools_in(self) -> float:
        """Seconds until this terminal stops being hot, if no more output comes."""
        if self._last_output is None:
            return 0.0
        window = self.compiling_timeout if self._compiling else self.hot_timeout
        return max(0.0, self._last_output + window - self._clock())


def _build_state(text: str) -> bool | None:
    """True if ``text`` ends mid-build, False if it ends on a completion, else None.

    Whichever of a build word or a completion word comes last decides; text with
    neither leaves the state as it was.  This runs on every read of output, so it is
    a handful of ``str.rfind`` calls (C speed) rather than a regular expression that
    would try every alternative at every position.
    """
    lower = text.lower()
    last_build = _last_word(lower, _BUILD_STEMS, _BUILD_WORDS) if "ing" in lower else -1
    last_done = _last_word(lower, _COMPLETION_STEMS, _COMPLETION_WORDS)
    if last_build < 0 and last_done < 0:
        return None
    return last_build > last_done


def _last_word(text: str, stems: tuple[str, ...], words: frozenset[str]) -> int:
    """Start of the last whole word of ``words`` in ``text`` (found by its stem); -1."""
    best = -1
    for stem in stems:
        end = len(text)
        while True:
            at = text.rfind(stem, best + 1, end)
            if at < 0:
                break
            if at == 0 or not text[at - 1].isalnum():
                after = at + len(stem)
                while after < len(text) and text[after].isalpha():
                    after += 1
                if text[at:after] in words and (after == len(text) or not text[after].isdigit()):
                    best = at
                    break
            end = at + len(stem) - 1
    return best
