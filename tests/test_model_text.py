"""Text for models: the pure pipeline (registry.model_text); the same through a real
server is tests/test_run_output.py."""

from __future__ import annotations

import pytest

from registry.model_text import TextLimits, clamp_lines, model_text
from registry.output import BoundedBuffer

# -- the pipeline ---------------------------------------------------------------------


def test_a_long_line_keeps_its_head_and_tail_and_says_how_much_went() -> None:
    text, clamped = clamp_lines("short\n" + "a" * 60 + "b" * 40 + "\nend\n", 20)
    assert clamped == 1
    assert text == "short\n" + "a" * 10 + " [...80 characters omitted...] " + "b" * 10 + "\nend\n"


def test_one_huge_line_no_longer_eats_the_budget() -> None:
    """A minified bundle between two useful lines: both survive, the bundle is clamped."""
    raw = "building bundle\n" + "x" * 200_000 + "\nerror: bundle too large\n"
    result = model_text(raw, TextLimits(line_characters=2_000))
    assert result.text.startswith("building bundle\n")
    assert result.text.endswith("error: bundle too large\n")
    assert "[...198000 characters omitted...]" in result.text
    assert result.clamped_lines == 1
    assert result.truncated
    assert len(result.text) < 2_100


@pytest.mark.parametrize("size", [3 * 2**20, 5 * 2**20])
def test_the_omitted_count_is_what_was_really_dropped(size: int) -> None:
    """Past the raw buffer's cap its middle is gone: still counted."""
    buffer = BoundedBuffer(2**20)
    line = b"0123456789" * 9 + b"abcdefgh\r\n"  # 100 characters
    for _ in range(size // len(line)):
        buffer.append(line)
    kept = buffer.kept()
    assert kept.dropped_bytes > 0
    assert kept.dropped_characters == kept.dropped_bytes  # ASCII
    result = model_text(kept, TextLimits(characters=1_000))
    shown = len(result.text) - len(f"\n[...{result.omitted_characters} characters omitted...]\n")
    assert result.omitted_characters == (size // len(line)) * len(line) - shown


def test_truncated_is_known_not_guessed_from_the_text() -> None:
    result = model_text("[...5 characters omitted...]\n")
    assert not result.truncated


def test_without_rendering_only_escapes_go() -> None:
    assert model_text("a\rb\x1b[K\r\n", TextLimits(render=False)).text == "a\rb\n"
