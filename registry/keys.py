"""Named keys to the bytes a terminal sends for them (for ``terminal/sendKeys``).

A list of keys is turned into one byte string.  Each item is one of:

* a key name, case-insensitive: ``Enter``, ``Escape``, ``Tab``, ``BTab``,
  ``Backspace``, ``Space``, ``Up``/``Down``/``Left``/``Right``, ``Home``, ``End``,
  ``Insert``, ``Delete``, ``PageUp``, ``PageDown``, ``F1``..``F12`` (and the tmux
  spellings ``BSpace``, ``PPage``, ``NPage``, ``IC``, ``DC``);
* a key with modifiers, tmux-style: ``C-c`` (control), ``M-x`` (meta: ESC first),
  ``S-Tab``, ``C-Left``, ``M-C-a``;
* anything else is literal text (``:q!``, ``y``, ``hello world``).

An item shaped like a key that is not one (``C-foo``, ``F13``, ``Entr``: a single
word within a typo of a key name) is an error naming it, rather than text typed
by surprise; text that *is* a key name is sent with ``terminal/write`` instead.

Arrows and Home/End follow the terminal's cursor-key mode: ``ESC O A`` in
application mode (vim, less, readline after ``smkx``), ``ESC [ A`` otherwise --
what xterm sends, and what terminfo's ``kcuu1`` promises in the mode in use.
Modified special keys use xterm's ``CSI 1;<m>`` form.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence

from .errors import TerminalRegistryError

__all__ = ["UnknownKeyError", "key_bytes", "key_names"]


class UnknownKeyError(TerminalRegistryError, ValueError):
    """A key name we cannot send; the message names it (and its place in the list)."""

    def __init__(self, key: str, index: int | None = None, hint: str = "") -> None:
        where = f"keys[{index}]: " if index is not None else ""
        super().__init__(f"{where}unknown key {key!r}{hint}")
        self.key = key
        self.index = index


_SIMPLE: dict[str, bytes] = {
    "enter": b"\r",
    "return": b"\r",
    "escape": b"\x1b",
    "esc": b"\x1b",
    "tab": b"\t",
    "btab": b"\x1b[Z",
    "space": b" ",
}
_ERASE_NAMES = frozenset({"backspace", "bspace", "bs"})

# name -> (final byte of CSI/SS3 form, or the number of a "CSI n ~" key)
_CURSOR = {"up": b"A", "down": b"B", "right": b"C", "left": b"D", "home": b"H", "end": b"F"}
_TILDE = {
    "insert": 2,
    "ic": 2,
    "delete": 3,
    "dc": 3,
    "pageup": 5,
    "pgup": 5,
    "ppage": 5,
    "pagedown": 6,
    "pgdn": 6,
    "npage": 6,
    **{
        f"f{n}": code
        for n, code in zip(range(5, 13), (15, 17, 18, 19, 20, 21, 23, 24), strict=True)
    },
}
_SS3_F = {"f1": b"P", "f2": b"Q", "f3": b"R", "f4": b"S"}

_CANONICAL = (
    "Enter", "Escape", "Tab", "BTab", "Backspace", "Space", "Up", "Down", "Left", "Right",
    "Home", "End", "Insert", "Delete", "PageUp", "PageDown",
    *(f"F{n}" for n in range(1, 13)),
)  # fmt: skip
_ALL_NAMES = frozenset(
    [*_SIMPLE, *_ERASE_NAMES, *_CURSOR, *_TILDE, *_SS3_F, *(n.lower() for n in _CANONICAL)]
)

_MODIFIED = re.compile(r"^((?:[CMS]-)+)(.+)$")
_WORD = re.compile(r"^[A-Za-z][A-Za-z0-9]+$")
_FKEY = re.compile(r"^[Ff][0-9]+$")
_CONTROL_PUNCTUATION = {
    "@": 0,
    " ": 0,
    "[": 0x1B,
    "\\": 0x1C,
    "]": 0x1D,
    "^": 0x1E,
    "_": 0x1F,
    "?": 0x7F,
}


def key_names() -> tuple[str, ...]:
    """The canonical key names (for documentation and error messages)."""
    return _CANONICAL


def key_bytes(
    keys: Sequence[str], *, application_cursor: bool = False, erase: bytes = b"\x7f"
) -> bytes:
    """The bytes for ``keys``, in order.

    ``application_cursor``: the terminal's DECCKM mode (see ScreenModel).
    ``erase``: what Backspace sends (the tty's VERASE; ``^?`` on Linux ptys).
    Raises :class:`UnknownKeyError` naming the first item that is not a key.
    """
    out = bytearray()
    for index, key in enumerate(keys):
        if not isinstance(key, str):
            raise UnknownKeyError(repr(key), index, ": keys are strings")
        if not key:
            raise UnknownKeyError(key, index, ": an empty key sends nothing")
        out += _one(key, index, application_cursor, erase)
    return bytes(out)


def _one(key: str, index: int, application_cursor: bool, erase: bytes) -> bytes:
    named = _named(key.lower(), 1, application_cursor, erase)
    if named is not None:
        return named
    modified = _MODIFIED.match(key) if len(key) > 2 else None
    if modified is not None:
        return _with_modifiers(
            key, modified.group(1), modified.group(2), index, application_cursor, erase
        )
    if _FKEY.match(key):
        raise UnknownKeyError(key, index, ": function keys go from F1 to F12")
    if _WORD.match(key):
        close = difflib.get_close_matches(key.lower(), _ALL_NAMES, n=1, cutoff=0.75)
        if close:
            suggestion = next((n for n in _CANONICAL if n.lower() == close[0]), close[0])
            raise UnknownKeyError(
                key,
                index,
                f" (did you mean {suggestion!r}? to type it as text, use terminal/write)",
            )
    return key.encode("utf-8")


def _named(name: str, modifier: int, application_cursor: bool, erase: bytes) -> bytes | None:
    """A named key with xterm's modifier parameter (1: none; 1 + shift/alt/ctrl bits)."""
    if modifier == 1:
        if name in _SIMPLE:
            return _SIMPLE[name]
        if name in _ERASE_NAMES:
            return erase
    if name in _CURSOR:
        final = _CURSOR[name]
        if modifier != 1:
            return b"\x1b[1;%d" % modifier + final
        return (b"\x1bO" if application_cursor else b"\x1b[") + final
    if name in _SS3_F:
        final = _SS3_F[name]
        return b"\x1bO" + final if modifier == 1 else b"\x1b[1;%d" % modifier + final
    if name in _TILDE:
        code = _TILDE[name]
        return b"\x1b[%d~" % code if modifier == 1 else b"\x1b[%d;%d~" % (code, modifier)
    return None


def _with_modifiers(
    key: str, prefix: str, base: str, index: int, application_cursor: bool, erase: bytes
) -> bytes:
    flags = set(prefix[:-1].split("-"))
    ctrl, meta, shift = "C" in flags, "M" in flags, "S" in flags
    modifier = 1 + (1 if shift else 0) + (2 if meta else 0) + (4 if ctrl else 0)
    lower = base.lower()
    if len(base) > 1 and lower not in _ALL_NAMES:
        raise UnknownKeyError(key, index, f": {base!r} is neither a key name nor one character")
    if lower in _CURSOR or lower in _SS3_F or lower in _TILDE:
        special = _named(lower, modifier, application_cursor, erase)
        assert special is not None
        return special
    if lower == "tab" and shift and not ctrl:
        return (b"\x1b" if meta else b"") + b"\x1b[Z"
    if len(base) == 1:
        data = base
        if shift:
            data = data.upper()
        if ctrl:
            code = _control(data)
            if code is None:
                raise UnknownKeyError(key, index, f": {base!r} has no control code")
            raw = bytes([code])
        else:
            raw = data.encode("utf-8")
    else:
        simple = _named(lower, 1, application_cursor, erase)
        assert simple is not None
        if ctrl or shift:
            raise UnknownKeyError(key, index, f": {base} cannot take C- or S- here")
        raw = simple
    return b"\x1b" + raw if meta else raw


def _control(char: str) -> int | None:
    if "a" <= char.lower() <= "z":
        return ord(char.lower()) - ord("a") + 1
    return _CONTROL_PUNCTUATION.get(char)
