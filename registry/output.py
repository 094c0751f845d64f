"""Output: the bounded raw buffer, and turning terminal bytes into text.

Raw bytes are kept for mirroring and exactness; they are bounded by keeping a head
and a tail and counting what fell out between.  Text for people and models is made
from them by stripping escape sequences (this module) and, later in the pipeline,
collapsing overwrites and truncating.
"""

from __future__ import annotations

import codecs
import re
import unicodedata

__all__ = [
    "BoundedBuffer",
    "IncrementalText",
    "apply_run_length_encoding",
    "compress_terminal_output",
    "process_backspaces",
    "process_carriage_returns",
    "strip_escape_sequences",
    "truncate_output",
]


class BoundedBuffer:
    """Bytes that keep their head and tail once they grow past ``cap``.

    Appending is amortised O(len(data)): the tail is trimmed only when it has grown
    a quarter past its share (at least 64 KiB), so a 1 GB stream costs linear time
    (each byte moved at most ~4 times) and about ``cap * 1.25`` memory -- with 50
    terminals flooding, twice the cap per buffer was 1.6 GB of server.
    """

    def __init__(self, cap: int, head_share: float = 0.2) -> None:
        self._cap = max(cap, 0)
        self._head_cap = int(self._cap * head_share)
        self._tail_cap = self._cap - self._head_cap
        self._head = bytearray()
        self._tail = bytearray()
        self._trimmed = 0
        self._total = 0

    def append(self, data: bytes) -> None:
        self._total += len(data)
        room = self._head_cap - len(self._head)
        if room > 0:
            self._head += data[:room]
            if len(data) <= room:
                return
            data = data[room:]
        self._tail += data
        excess = len(self._tail) - self._tail_cap
        if excess > max(self._tail_cap // 4, 64 * 1024):
            del self._tail[:excess]
            self._trimmed += excess

    @property
    def total(self) -> int:
        """Every byte ever appended."""
        return self._total

    @property
    def held(self) -> int:
        """Bytes held in memory now (at most about twice the cap)."""
        return len(self._head) + len(self._tail)

    @property
    def dropped(self) -> int:
        """Bytes no longer held (between head and tail)."""
        return self._trimmed + max(0, len(self._tail) - self._tail_cap)

    def getvalue(self) -> bytes:
        tail = self._tail[-self._tail_cap :] if self._tail_cap else b""
        if len(self._tail) > self._tail_cap or self._trimmed:
            tail = _skip_partial_char(bytes(tail))
        return bytes(self._head) + bytes(tail)

    def tail(self, max_bytes: int) -> bytes:
        """The most recent ``max_bytes`` held bytes, starting on a character."""
        data = self.getvalue()
        if len(data) <= max_bytes:
            return data
        return _skip_partial_char(data[-max_bytes:])

    def clear(self) -> None:
        self._head.clear()
        self._tail.clear()
        self._trimmed = 0
        self._total = 0


def _skip_partial_char(data: bytes) -> bytes:
    """Drop UTF-8 continuation bytes a cut left at the front (at most three)."""
    skip = 0
    while skip < min(3, len(data)) and 0x80 <= data[skip] <= 0xBF:
        skip += 1
    return data[skip:]


class IncrementalText:
    """UTF-8 decoding across reads: a character split between chunks stays whole."""

    def __init__(self) -> None:
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def decode(self, data: bytes, final: bool = False) -> str:
        return self._decoder.decode(data, final)

    def peek(self, data: bytes, final: bool = False) -> str:
        """What :meth:`decode` would give, leaving the decoder as it was."""
        state = self._decoder.getstate()
        try:
            return self._decoder.decode(data, final)
        finally:
            self._decoder.setstate(state)


# CSI (ESC [ ... final), OSC (ESC ] ... BEL/ST), DCS/SOS/PM/APC strings, two-byte
# escapes (charset designation ESC ( B, keypad ESC = / ESC >, ESC 7/8, ...), and the
# 8-bit CSI.
_ESCAPES = re.compile(
    r"""
      \x1b\[[0-?]*[ -/]*[@-~]
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?
    | \x1b[()*+\-./][ -~]
    | \x1b[ -/]*[0-~]
    | \x9b[0-?]*[ -/]*[@-~]
    | \x1b
    """,
    re.VERBOSE,
)


def strip_escape_sequences(text: str) -> str:
    """Remove every escape sequence; keep the text (and CR, BS, LF) as it was."""
    if "\x1b" not in text and "\x9b" not in text:
        return text
    return _ESCAPES.sub("", text)


# -- text for models -------------------------------------------------------------------
#
# The pipeline: strip escape sequences -> process_carriage_returns -> process_backspaces
# -> apply_run_length_encoding -> truncate_output.  Everything works on str code points;
# a cut never splits a character.


def process_carriage_returns(text: str) -> str:
    r"""Apply ``\r`` overwrites within each line, as a terminal would show them.

    Each ``\r``-separated segment overwrites the line from column 0; the rest of the
    longer earlier content stays (``"Initial text\rnext\r"`` -> ``"nextial text"``).
    Empty segments change nothing, so ``\r\n`` is a plain line end.  Where an
    overwrite would leave a combining mark or variation selector orphaned at the cut,
    that one code point becomes a space.
    """
    if "\r" not in text:
        return text
    return "\n".join(_overwrite_line(line) for line in text.split("\n"))


def _overwrite_line(line: str) -> str:
    if "\r" not in line:
        return line
    segments = line.split("\r")
    current = segments[0]
    for segment in segments[1:]:
        if not segment:
            continue
        if len(segment) >= len(current):
            current = segment
            continue
        rest = current[len(segment) :]
        if _is_mark(rest[0]):
            rest = " " + rest[1:]
        current = segment + rest
    return current


def _is_mark(char: str) -> bool:
    code = ord(char)
    return (
        unicodedata.combining(char) != 0
        or 0xFE00 <= code <= 0xFE0F
        or 0x1F3FB <= code <= 0x1F3FF
        or code == 0x200D
    )


def process_backspaces(text: str) -> str:
    r"""``\b`` deletes the character before it (``"abc\b\bxy"`` -> ``"axy"``).

    As on a terminal, a backspace never moves back past the start of its line.
    """
    if "\b" not in text:
        return text
    out: list[str] = []
    line_start = 0
    for piece in _BACKSPACES.split(text):
        if piece.startswith("\b"):
            keep = max(line_start, len(out) - len(piece))
            del out[keep:]
        else:
            out.extend(piece)
            newline = piece.rfind("\n")
            if newline >= 0:
                line_start = len(out) - (len(piece) - newline - 1)
    return "".join(out)


_BACKSPACES = re.compile(r"(\x08+)")


def apply_run_length_encoding(text: str) -> str:
    """A run of identical lines becomes the line plus a note, when that is shorter.

    ``"a\\na\\na\\n"`` stays as it is (the note would be longer); 50 identical
    progress lines become one line and ``<previous line repeated 49 additional
    times>``.
    """
    if not text:
        return text
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        end = index + 1
        while end < len(lines) and lines[end] == line:
            end += 1
        repeats = end - index - 1
        note = f"<previous line repeated {repeats} additional times>\n"
        if repeats and len(note) < len(line) * repeats:
            out.append(line if line.endswith("\n") else line + "\n")
            out.append(note)
        else:
            out.extend(lines[index:end])
        index = end
    return "".join(out)


def truncate_output(
    text: str, line_limit: int | None = 500, char_limit: int | None = 50_000
) -> str:
    """Keep 20 % head and 80 % tail, character limit first, then line limit.

    Over the character limit the text is cut by characters (and that is the result);
    otherwise, over the line limit, by whole lines.  The marker says how much went.
    """
    if char_limit and len(text) > char_limit:
        head = int(char_limit * 0.2)
        tail = char_limit - head
        omitted = len(text) - char_limit
        end = text[-tail:] if tail else ""
        return f"{text[:head]}\n[...{omitted} characters omitted...]\n{end}"
    if not line_limit:
        return text
    total = text.count("\n") + 1
    if total <= line_limit:
        return text
    head_lines = int(line_limit * 0.2)
    tail_lines = line_limit - head_lines
    head_end = 0
    for _ in range(head_lines):
        head_end = text.index("\n", head_end) + 1
    tail_start = newline = len(text)
    for _ in range(tail_lines):
        newline = text.rindex("\n", 0, newline)
        tail_start = newline + 1
    omitted = total - line_limit
    return f"{text[:head_end]}\n[...{omitted} lines omitted...]\n\n{text[tail_start:]}"


def compress_terminal_output(
    text: str,
    line_limit: int | None = 500,
    char_limit: int | None = 50_000,
    compress_progress_bar: bool = True,
) -> str:
    """Terminal text as a model should read it: the whole pipeline.

    With ``compress_progress_bar`` off, carriage returns and backspaces are left
    alone except that ``\\r\\n`` line ends become ``\\n``.
    """
    if char_limit and len(text) > _HUGE_FACTOR * char_limit:
        return _compress_huge(text, char_limit, compress_progress_bar)
    return truncate_output(_clean(text, compress_progress_bar), line_limit, char_limit)


#: Text this many times the character limit is cleaned only where it will be kept.
_HUGE_FACTOR = 8


def _clean(text: str, compress_progress_bar: bool) -> str:
    text = strip_escape_sequences(text)
    if compress_progress_bar:
        text = process_backspaces(process_carriage_returns(text))
    else:
        text = text.replace("\r\n", "\n")
    return apply_run_length_encoding(text)


def _compress_huge(text: str, char_limit: int, compress_progress_bar: bool) -> str:
    """The pipeline on the parts that survive truncation, not on megabytes.

    Only the head (20 %) and tail (80 %) of the character budget are kept, so only
    generous windows at both ends -- cut at line ends, so overwrites and repeats
    within a line are handled as in the whole text -- go through the pipeline.  The
    omitted count is then of the raw characters left out.
    """
    head_budget = int(char_limit * 0.2)
    tail_budget = char_limit - head_budget
    head_raw = text[: 4 * char_limit]
    head_raw = head_raw[: head_raw.rfind("\n") + 1] or head_raw
    tail_raw = text[-8 * char_limit :]
    tail_raw = tail_raw[tail_raw.find("\n") + 1 :] or tail_raw
    head = _clean(head_raw, compress_progress_bar)[:head_budget]
    tail = _clean(tail_raw, compress_progress_bar)
    tail = tail[-tail_budget:] if tail_budget else ""
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n[...{omitted} characters omitted...]\n{tail}"
