"""The screen model: modes from every byte, the prompt line from the recent output."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.screen import ScreenModel


@pytest.mark.parametrize("mode", [b"1049", b"1047", b"47"])
def test_alternate_screen_on_and_off(mode: bytes) -> None:
    screen = ScreenModel()
    screen.feed(b"\x1b[?" + mode + b"h")
    assert screen.alternate_screen
    screen.feed(b"text\x1b[?" + mode + b"l")
    assert not screen.alternate_screen


def test_modes_as_vim_sets_them_in_one_sequence_list() -> None:
    screen = ScreenModel()
    screen.feed(b"\x1b[?1049h\x1b[22;0;0t\x1b[>4;2m\x1b[?1h\x1b=\x1b[?2004h")
    assert screen.alternate_screen
    assert screen.application_cursor
    assert screen.application_keypad
    assert screen.bracketed_paste
    screen.feed(b"\x1b[?2004l\x1b[?1l\x1b>\x1b[?1049l")
    assert not (screen.alternate_screen)
    assert not (screen.application_cursor)
    assert not (screen.application_keypad)
    assert not (screen.bracketed_paste)


def test_several_modes_in_one_sequence() -> None:
    screen = ScreenModel()
    screen.feed(b"\x1b[?1;1049h")
    assert screen.application_cursor
    assert screen.alternate_screen


@pytest.mark.parametrize("cut", range(1, 8))
def test_a_sequence_split_between_reads_still_counts(cut: int) -> None:
    data = b"ab\x1b[?1049h"
    screen = ScreenModel()
    screen.feed(data[: 2 + cut])
    screen.feed(data[2 + cut :])
    assert screen.alternate_screen


def test_keypad_split_after_escape() -> None:
    screen = ScreenModel()
    screen.feed(b"x\x1b")
    screen.feed(b"=y")
    assert screen.application_keypad


def test_keypad_in_bulk_output_comes_with_cursor_keys() -> None:
    # A long chunk is searched for ESC = only when it switches a private mode too,
    # as terminfo's smkx does (CSI ? 1 h, ESC =).
    screen = ScreenModel()
    screen.feed(b"x" * 4096 + b"\x1b[?1h\x1b=" + b"y" * 4096)
    assert screen.application_keypad
    screen.feed(b"x" * 4096 + b"\x1b[?1l\x1b>" + b"y" * 4096)
    assert not screen.application_keypad


def test_full_reset_clears_the_modes() -> None:
    screen = ScreenModel()
    screen.feed(b"\x1b[?1049h\x1b[?1h\x1b=")
    screen.feed(b"\x1bc")
    assert not (screen.alternate_screen)
    assert not (screen.application_cursor)
    assert not (screen.application_keypad)


def test_the_prompt_is_the_cursor_row_with_its_trailing_space() -> None:
    screen = ScreenModel()
    screen.feed(b"first line\r\nsecond\r\ncontinue? ")
    assert screen.prompt_line() == "continue? "


def test_a_prompt_ending_in_a_newline_is_the_row_above() -> None:
    screen = ScreenModel()
    screen.feed(b"Name?\r\n")
    assert screen.prompt_line() == "Name?"


def test_the_prompt_never_comes_from_before_the_command() -> None:
    screen = ScreenModel()
    screen.feed(b"$ cat\r\n")
    screen.mark_command_start()
    assert screen.prompt_line() == ""
    screen.feed(b"Name? ")
    assert screen.prompt_line() == "Name? "


def test_cursor_movement_is_applied() -> None:
    # node's readline draws its prompt by column moves and erasures.
    screen = ScreenModel()
    screen.feed(b"\x1b[1G\x1b[0Jname? \x1b[7G")
    assert screen.prompt_line() == "name? "
    screen.feed(b"\rabc\x1b[K")
    assert screen.prompt_line() == "abc"


def test_vim_private_sgr_does_not_break_the_screen() -> None:
    # pyte raises on CSI ? 4 m (vim sends it); the text after it must still show.
    screen = ScreenModel()
    screen.feed(b"before\x1b[?4mafter \x1b[1;2;3Hmore")
    assert screen.prompt_line() == "beforeafter more"


def test_readline_prompt_markers_are_not_drawn() -> None:
    screen = ScreenModel()
    screen.feed(b"\x01\x1b[1m\x02bold\x01\x1b[0m\x02> ")
    assert screen.prompt_line() == "bold> "


def test_wide_characters() -> None:
    screen = ScreenModel()
    screen.feed("続けますか？ ".encode())
    assert screen.prompt_line() == "続けますか？ "


def test_memory_is_bounded_and_the_last_line_survives() -> None:
    screen = ScreenModel(window=1024)
    for _ in range(1000):
        screen.feed(b"x" * 4000 + b"\r\n")
    screen.feed(b"done? ")
    assert len(screen.recent()) <= 2 * 1024
    assert screen.prompt_line() == "done? "


def test_a_window_cut_mid_sequence_draws_no_garbage() -> None:
    screen = ScreenModel(cols=80, window=64)
    screen.feed(b"\x1b[38;5;196m" + b"y" * 100 + b"\x1b[0m" + b"\x1b[31mred? ")
    assert screen.prompt_line().endswith("red? ")
    assert "[" not in screen.prompt_line()


def test_the_prompt_is_cached_until_new_output() -> None:
    screen = ScreenModel()
    screen.feed(b"a? ")
    first = screen.prompt_line()
    assert screen.prompt_line() is first
    screen.feed(b"b")
    assert screen.prompt_line() == "a? b"


_SEQUENCES = st.sampled_from(
    [
        b"\x1b[?1049h", b"\x1b[?1049l", b"\x1b[?47h", b"\x1b[?1h", b"\x1b[?1l", b"\x1b[?2004h",
        b"\x1b[?1;1049l", b"\x1b[01;34m", b"\x1b[0m", b"\x1b[?4m", b"\x1b[2J", b"\x1b]0;t\x07",
        b"text", b"\r\n", b"?", b"\x1b", b"[", b"h",
    ]
)  # fmt: skip


@given(st.lists(_SEQUENCES, max_size=40), st.lists(st.integers(0, 400), max_size=6))
def test_modes_do_not_depend_on_how_output_is_cut(parts: list[bytes], cuts: list[int]) -> None:
    data = b"".join(parts)
    whole = ScreenModel()
    whole.feed(data)
    pieces = ScreenModel()
    edges = sorted({0, len(data), *(c for c in cuts if c < len(data))})
    for start, end in itertools.pairwise(edges):
        pieces.feed(data[start:end])
    assert pieces.alternate_screen == whole.alternate_screen
    assert pieces.application_cursor == whole.application_cursor
    assert pieces.bracketed_paste == whole.bracketed_paste


@given(st.binary(max_size=3000), st.integers(1, 200), st.integers(1, 60))
def test_any_bytes_give_a_prompt_line(data: bytes, cols: int, rows: int) -> None:
    screen = ScreenModel(cols, rows, window=512)
    screen.feed(data)
    assert isinstance(screen.prompt_line(), str)
