"""A terminal's screen, as far as telling what a program waits for needs it.

Two things, at two costs:

* **Modes**, tracked on every byte of output because they are state: the alternate
  screen (``CSI ? 1049/1047/47 h|l``), application cursor keys (``CSI ? 1 h|l``,
  which decides what an arrow key sends), keypad mode (``ESC =`` / ``ESC >``),
  bracketed paste (``CSI ? 2004 h|l``) and a full reset (``ESC c``).  A chunk with
  no ESC costs one ``memchr``; one with escapes one or two C-level regex passes
  (about 1 ms a MB of coloured ``ls`` output).
* **The cursor row** (the prompt a program waits at), made only when asked, from
  the last few lines of output: pyte (a maintained VT100 emulator) draws them on a
  fresh screen.  pyte costs about 4 µs a byte here, far too slow for the read path
  (it would cap a terminal at ~0.25 MB/s), so it sees at most ``window`` bytes
  (the last two lines when they fit), once per question, cached until new output.

pyte is guarded: it raises on sequences it does not expect (vim sends
``CSI ? 4 m``; ``CSI 1;2;3 H`` has one parameter too many) and draws C0 controls
such as readline's ``\\x01``/``\\x02`` prompt markers as characters.  Such
sequences are ignored here, as a real terminal ignores them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any

import pyte

__all__ = ["ScreenModel"]

log = logging.getLogger(__name__)

# Private modes (ESC [ ? Pm h|l) are found from their "?": a rare byte, so the
# regex engine's literal scan skips through escape-dense output (coloured ls: ~1
# ms/MB, against 6-13 for a pattern starting at ESC, which is everywhere there).
_PRIVATE = re.compile(rb"\?([0-9;:]*)([hl])")
# ESC = / ESC > (keypad) and ESC c (full reset) start at ESC, so they are looked for
# only in short chunks (interactive output) and in chunks that switch a private
# mode: terminfo's smkx/rmkx for xterm send them together with CSI ? 1 h/l.
_SINGLE = re.compile(rb"\x1b([=>c])")
_SHORT_CHUNK = 512
# What a chunk may end with that the next chunk completes: ESC, or ESC [ params.
_INCOMPLETE = re.compile(rb"\x1b(?:\[[0-9;:?]*)?\Z")
_ALTERNATE_MODES = frozenset({b"1049", b"1047", b"47"})
# C0 controls pyte does not handle and would draw as glyphs (it handles BEL, BS,
# HT, LF, VT, FF, CR, SO, SI, CAN, SUB, ESC).
_UNDRAWN = bytes([*range(0x01, 0x07), *range(0x10, 0x18), 0x19, *range(0x1C, 0x20)])


class ScreenModel:
    """One terminal's modes and recent output. Feed it every chunk of output."""

    def __init__(self, cols: int = 80, rows: int = 24, window: int = 2048) -> None:
        self._cols = max(cols, 1)
        self._rows = max(rows, 1)
        self._window = max(window, 64)
        self._recent = bytearray()
        self._total = 0
        self._mark: int | None = None
        self._carry = b""
        self._prompt: str | None = None
        self.alternate_screen = False
        self.application_cursor = False
        self.application_keypad = False
        self.bracketed_paste = False

    def feed(self, data: bytes) -> None:
        """Note output: update the modes, keep the tail for the cursor row."""
        if not data:
            return
        self._prompt = None
        self._total += len(data)
        if len(data) >= self._window:
            self._recent = bytearray(data[-self._window :])
        else:
            self._recent += data
            if len(self._recent) > 2 * self._window:
                del self._recent[: -self._window]
        if self._carry:
            data = self._carry + data
            self._carry = b""
        if b"\x1b" not in data:
            return
        found = [
            (match.start(), match.group(1), match.group(2))
            for match in _PRIVATE.finditer(data)
            if data[match.start() - 2 : match.start()] == b"\x1b["
        ]
        if found or len(data) < _SHORT_CHUNK:
            found += [(match.start(), None, match.group(1)) for match in _SINGLE.finditer(data)]
            found.sort()
        for _position, params, action in found:
            self._apply(params, action)
        tail_start = data.rfind(b"\x1b", max(0, len(data) - 32))
        if tail_start >= 0 and _INCOMPLETE.match(data, tail_start):
            self._carry = data[tail_start:]

    def _apply(self, params: bytes | None, action: bytes) -> None:
        if params is None:
            if action == b"=":
                self.application_keypad = True
            elif action == b">":
                self.application_keypad = False
            else:  # ESC c: full reset
                self.alternate_screen = self.application_cursor = False
                self.application_keypad = self.bracketed_paste = False
            return
        on = action == b"h"
        for param in params.replace(b":", b";").split(b";"):
            if param in _ALTERNATE_MODES:
                self.alternate_screen = on
            elif param == b"1":
                self.application_cursor = on
            elif param == b"66":
                self.application_keypad = on
            elif param == b"2004":
                self.bracketed_paste = on

    @property
    def size(self) -> tuple[int, int]:
        """(cols, rows)."""
        return (self._cols, self._rows)

    def resize(self, cols: int, rows: int) -> None:
        self._cols, self._rows = max(cols, 1), max(rows, 1)
        self._prompt = None

    def mark_command_start(self) -> None:
        """A command's output starts here: the prompt line never comes from before.

        Without it, a program that prints nothing before reading (``cat``) would be
        reported with the echoed command line as its prompt.
        """
        self._mark = self._total
        self._prompt = None

    def recent(self) -> bytes:
        """The most recent output this model keeps (at most ``2 x window`` bytes)."""
        return bytes(self._recent)

    def prompt_line(self) -> str:
        """The text of the cursor's row, or of the nearest non-blank row above it.

        A prompt that ends with a newline (``print("Name?"); input()``) leaves the
        cursor on a blank row: the question is the row above.
        """
        if self._prompt is None:
            self._prompt = self._render()
        return self._prompt

    def _render(self) -> str:
        data = bytes(self._recent[-self._window :])
        cut = len(self._recent) > len(data)
        start = self._total - len(data)
        if self._mark is not None and self._mark >= start:
            data = data[self._mark - start :]
            cut = False
        # Start at the beginning of the second-to-last line when there is one: the
        # prompt is on the last line, or the one above when that is blank.
        last = data.rfind(b"\n")
        before = data.rfind(b"\n", 0, last) if last > 0 else -1
        if before >= 0:
            data = data[before + 1 :]
        elif cut:
            # Cut mid-stream with no line break: start at an escape so a sequence is
            # not read from its middle.
            start = data.find(b"\x1b")
            data = data[start:] if start >= 0 else data
        screen = _TolerantScreen(self._cols, self._rows)
        stream = pyte.ByteStream(screen)
        try:
            stream.feed(data.translate(None, _UNDRAWN))
        except Exception:  # pyte's parser on input it was never meant for
            log.debug("pyte could not draw the recent output", exc_info=True)
        row = min(max(screen.cursor.y, 0), self._rows - 1)
        # On the cursor's row, keep the spaces up to the cursor: "continue? " is what
        # the program printed, and the caller may show it.
        text = _row_text(screen, row, screen.cursor.x)
        if text.strip():
            return text
        for index in range(row - 1, -1, -1):
            text = _row_text(screen, index, 0)
            if text:
                return text
        return ""


def _row_text(screen: pyte.Screen, row: int, keep: int) -> str:
    """A row's text, trailing blanks cut except those left of column ``keep``.

    Read cell by cell: the second cell of a wide character holds "", so columns and
    string positions differ once a line has CJK text or emoji.
    """
    line = screen.buffer[row]
    cells = [line[column].data for column in range(screen.columns)]
    end = len(cells)
    while end > keep and not cells[end - 1].strip():
        end -= 1
    return "".join(cells[:end])


#: CSI handlers that understand ``private=True``; any other private sequence
#: (``CSI ? 4 m``, ``CSI ? 1049 r`` ...) is a query or an extension pyte lacks.
_PRIVATE_AWARE = frozenset(
    {"set_mode", "reset_mode", "erase_in_display", "erase_in_line", "report_device_attributes"}
)


class _TolerantScreen(pyte.Screen):
    """pyte's Screen, where a sequence it cannot take is ignored rather than raised."""


def _tolerant(name: str) -> Callable[..., None]:
    method: Callable[..., None] = getattr(pyte.Screen, name)

    def call(self: pyte.Screen, *args: Any, **kwargs: Any) -> None:
        if kwargs.get("private") and name not in _PRIVATE_AWARE:
            return
        try:
            method(self, *args, **kwargs)
        except (TypeError, ValueError, IndexError, KeyError):
            # Too many parameters (CSI 1;2;3 H), a value out of range: a terminal
            # ignores the sequence, and so do we.
            return

    call.__name__ = name
    return call


for _name in set(pyte.Stream.csi.values()):
    setattr(_TolerantScreen, _name, _tolerant(_name))
