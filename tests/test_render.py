"""registry.render against a real terminal emulator (pyte) over real progress output.

The corpus in tests/fixtures/progress/ is what our engine recorded from real runs
in a 120x40 PTY: ``pip download`` of a 190 MB wheel (rich's bar, ``\\r CSI 2K``),
``cargo build`` with a slow build script (its ``Building [==> ] 2/4`` line cleared
with ``\\r CSI K``), ``apt-get install`` with Dpkg::Progress-Fancy (a scroll region
keeping ``Progress: [ 40%]`` on the last row; the mirror's host name replaced), and
two printf scripts beside their recordings: docker pull's per-layer redraw
(cursor up, erase the line, cursor down) and a cargo-like two-line live area.
"""

from __future__ import annotations

from pathlib import Path

import pyte
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from registry.render import render

CORPUS = Path(__file__).parent / "fixtures" / "progress"
ROWS = 40
COLUMNS = 400


class _Xterm(pyte.HistoryScreen):
    """pyte, where it differs from xterm and VTE in what apt relies on: restoring the
    cursor (ESC 8) neither forgets what was saved nor pulls the cursor into the
    scroll region (apt saves on the last row, sets a region above it, restores and
    moves up one row to write there)."""

    def restore_cursor(self) -> None:
        if not self.savepoints:
            super().restore_cursor()
            return
        saved = self.savepoints[-1].cursor
        self.cursor = pyte.screens.Cursor(saved.x, saved.y, saved.attrs)
        self.ensure_hbounds()
        self.ensure_vbounds(use_margins=False)


def pyte_shows(text: str, rows: int = ROWS) -> list[str]:
    """What pyte's screen and scrollback hold after ``text``, starting on the last row
    (LF also returns to column 0, as render() assumes)."""
    screen = _Xterm(COLUMNS, rows, history=100_000)
    screen.set_mode(pyte.modes.LNM)
    stream = pyte.Stream(screen)
    stream.feed("\n" * (rows - 1))
    stream.feed(text)
    lines = ["".join(line[x].data for x in range(COLUMNS)) for line in screen.history.top] + list(
        screen.display
    )
    return _trimmed(lines)


def render_shows(text: str, rows: int = ROWS) -> list[str]:
    return _trimmed(render(text, rows).expandtabs(8).split("\n"))


def _trimmed(lines: list[str]) -> list[str]:
    lines = [line.rstrip() for line in lines]
    while lines and not lines[0]:
        lines.pop(0)
    while lines and not lines[-1]:
        lines.pop()
    return lines


@pytest.mark.parametrize("name", sorted(p.name for p in CORPUS.glob("*.out")))
def test_real_progress_output_renders_as_a_terminal_shows_it(name: str) -> None:
    text = (CORPUS / name).read_bytes().decode("utf-8")
    shown = render_shows(text)
    assert shown == pyte_shows(text)
    # Every frame of the progress display is gone; what stays is what it ended on.
    assert len(shown) < text.count("\n") + text.count("\r") // 2 or name.startswith("apt")


def test_the_corpus_ends_as_each_tool_left_its_screen() -> None:
    def shown(name: str) -> str:
        return render((CORPUS / name).read_bytes().decode(), ROWS)

    assert "Building" not in shown("cargo-build.out")
    assert "   Compiling slowbuild v0.1.0 (/tmp/rec/crate)\n" in shown("cargo-build.out")
    assert shown("docker-pull-like.out").startswith(
        "a1b2c3: Pull complete\nd4e5f6: Pull complete\n0718ab: Pull complete\n"
    )
    assert shown("cargo-multiline-like.out") == (
        "   Compiling alpha v0.1.0\n   Compiling beta v0.2.0\n    Finished dev in 1.2s\n"
    )
    apt = shown("apt-install-fancy.out")
    assert "Progress:" not in apt
    assert "Setting up hello (2.10-3) ...\n" in apt
    assert "Reading package lists... Done\nBuilding dependency tree... Done\n" in apt
    pip = shown("pip-download.out")
    assert pip.count("191.8 MB") == 2  # the Downloading line and the bar's last frame


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # The case: CR then erase-in-line.
        ("3/3 working\r\x1b[Kdone\n", "done\n"),
        ("3/3 working\r\x1b[2Kdone\n", "done\n"),
        ("Initial text\rnext\r", "nextial text"),
        ("abc\r\ndef\r\n", "abc\ndef\n"),
        ("10%\r20%\r100%\n", "100%\n"),
        ("a\r\r\rb", "b"),
        ("progress [==  ]\rprogress [====]\ndone", "progress [====]\ndone"),
        # A combining mark belongs to its character: both are overwritten together.
        ("e\u0301tat\rX", "Xtat"),
        ("\r", ""),
        ("abc\b\bxy", "axy"),
        # A backspace moves the cursor; it erases nothing (a terminal shows "abc").
        ("abc\b", "abc"),
        ("\b\bstart", "start"),
        ("ab\n\b\bc", "ab\nc"),
        ("x\b\b\by", "y"),
        # Cursor up and erase: a two-line display redrawn in place.
        ("1/2 a\n1/2 b\n\x1b[2A\x1b[2K2/2 a\n\x1b[2K2/2 b\n", "2/2 a\n2/2 b\n"),
        # A wide character cut by an overwrite leaves a blank, as on a terminal.
        ("\u4f60\u597d\rab", "ab\u597d"),
        ("\u4f60\u597d\r a", " a\u597d"),
        ("a\tb\rX", "X\tb"),
        ("\x1b[31mred\x1b[0m \x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "red link"),
        # Full-screen programs leave nothing behind once they exit the alternate screen.
        ("before\n\x1b[?1049h\x1b[Hvim screen\x1b[?1049lafter\n", "before\nafter\n"),
        ("plain text, no escapes\n", "plain text, no escapes\n"),
    ],
)
def test_cases(text: str, expected: str) -> None:
    assert render(text) == expected
    if "\x1b[?1049" not in text and "\t" not in text:
        assert render_shows(text) == pyte_shows(text)


_PIECES = st.sampled_from(
    [
        "ab",
        "xyz ",
        "0123456789",
        "\u00e9t\u00e9",
        "\r",
        "\n",
        "\r\n",
        "\b",
        "\x1b[K",
        "\x1b[1K",
        "\x1b[2K",
        "\x1b[A",
        "\x1b[2A",
        "\x1b[B",
        "\x1b[3C",
        "\x1b[2D",
        "\x1b[5G",
        "\x1b[J",
        "\x1b[1J",
        "\x1b[2X",
        "\x1b[P",
        "\x1b[2@",
        "\x1b7",
        "\x1b8",
        "\x1bM",
        "\x1b[3;4H",
        "\x1b[32m",
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(_PIECES, max_size=40))
def test_generated_sequences_match_pyte(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert render_shows(text, rows=6) == pyte_shows(text, rows=6)
