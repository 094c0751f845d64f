"""What a terminal shows: output text with its cursor movements and erasures applied.

Progress displays redraw: ``\\r`` and ``CSI K`` rewrite a line (cargo, npm, pip's
bars), cursor-up and erase rewrite several (docker pull, pip's multi-line views),
a scroll region keeps a bar on the last row (apt).  A model should read what the
screen ended up showing, not every frame: :func:`render` plays the text onto a
canvas the way a VT100-style terminal does and returns the canvas.

Why not pyte (the emulator :mod:`registry.screen` uses for the prompt row): it
costs 10-28 µs a character here (measured: 1 MB of compiler-like lines took 9.9 s
on ``pyte.Screen`` and 28 s on ``pyte.HistoryScreen``), and run output is up to
megabytes.  This canvas does the part of a terminal that decides *what text is
where* -- 1 MB of plain or coloured lines in 35-55 ms, a 0.8 MB progress bar of
15,000 frames in 0.25-0.3 s, on the same machine -- and the tests hold it to pyte's
answer over a corpus of real progress output and generated sequences.

The canvas differs from a screen on purpose where a model is better served:

* lines never wrap (a terminal's width is a display matter), and every line that
  scrolled off the top is kept;
* a tab stays a tab (it still moves the cursor to the next multiple of 8);
* colours, titles, hyperlinks and modes are dropped; controls that draw nothing
  (BEL, NUL ...) are dropped;
* a bare ``\\n`` also returns to column 0 (pipes have no ``onlcr``);
* the alternate screen (full-screen programs) is dropped when the program leaves
  it, as a terminal drops it; still open at the end, it follows the main text.

The output starts on the screen's last row (where a command's output usually
starts), so absolute positions (``CSI row;col H``) and the scroll region mean
what they meant on the user's screen of ``rows`` rows.
"""

from __future__ import annotations

import re

from wcwidth import wcwidth

__all__ = ["render"]

_TOKENS = re.compile(
    r"""
      (?P<lf>[\n\x0b\x0c])
    | (?P<cr>\r)
    | (?P<bs>\x08)
    | (?:\x1b\[|\x9b)(?P<params>[0-?]*)[ -/]*(?P<final>[@-~])
    | \x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?
    | \x1b[PX^_][^\x1b]*(?:\x1b\\)?
    | \x1b(?P<esc>[78DEMc])
    | \x1b[()*+\-./][ -~]
    | \x1b[ -/]*[0-~]
    | \x1b
    | [\x00-\x07\x0e-\x1a\x1c-\x1f\x7f]
    """,
    re.VERBOSE,
)
#: Anything beyond plain lines: without it, text is shown as it is.
_SPECIAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x9b]|\r(?!\n)")
_ALTERNATE = frozenset({"1049", "1047", "47"})
#: Colours and text attributes (SGR): most escapes in real output, and they draw
#: nothing, so they go in one C-level pass before the canvas sees the text.
_SGR = re.compile(r"(?:\x1b\[|\x9b)[0-9;:]*m")


def render(text: str, rows: int = 24) -> str:
    """``text`` as a terminal of ``rows`` rows shows it, scrollback included."""
    if "m" in text:
        text = _SGR.sub("", text)
    if not _SPECIAL.search(text):
        return text.replace("\r\n", "\n")
    canvas = _Canvas(rows)
    position = 0
    for match in _TOKENS.finditer(text):
        start = match.start()
        if start > position:
            canvas.put(text[position:start])
        position = match.end()
        kind = match.lastgroup
        if kind == "lf":
            canvas.line_feed()
        elif kind == "cr":
            canvas.col = 0
        elif kind == "bs":
            canvas.col = max(0, canvas.col - 1)
        elif kind == "final":
            canvas.csi(match.group("params"), match.group("final"))
        elif kind == "esc":
            canvas.escape(match.group("esc"))
    if position < len(text):
        canvas.put(text[position:])
    return canvas.text()


class _Canvas:
    """Lines of text, a cursor, a scroll region; the screen is the last ``rows`` lines."""

    def __init__(self, rows: int) -> None:
        self.rows = max(rows, 1)
        # Rows above the first line of output: the screen it starts at the bottom of.
        self.pad = self.rows - 1
        self.lines = [""] * self.rows
        self.row = self.rows - 1
        self.col = 0
        #: The scroll region, in screen rows (inclusive).
        self.top = 0
        self.bottom = self.rows - 1
        #: ESC 7 / CSI s; restoring with nothing saved goes home, as on xterm.
        self.saved = (0, 0)
        #: The main screen's state while the alternate screen is up.
        self.main: tuple[list[str], int, int, int] | None = None

    @property
    def screen_top(self) -> int:
        return len(self.lines) - self.rows

    # -- drawing ------------------------------------------------------------------

    def put(self, segment: str) -> None:
        line = self.lines[self.row]
        col = self.col
        if _plain(segment) and _plain(line):
            if col > len(line):
                line += " " * (col - len(line))
            self.lines[self.row] = line[:col] + segment + line[col + len(segment) :]
            self.col = col + len(segment)
            return
        cells = _cells(line)
        new = _cells(segment, col)
        if len(cells) < col:
            cells += [" "] * (col - len(cells))
        _break_at(cells, col)
        _break_at(cells, col + len(new))
        cells[col : col + len(new)] = new
        self.lines[self.row] = "".join(cells)
        self.col = col + len(new)

    def _edit(self, row: int, start: int, end: int | None, fill: str | None) -> None:
        """Columns ``start`` to ``end`` of a line become blank (``fill`` " ") or go
        (``fill`` None: the rest of the line shifts left); ``end`` None: to its end."""
        cells = _cells(self.lines[row])
        stop = len(cells) if end is None else min(end, len(cells))
        if start >= stop:
            return
        _break_at(cells, start)
        _break_at(cells, stop)
        if fill is None or stop == len(cells):
            del cells[start:stop]
        else:
            cells[start:stop] = [fill] * (stop - start)
        self.lines[row] = "".join(cells)

    # -- moving -------------------------------------------------------------------

    def _limits(self) -> tuple[int, int]:
        """How far up and down the cursor may move: the region, if it is inside it."""
        top = self.screen_top
        if top + self.top <= self.row <= top + self.bottom:
            return top + self.top, top + self.bottom
        return top, len(self.lines) - 1

    def move(self, rows: int) -> None:
        low, high = self._limits()
        self.row = min(max(self.row + rows, low), high)

    def goto(self, row: int | None, col: int | None) -> None:
        """Absolute screen position (0-based); None keeps that coordinate."""
        if row is not None:
            self.row = self.screen_top + min(max(row, 0), self.rows - 1)
        if col is not None:
            self.col = max(col, 0)

    def line_feed(self) -> None:
        self.index()
        self.col = 0

    def index(self) -> None:
        """Down one row; at the bottom of the scroll region, scroll it up."""
        bottom = self.screen_top + self.bottom
        if self.row == bottom:
            self.scroll_up(1)
        elif self.row < len(self.lines) - 1:
            self.row += 1

    def reverse_index(self) -> None:
        if self.row == self.screen_top + self.top:
            self.scroll_down(1)
        elif self.row > self.screen_top:
            self.row -= 1

    def scroll_up(self, count: int) -> None:
        """The region's lines move up ``count``; blank lines come in at its bottom.

        A region starting at the top of the screen sends its lines to the scrollback
        (the canvas grows), as a terminal does; the rows below it stay put.
        """
        for _ in range(count):
            bottom = self.screen_top + self.bottom
            if self.top == 0:
                self.lines.insert(bottom + 1, "")
                self.row += 1  # same screen row: the screen moved down one line
            else:
                del self.lines[self.screen_top + self.top]
                self.lines.insert(bottom, "")

    def scroll_down(self, count: int) -> None:
        for _ in range(count):
            top = self.screen_top
            del self.lines[top + self.bottom]
            self.lines.insert(top + self.top, "")

    # -- sequences ----------------------------------------------------------------

    def csi(self, params: str, final: str) -> None:
        if final == "m":  # colours: by far the most common, and nothing to draw
            return
        if params[:1] in ("?", ">", "<", "="):
            if final in "hl" and params[:1] == "?" and _ALTERNATE & set(params[1:].split(";")):
                self.alternate(final == "h")
            return
        args = [int(p) if p.isdigit() else 0 for p in params.replace(":", ";").split(";")]
        first = args[0] or 1
        if final == "A":
            self.move(-first)
        elif final in "Be":
            self.move(first)
        elif final in "Ca":
            self.col += first
        elif final == "D":
            self.col = max(0, self.col - first)
        elif final in "EF":
            self.move(first if final == "E" else -first)
            self.col = 0
        elif final in "G`":
            self.goto(None, first - 1)
        elif final in "Hf":
            second = args[1] if len(args) > 1 else 0
            self.goto(first - 1, (second or 1) - 1)
        elif final == "d":
            self.goto(first - 1, None)
        elif final == "J":
            self.erase_display(args[0])
        elif final == "K":
            how = args[0]
            self._edit(self.row, 0 if how else self.col, self.col + 1 if how == 1 else None, " ")
        elif final == "X":
            self._edit(self.row, self.col, self.col + first, " ")
        elif final == "P":
            self._edit(self.row, self.col, self.col + first, None)
        elif final == "@":
            cells = _cells(self.lines[self.row])
            if self.col < len(cells):
                _break_at(cells, self.col)
                cells[self.col : self.col] = [" "] * first
                self.lines[self.row] = "".join(cells)
        elif final in "LM":
            self.insert_lines(first if final == "L" else -first)
        elif final == "S":
            self.scroll_up(first)
        elif final == "T":
            self.scroll_down(first)
        elif final == "r":
            top = first - 1
            bottom = (args[1] if len(args) > 1 and args[1] else self.rows) - 1
            if 0 <= top < bottom < self.rows:
                self.top, self.bottom = top, bottom
                self.goto(0, 0)
        elif final == "s" and not params:
            self.escape("7")
        elif final == "u":
            self.escape("8")

    def escape(self, code: str) -> None:
        if code == "7":
            self.saved = (self.row - self.screen_top, self.col)
        elif code == "8":
            self.goto(*self.saved)
        elif code == "D":
            self.index()
        elif code == "E":
            self.line_feed()
        elif code == "M":
            self.reverse_index()
        else:  # c: full reset clears the screen
            self.top, self.bottom = 0, self.rows - 1
            self.erase_display(2)
            self.goto(0, 0)

    def erase_display(self, how: int) -> None:
        top = self.screen_top
        if how == 0:
            self._edit(self.row, self.col, None, " ")
            rows = range(self.row + 1, len(self.lines))
        elif how == 1:
            self._edit(self.row, 0, self.col + 1, " ")
            rows = range(top, self.row)
        else:
            rows = range(top, len(self.lines))
        for row in rows:
            self.lines[row] = ""
        if how == 3:  # and the scrollback (what `clear` sends after 2)
            del self.lines[:top]
            self.row -= top
            self.pad = max(0, self.pad - top)

    def insert_lines(self, count: int) -> None:
        """CSI L (``count`` > 0) and CSI M (< 0) within the region, at the cursor."""
        top = self.screen_top
        if not top + self.top <= self.row <= top + self.bottom:
            return
        bottom = top + self.bottom
        for _ in range(min(abs(count), bottom - self.row + 1)):
            if count > 0:
                del self.lines[bottom]
                self.lines.insert(self.row, "")
            else:
                del self.lines[self.row]
                self.lines.insert(bottom, "")
        self.col = 0

    def alternate(self, on: bool) -> None:
        if on and self.main is None:
            self.main = (self.lines, self.row, self.col, self.pad)
            self.lines = [""] * self.rows
            self.pad = self.rows
            self.goto(0, 0)
        elif not on and self.main is not None:
            self.lines, self.row, self.col, self.pad = self.main
            self.main = None

    # -- the result ---------------------------------------------------------------

    def text(self) -> str:
        shown = _shown(self.lines, self.pad, self.row)
        if self.main is not None:  # still full screen: the main text, then that screen
            lines, row, _col, pad = self.main
            main = _shown(lines, pad, row)
            shown = f"{main}\n{shown}" if main and shown else main or shown
        return shown


def _shown(lines: list[str], pad: int, cursor: int) -> str:
    """The lines from the first written one to the cursor's or the last written one."""
    start = 0
    while start < min(pad, cursor) and not lines[start]:
        start += 1
    end = len(lines)
    while end - 1 > cursor and not lines[end - 1]:
        end -= 1
    return "\n".join(lines[start:end])


def _plain(text: str) -> bool:
    """One character a column (``isascii`` is O(1) in CPython)."""
    return text.isascii() and "\t" not in text


def _cells(text: str, col: int = 0) -> list[str]:
    """One string per column: a wide character is followed by an empty cell, a tab by
    empty cells up to its stop, and a combining mark joins the character before it."""
    if _plain(text):
        return list(text)
    cells: list[str] = []
    for char in text:
        if char == "\t":
            cells.append("\t")
            cells.extend([""] * (7 - (col + len(cells) - 1) % 8))
            continue
        width = wcwidth(char)
        if width <= 0 and cells:
            cells[-1] += char
        elif width == 2:
            cells += [char, ""]
        else:
            cells.append(char)
    return cells


def _break_at(cells: list[str], index: int) -> None:
    """A write or erase starts or stops at ``index``: a wide character or tab it cuts
    through becomes blanks, as on a terminal."""
    if not 0 < index < len(cells) or cells[index] != "":
        return
    start = index - 1
    while start > 0 and cells[start] == "":
        start -= 1
    end = index
    while end < len(cells) and cells[end] == "":
        end += 1
    cells[start:end] = [" "] * (end - start)
