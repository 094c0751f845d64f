"""Hot-process windows, with an injected clock instead of sleeps."""

from __future__ import annotations

import pytest

from registry.hot import HotTracker


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_cold_until_output(clock: Clock) -> None:
    assert not HotTracker(clock=clock).is_hot()


def test_hot_for_two_seconds_after_output(clock: Clock) -> None:
    hot = HotTracker(clock=clock)
    hot.feed("some output\n")
    clock.now += 1.9
    assert hot.is_hot()
    clock.now += 0.2
    assert not hot.is_hot()


@pytest.mark.parametrize(
    "text",
    [
        "Compiling foo v0.1.0\n",
        "Building frontend...\n",
        "webpack: bundling\n",
        "Transpiling 3 files",
        "Generating types",
        "Starting development server",
    ],
)
def test_build_in_progress_stays_hot_for_fifteen_seconds(clock: Clock, text: str) -> None:
    hot = HotTracker(clock=clock)
    hot.feed(text)
    assert hot.compiling
    clock.now += 14.9
    assert hot.is_hot()
    clock.now += 0.2
    assert not hot.is_hot()


@pytest.mark.parametrize(
    "text",
    [
        "Compiling foo\nFinished dev target\n",
        "building...\nDone in 2s\n",
        "Compiling\nerror: could not compile\n",
        "Building\nBuild failed\n",
        "starting\ncompiled successfully\n",
        "Generating\nprocess exited\n",
    ],
)
def test_completion_word_after_build_word_ends_compiling(clock: Clock, text: str) -> None:
    hot = HotTracker(clock=clock)
    hot.feed(text)
    assert not hot.compiling
    clock.now += 2.1
    assert not hot.is_hot()


@pytest.mark.parametrize(
    ("text", "compiling"),
    [
        ("Rebuilding is not a build word as a whole\n", False),  # substring only
        ("Building frontend\n", True),
        ("Compiling... 0 errors so far\n", True),  # "errors" is not "error"
        ("prebundling done\n", False),
        ("the errand is done\n", False),
    ],
)
def test_whole_words_only(clock: Clock, text: str, compiling: bool) -> None:
    hot = HotTracker(clock=clock)
    hot.feed(text)
    assert hot.compiling is compiling


def test_build_word_after_completion_is_compiling_again(clock: Clock) -> None:
    hot = HotTracker(clock=clock)
    hot.feed("Compiling\nFinished\n")
    assert not hot.compiling
    hot.feed("File changed. Compiling again\n")
    assert hot.compiling


def test_windows_are_settings(clock: Clock) -> None:
    hot = HotTracker(hot_timeout=0.5, compiling_timeout=1.0, clock=clock)
    hot.feed("Compiling")
    clock.now += 0.9
    assert hot.is_hot()
    assert hot.cools_in() == pytest.approx(0.1)
    hot.reset()
    assert not hot.is_hot()
