"""Hot processes: is a terminal's command still producing output worth waiting for?

A terminal is hot while output arrived within ``hot_timeout`` (2 s), or within
``compiling_timeout`` (15 s) while its recent output looks like a build in progress
-- a build word (``compiling``, ``building`` ...) with no completion word after it.
Words match whole (``Building frontend`` is building; ``0 errors`` is no failure),
with the usual inflections of the completion words (``finished``, ``failed``).

The clock is injectable so tests can move time instead of sleeping through it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

__all__ = ["HotTracker"]

_BUILD = re.compile(r"\b(?:compiling|building|bundling|transpiling|generating|starting)\b", re.I)
_COMPLETE = re.compile(
    r"\b(?:compiled|success(?:ful(?:ly)?)?|succeed(?:ed|s)?|finish(?:ed|es)?"
    r"|complete(?:d|s)?|done|stop(?:ped|s)?|exit(?:ed|s)?|terminated?|error|fail(?:ed|s|ure)?)\b",
    re.I,
)
#: How much recent text is kept for the build-word scan (characters).
_WINDOW = 2048


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
        """Note output (decoded text) arriving now."""
        if not text:
            return
        self._last_output = self._clock()
        self._recent = (self._recent + text)[-_WINDOW:]
        self._compiling = _looks_like_build(self._recent)

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


def _looks_like_build(text: str) -> bool:
    """A build word whose last occurrence is not followed by a completion word."""
    last_build = None
    for last_build in _BUILD.finditer(text):  # noqa: B007 - we want the last match
        pass
    if last_build is None:
        return False
    return _COMPLETE.search(text, last_build.end()) is None
