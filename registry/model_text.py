"""Text for models: what a run (or any output) showed, cut to a model's budget, and
exactly what the cut left out.

The pipeline, over the output a buffer kept (:class:`~registry.output.KeptOutput`):

1. :func:`~registry.render.render`: what the terminal ended up showing (overwrites,
   erasures and cursor movement applied, escape sequences gone);
2. :func:`fold_repeats`: a run of identical lines becomes one line and a count;
3. :func:`clamp_lines`: a line longer than ``line_characters`` keeps its head and
   tail with the count between (one minified bundle or base64 blob must not eat the
   budget of everything else);
4. :func:`cut`: 20 % head and 80 % tail of whole lines, each end within its share
   of both the line and the character limit, with a marker saying how much went.

Output many times the character budget is cleaned only in generous windows at both
ends (what can survive the cut), and output the buffer already dropped the middle
of is counted in: the omitted count is of everything the model does not see.

Everything here is pure: :class:`ModelText` says what was cut, so nobody has to
search the text for markers.  A run's own ending (timed out, cancelled) is said in
the text by :func:`run_text`, never only in a field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .config import Settings
from .output import KeptOutput, strip_escape_sequences
from .render import render
from .run import RunState, TerminalRun

__all__ = [
    "ModelText",
    "TextLimits",
    "clamp_lines",
    "cut",
    "fold_repeats",
    "full_text",
    "last_line",
    "model_text",
    "run_text",
]


@dataclass(frozen=True)
class TextLimits:
    """A model's budget for one output, and how the output is cleaned."""

    lines: int | None = 500
    characters: int | None = 50_000
    #: A longer line keeps its head and tail (half each) with the count between.
    line_characters: int | None = 5_000
    #: Apply overwrites as a terminal shows them (else only escapes go).
    render: bool = True
    #: The screen's height: absolute cursor positions and scroll regions need it.
    rows: int = 24

    @classmethod
    def of(cls, settings: Settings, rows: int | None = None) -> TextLimits:
        """The limits ``settings`` give, on a screen of ``rows`` (default: theirs)."""
        return cls(
            settings.output_line_limit,
            settings.output_character_limit,
            settings.output_line_character_limit,
            settings.compress_progress_bar,
            rows or settings.rows,
        )


@dataclass(frozen=True)
class ModelText:
    text: str
    #: Characters of output the text does not show: cut between head and tail,
    #: including what the raw buffer had dropped already.
    omitted_characters: int = 0
    #: Lines cut between head and tail (when the cut was by lines).
    omitted_lines: int = 0
    #: Lines shortened to their head and tail.
    clamped_lines: int = 0

    @property
    def truncated(self) -> bool:
        return bool(self.omitted_characters or self.omitted_lines or self.clamped_lines)


#: Output this many times the character budget is cleaned only where it can be kept.
_HUGE_FACTOR = 8


def model_text(output: KeptOutput | str, limits: TextLimits | None = None) -> ModelText:
    """``output`` as a model should read it, within ``limits`` (default: the defaults)."""
    limits = limits or TextLimits()
    kept = KeptOutput(output) if isinstance(output, str) else output
    budget = limits.characters
    if not kept.dropped_bytes and not (budget and len(kept.head) > _HUGE_FACTOR * budget):
        text, clamped = clamp_lines(fold_repeats(_clean(kept.head, limits)), limits.line_characters)
        return _with_clamped(cut(text, limits.lines, budget), clamped)
    return _windows(kept, limits)


def _windows(kept: KeptOutput, limits: TextLimits) -> ModelText:
    """Head and tail of output too large to clean whole (or with its middle dropped).

    Only windows at both ends go through the pipeline -- cut at line ends, so
    overwrites and repeats within a line are handled as in the whole -- each several
    times the part of the budget it can fill.
    """
    budget = limits.characters
    head_src = kept.head
    tail_src = kept.tail if kept.dropped_bytes else kept.head
    if budget:
        head_src = head_src[: 4 * budget]
        head_src = head_src[: head_src.rfind("\n") + 1] or head_src
        tail_src = tail_src[-8 * budget :]
        tail_src = tail_src[tail_src.find("\n") + 1 :] or tail_src
    head, head_clamped = clamp_lines(fold_repeats(_clean(head_src, limits)), limits.line_characters)
    tail, tail_clamped = clamp_lines(fold_repeats(_clean(tail_src, limits)), limits.line_characters)
    if budget:
        head_chars, tail_chars = _shares(budget)
        head_lines, tail_lines = _shares(limits.lines or budget)
        head = head[: _head_end(head, head_lines, head_chars)]
        tail = tail[_tail_start(tail, tail_lines, tail_chars) :] if tail_chars else ""
    total = len(kept.head) + len(kept.tail) + kept.dropped_characters
    omitted = max(0, total - len(head) - len(tail))
    return ModelText(
        f"{head}\n[...{omitted} characters omitted...]\n{tail}",
        omitted,
        clamped_lines=head_clamped + tail_clamped,
    )


def _clean(text: str, limits: TextLimits) -> str:
    if limits.render:
        return render(text, limits.rows)
    return strip_escape_sequences(text).replace("\r\n", "\n")


def _with_clamped(text: ModelText, clamped: int) -> ModelText:
    return ModelText(text.text, text.omitted_characters, text.omitted_lines, clamped)


def fold_repeats(text: str) -> str:
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


def clamp_lines(text: str, limit: int | None) -> tuple[str, int]:
    """Each line over ``limit`` characters keeps its head and tail (half each) and
    says how many characters went between; returns the text and how many lines."""
    if not limit or len(text) <= limit:
        return text, 0
    long_line = re.compile(f"[^\\n]{{{limit + 1},}}")
    head = limit // 2
    tail = limit - head
    count = 0

    def clamp(match: re.Match[str]) -> str:
        nonlocal count
        count += 1
        line = match.group()
        end = line[-tail:] if tail else ""
        return f"{line[:head]} [...{len(line) - limit} characters omitted...] {end}"

    return long_line.sub(clamp, text), count


def cut(text: str, line_limit: int | None = 500, char_limit: int | None = 50_000) -> ModelText:
    """Keep a 20 % head and an 80 % tail of whole lines, within both limits.

    Each end gets its share of the line limit and of the character limit, so long
    output shows no more lines than short output does (cutting by characters alone
    gave a model ~9,000 short lines where the line limit says 500).  Only a line
    longer than an end's whole character share is cut inside.  The marker counts
    characters when the character limit was passed, else lines.
    """
    total = text.count("\n") + 1
    over_chars = bool(char_limit) and len(text) > (char_limit or 0)
    if not over_chars and (not line_limit or total <= line_limit):
        return ModelText(text)
    head_lines, tail_lines = _shares(line_limit or total)
    head_chars, tail_chars = _shares(char_limit or len(text))
    head_end = _head_end(text, head_lines, head_chars)
    tail_start = max(_tail_start(text, tail_lines, tail_chars), head_end)
    head, tail = text[:head_end], text[tail_start:]
    if over_chars:
        omitted = tail_start - head_end
        return ModelText(f"{head}\n[...{omitted} characters omitted...]\n{tail}", omitted)
    lines = text.count("\n", head_end, tail_start)
    return ModelText(
        f"{head}\n[...{lines} lines omitted...]\n\n{tail}", tail_start - head_end, lines
    )


def _shares(limit: int) -> tuple[int, int]:
    head = int(limit * 0.2)
    return head, limit - head


def _head_end(text: str, lines: int, chars: int) -> int:
    """Where a head of at most ``lines`` whole lines and ``chars`` characters ends."""
    end = 0
    for _ in range(lines):
        newline = text.find("\n", end, chars)  # ends before the budget does
        if newline < 0:
            break
        end = newline + 1
    if end == 0 and lines and chars < len(text):
        return chars  # not even the first line fits: its beginning, cut inside
    return end


def _tail_start(text: str, lines: int, chars: int) -> int:
    """Where a tail of at most ``lines`` whole lines and ``chars`` characters starts."""
    start = newline = len(text)
    floor = max(len(text) - chars - 1, 0)
    for _ in range(lines):
        newline = text.rfind("\n", floor, newline)
        if newline < 0:
            break
        start = newline + 1
    if lines and not text[start:].strip("\n") and chars < len(text):
        return len(text) - chars  # not even the last line fits: its end, cut inside
    return start


def last_line(text: str, limits: TextLimits) -> str:
    """The last non-blank line the terminal shows (what a progress report quotes)."""
    for line in reversed(_clean(text, limits).splitlines()):
        if line.strip():
            return line
    return ""


def run_text(run: TerminalRun, limits: TextLimits) -> ModelText:
    """A run's output for a model; a run ended on purpose says so at its end."""
    text = model_text(run.kept_output(), limits)
    ending = _ENDINGS.get(run.state)
    if ending is None:
        return text
    said = f"[{ending} after {run.duration:.1f} s: the command was interrupted]"
    body = text.text
    body = f"{body}\n{said}" if body and not body.endswith("\n") else f"{body}{said}"
    return ModelText(body, text.omitted_characters, text.omitted_lines, text.clamped_lines)


_ENDINGS = {RunState.TIMED_OUT: "timed out", RunState.CANCELLED: "cancelled"}


def full_text(output: KeptOutput, limits: TextLimits) -> str:
    """Everything kept, cleaned but not cut: for the file an agent can search."""
    head = _clean(output.head, limits)
    if not output.dropped_bytes:
        return head
    gap = f"[...{output.dropped_characters} characters omitted: not kept...]"
    return f"{head.rstrip(chr(10))}\n{gap}\n{_clean(output.tail, limits)}"
