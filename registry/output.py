"""Output: the bounded raw buffer, and turning terminal bytes into text.

Raw bytes are kept for mirroring and exactness; they are bounded by keeping a head
and a tail and counting what fell out between.  Text for people and models is made
from them by stripping escape sequences (this module) and, later in the pipeline,
collapsing overwrites and truncating.
"""

from __future__ import annotations

import codecs
import re

__all__ = ["BoundedBuffer", "IncrementalText", "strip_escape_sequences"]


class BoundedBuffer:
    """Bytes that keep their head and tail once they grow past ``cap``.

    Appending is amortised O(len(data)): the tail is trimmed only when it has grown
    to twice its share, so a 1 GB stream costs no more than linear time and
    ``cap * 2`` memory.
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
        if excess > max(self._tail_cap, 64 * 1024):
            del self._tail[:excess]
            self._trimmed += excess

    @property
    def total(self) -> int:
        """Every byte ever appended."""
        return self._total

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
