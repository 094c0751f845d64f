"""Output for models: each function against a table of cases, and the pipeline."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.model_text import TextLimits, cut, fold_repeats, model_text
from registry.output import BoundedBuffer, IncrementalText, strip_escape_sequences


def truncate_output(text: str, line_limit: int | None, char_limit: int | None) -> str:
    return cut(text, line_limit, char_limit).text


def compress_terminal_output(
    text: str,
    line_limit: int | None = 500,
    char_limit: int | None = 50_000,
    compress_progress_bar: bool = True,
) -> str:
    return model_text(text, TextLimits(line_limit, char_limit, None, compress_progress_bar)).text


# Carriage returns and backspaces: tests/test_render.py, against pyte.


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a\na\na\n", "a\na\na\n"),
        (
            "downloading package 42%\n" * 5 + "done\n",
            "downloading package 42%\n<previous line repeated 4 additional times>\ndone\n",
        ),
        ("x\ny\nx\n", "x\ny\nx\n"),
        ("", ""),
        # The last line has no newline, so it is not one of the run.
        (
            "a much longer repeated line of output here\n" * 3 + "a much longer",
            "a much longer repeated line of output here\n"
            "<previous line repeated 2 additional times>\na much longer",
        ),
        ("short\n" * 3 + "short", "short\n" * 3 + "short"),
    ],
)
def test_fold_repeats(text: str, expected: str) -> None:
    assert fold_repeats(text) == expected


def test_truncate_output_characters_first() -> None:
    text = "x" * 80 + "y" * 20
    out = truncate_output(text, line_limit=500, char_limit=50)
    assert out == "x" * 10 + "\n[...50 characters omitted...]\n" + "x" * 20 + "y" * 20


def test_truncate_output_lines_keeps_20_percent_head_80_percent_tail() -> None:
    text = "\n".join(f"line {i}" for i in range(100))
    out = truncate_output(text, line_limit=10, char_limit=50_000)
    head, tail = out.split("\n[...90 lines omitted...]\n\n")
    assert head == "line 0\nline 1\n"
    assert tail == "\n".join(f"line {i}" for i in range(92, 100))


def test_truncate_output_within_limits_is_unchanged() -> None:
    assert truncate_output("a\nb\nc", line_limit=3, char_limit=10) == "a\nb\nc"
    assert truncate_output("a" * 10, line_limit=None, char_limit=None) == "a" * 10


def test_truncate_never_splits_a_character() -> None:
    text = "\U0001f600" * 100
    out = truncate_output(text, line_limit=500, char_limit=51)
    assert out.encode("utf-8").decode("utf-8") == out
    assert out.startswith("\U0001f600" * 10)


def test_strip_escape_sequences_keeps_text() -> None:
    raw = (
        "\x1b[1;31mred\x1b[0m \x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ "
        "\x1b(Bcharset \x1b=keypad\x1b> \x1b[?2004hpaste\x1b[?2004l \x1bPdcs\x1b\\end"
    )
    assert strip_escape_sequences(raw) == "red link charset keypad paste end"


def test_compress_pipeline() -> None:
    raw = (
        "\x1b[32mStarting\x1b[0m\r\n"
        + "".join(f"\rDownloading {i}%" for i in range(0, 101, 10))
        + "\r\n"
        + "ok\x08\x08OK\r\n"
        + "warning: same thing\r\n" * 30
    )
    out = compress_terminal_output(raw, line_limit=500, char_limit=50_000)
    assert out == (
        "Starting\nDownloading 100%\nOK\nwarning: same thing\n"
        "<previous line repeated 29 additional times>\n"
    )


def test_compress_without_progress_bar_handling_keeps_overwrites() -> None:
    out = compress_terminal_output("a\rb\r\n", compress_progress_bar=False)
    assert out == "a\rb\n"


def test_incremental_text_never_breaks_a_character() -> None:
    data = "é€😀".encode()
    decoder = IncrementalText()
    assert "".join(decoder.decode(data[i : i + 1]) for i in range(len(data))) == "é€😀"
    assert IncrementalText().decode(b"\xff ok", final=True) == "\ufffd ok"


@given(st.lists(st.binary(max_size=3000), max_size=30), st.integers(0, 5000))
def test_bounded_buffer_keeps_head_and_tail(chunks: list[bytes], cap: int) -> None:
    buffer = BoundedBuffer(cap)
    for chunk in chunks:
        buffer.append(chunk)
    whole = b"".join(chunks)
    value = buffer.getvalue()
    assert buffer.total == len(whole)
    assert len(value) <= max(cap, 0) or len(whole) <= cap
    if len(whole) <= cap:
        assert value == whole
    else:
        head = int(cap * 0.2)
        assert value.startswith(whole[:head])
        assert whole.endswith(value[head:])
        assert buffer.dropped >= len(whole) - cap


def test_huge_output_is_cleaned_only_where_it_is_kept() -> None:
    lines = [f"line {i}\r\n" for i in range(300_000)]
    text = "".join(lines).replace("line 5\r\n", "10%\r50%\r100%\r\n")
    out = compress_terminal_output(text, line_limit=500, char_limit=1000)
    head, _, tail = out.partition("\n[...")
    assert head.startswith("line 0\nline 1\nline 2\nline 3\nline 4\n100%\nline 6")
    assert len(head) <= 200  # whole lines within the head's share
    assert head.endswith("line 25\n")
    assert tail.endswith("line 299999\n")
    omitted = int(tail.split(" characters omitted")[0])
    shown_tail = tail.split("...]\n", 1)[1]
    assert len(shown_tail) <= 800
    assert shown_tail.startswith("line ")
    assert omitted == len(text) - len(head) - len(shown_tail)


def test_long_output_keeps_to_the_line_limit_too() -> None:
    # seq 1 20000: 108,894 characters. Cut by characters alone it showed a model
    # ~8,900 lines (and cut two of them in the middle) where the line limit says 500.
    text = "".join(f"{i}\n" for i in range(1, 20_001))
    out = truncate_output(text, line_limit=500, char_limit=50_000)
    head, marker, tail = out.partition("\n[...")
    tail = tail.split("...]\n", 1)[1]
    assert "characters omitted" in marker + out
    assert head.splitlines() == [str(i) for i in range(1, 101)]
    # (the empty "line" after the last newline counts, as it always has)
    assert tail.splitlines() == [str(i) for i in range(19_602, 20_001)]
