"""Incremental parser for shell-integration escape sequences.

Owns the split of a terminal's byte stream into plain output and :class:`Marker`
events: OSC 633 (VS Code), OSC 133 (FinalTerm family), OSC 7 and OSC 1337
``CurrentDir=``.  Everything else -- other OSC, CSI, text, invalid UTF-8 -- passes
through byte for byte, in order.

Why it is shaped like this:

* It sits on the PTY read path, so plain output is never walked byte by byte in
  Python: the next ``ESC ]`` is found with ``bytes.find`` and the run of output
  before it is handed over as one slice.
* Reads split sequences anywhere, so an incomplete sequence at the end of a chunk is
  held back and completed by the next ``feed()``.  The payload search resumes where it
  stopped, so feeding a long sequence one byte at a time stays linear.
* Terminators follow what terminal emulators do (xterm.js): BEL or ST (``ESC \\``)
  end a sequence, any other ESC ends it too (and starts the next one), CAN or SUB
  abort it.  A sequence that has not ended after :data:`MAX_SEQUENCE_BYTES` is given
  up on and released as output, so nothing is held forever.
* The parser never raises: whatever the input, bytes come out as output or markers.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote_to_bytes

__all__ = ["MAX_SEQUENCE_BYTES", "Marker", "MarkerParser", "escape_value", "unescape_value"]

#: An OSC we care about that has not terminated within this many bytes is released
#: as output instead of being held back any longer.
MAX_SEQUENCE_BYTES = 64 * 1024

_ESC = 0x1B
_OSC_START = b"\x1b]"
_FAMILIES = (b"633", b"133", b"7", b"1337")
_LONGEST_FAMILY = max(len(f) for f in _FAMILIES)
# Bytes that end (BEL, ESC) or abort (CAN, SUB) an OSC payload.
_PAYLOAD_STOP = re.compile(rb"[\x07\x1b\x18\x1a]")
_ESCAPE_IN_VALUE = re.compile(rb"\\(\\|x[0-9a-fA-F]{2})")
_NEEDS_ESCAPE = re.compile(r"[\\;\x00-\x1f\x7f]")


@dataclass(frozen=True)
class Marker:
    """One shell-integration sequence.

    ``args`` are the parameters after the code, unescaped.  When the parser was
    given a nonce and the sequence's last field equals it, ``verified`` is true and
    that field is not part of ``args``: it authenticates the marker, it is not one
    of its parameters.
    """

    family: str
    code: str
    args: tuple[str, ...] = ()
    verified: bool = False

    @property
    def exit_code(self) -> int | None:
        """The exit code of a ``D`` marker; None when absent or not a number."""
        if self.code != "D" or not self.args:
            return None
        field = self.args[0].strip()
        if not field or not (field.isascii() and field.lstrip("-").isdigit()):
            return None
        return int(field)

    @property
    def command_line(self) -> str | None:
        """The command line of an ``E`` marker."""
        if self.code != "E" or not self.args:
            return None
        return self.args[0]

    @property
    def cwd(self) -> str | None:
        """The working directory a ``P`` marker reports, in any of the families."""
        if self.code != "P":
            return None
        if self.family == "7":
            return _cwd_from_url(self.args[0]) if self.args else None
        prefix = "CurrentDir=" if self.family == "1337" else "Cwd="
        for field in self.args:
            if field.startswith(prefix):
                return field[len(prefix) :] or None
        return None


def unescape_value(raw: bytes) -> str:
    r"""Decode one field as VS Code escapes it: ``\\`` is a backslash, ``\xHH`` a byte.

    Escapes are resolved to bytes first and the result decoded as UTF-8 afterwards,
    so ``\xc3\xa9`` is ``é``.  Bytes that are not UTF-8 survive as surrogate escapes
    (as ``os.fsdecode`` would give them), so a path round-trips to the file system.
    """
    if b"\\" in raw:
        raw = _ESCAPE_IN_VALUE.sub(_unescape_match, raw)
    return raw.decode("utf-8", "surrogateescape")


def _unescape_match(match: re.Match[bytes]) -> bytes:
    token = match.group(1)
    if token == b"\\":
        return b"\\"
    return bytes((int(token[1:], 16),))


def escape_value(value: str) -> str:
    r"""Escape a value for an OSC 633 field: backslash, ``;`` and control characters."""
    return _NEEDS_ESCAPE.sub(_escape_char, value)


def _escape_char(match: re.Match[str]) -> str:
    char = match.group(0)
    return "\\\\" if char == "\\" else f"\\x{ord(char):02x}"


def _cwd_from_url(url: str) -> str | None:
    """Path of an OSC 7 URL: ``file://host/p%20ath`` (decoded) or kitty's raw form."""
    for scheme, decode in (("file://", True), ("kitty-shell-cwd://", False)):
        if url.startswith(scheme):
            rest = url[len(scheme) :]
            slash = rest.find("/")
            if slash < 0:
                return None
            path = rest[slash:]
            if decode:
                raw = unquote_to_bytes(path.encode("utf-8", "surrogateescape"))
                path = raw.decode("utf-8", "surrogateescape")
            return path
    return url if url.startswith("/") else None


class MarkerParser:
    """Splits a byte stream into output bytes and markers, across any chunking.

    ``feed()`` returns events in stream order; ``flush()`` releases what is held
    back at the end of the stream.  Adjacent output may come out as several
    ``bytes`` items; their concatenation is what matters.
    """

    def __init__(self, nonce: str | None = None) -> None:
        self._nonce = nonce.encode("utf-8") if nonce else None
        # Bytes of an incomplete sequence, from its ESC on, held for the next feed.
        self._held = bytearray()
        # True once the held sequence's header (ESC ] family ;) is complete, so only
        # its terminator is still awaited and new data can be searched on its own.
        self._in_payload = False

    def feed(self, data: bytes) -> list[bytes | Marker]:
        events: list[bytes | Marker] = []
        if self._held:
            data = self._resume(data, events)
        if data:
            self._scan(data, events)
        return events

    def flush(self) -> list[bytes | Marker]:
        """End of stream: an unfinished sequence is output after all."""
        held = bytes(self._held)
        self._held.clear()
        self._in_payload = False
        return [held] if held else []

    # -- internals -----------------------------------------------------------------

    def _resume(self, data: bytes, events: list[bytes | Marker]) -> bytes:
        """Continue a held sequence with new data; return the bytes left to scan.

        While only the terminator is missing, new data is searched on its own and
        appended, so a long payload fed in small pieces costs linear time.  Once the
        terminator (or a header byte) arrives, held and new bytes are scanned together
        exactly as if they had come in one piece.
        """
        if self._in_payload and self._held[-1] != _ESC and _PAYLOAD_STOP.search(data) is None:
            self._held += data
            if len(self._held) > MAX_SEQUENCE_BYTES:
                held = bytes(self._held)
                self._held.clear()
                self._in_payload = False
                # Given up: as in one piece, the sequence is output from its "ESC ]".
                events.append(held[:2])
                self._scan(held[2:], events)
            return b""
        combined = bytes(self._held) + data
        self._held.clear()
        self._in_payload = False
        return combined

    def _scan(self, data: bytes, events: list[bytes | Marker]) -> None:
        """Scan ``data`` from its start, appending output runs and markers."""
        run_start = 0  # start of the output run not yet handed over
        pos = 0
        n = len(data)
        while True:
            esc = data.find(_OSC_START, pos)
            if esc < 0:
                # A lone ESC at the very end may become ``ESC ]`` with the next chunk.
                if n > run_start and data[-1] == _ESC:
                    self._emit(events, data, run_start, n - 1)
                    self._hold(data[n - 1 :], in_payload=False)
                else:
                    self._emit(events, data, run_start, n)
                return
            header_end = self._header_end(data, esc)
            if header_end is None:  # not one of our families: output
                pos = esc + 2
                continue
            if header_end < 0:  # header incomplete at end of chunk
                self._emit(events, data, run_start, esc)
                self._hold(data[esc:], in_payload=False)
                return
            stop = _PAYLOAD_STOP.search(data, header_end)
            if stop is None or (data[stop.start()] == _ESC and stop.start() + 1 >= n):
                if n - esc > MAX_SEQUENCE_BYTES:  # too long to be held any longer
                    pos = esc + 2
                    continue
                self._emit(events, data, run_start, esc)
                self._hold(data[esc:], in_payload=True)
                return
            if stop.start() - esc > MAX_SEQUENCE_BYTES:
                pos = esc + 2
                continue
            consumed, marker = self._complete(data, esc, stop.start())
            if marker is None:
                pos = esc + 2
                continue
            self._emit(events, data, run_start, esc)
            events.append(marker)
            pos = run_start = esc + consumed

    def _hold(self, chunk: bytes, *, in_payload: bool) -> None:
        self._held += chunk
        self._in_payload = in_payload

    @staticmethod
    def _emit(events: list[bytes | Marker], data: bytes, start: int, end: int) -> None:
        if end > start:
            events.append(data[start:end])

    @staticmethod
    def _header_end(data: bytes, esc: int) -> int | None:
        """Where the payload of ``ESC ] family ;`` starts.

        None when the sequence is not one of our families, -1 when the chunk ends
        before that can be decided.
        """
        start = esc + 2
        semi = data.find(b";", start, start + _LONGEST_FAMILY + 1)
        if semi < 0:
            window = data[start : start + _LONGEST_FAMILY + 1]
            if len(window) <= _LONGEST_FAMILY and any(f.startswith(window) for f in _FAMILIES):
                return -1 if start + len(window) == len(data) else None
            return None
        return semi + 1 if data[start:semi] in _FAMILIES else None

    def _complete(self, data: bytes, esc: int, stop_at: int) -> tuple[int, Marker | None]:
        """Parse the sequence at ``esc`` whose payload ends at ``stop_at``.

        Returns how many bytes from ``esc`` it spans and its marker, or ``(0, None)``
        when it is not a marker (aborted by CAN/SUB, or an OSC 1337 we do not use).
        """
        stop_byte = data[stop_at]
        if stop_byte in (0x18, 0x1A):
            return 0, None
        if stop_byte == _ESC:
            # ST is ESC \; any other ESC ends the sequence and begins the next one.
            end = stop_at + 2 if data[stop_at + 1 : stop_at + 2] == b"\\" else stop_at
        else:
            end = stop_at + 1
        semi = data.index(b";", esc + 2)
        family = data[esc + 2 : semi]
        marker = self._marker(family, data[semi + 1 : stop_at])
        return (end - esc, marker) if marker is not None else (0, None)

    def _marker(self, family: bytes, payload: bytes) -> Marker | None:
        if family == b"633":
            fields = payload.split(b";")
            verified = self._nonce is not None and len(fields) > 1 and fields[-1] == self._nonce
            if verified:
                fields.pop()
            code = fields[0].decode("ascii", "replace")
            return Marker("633", code, tuple(unescape_value(f) for f in fields[1:]), verified)
        if family == b"133":
            fields = payload.split(b";")
            code = fields[0].decode("ascii", "replace")
            return Marker("133", code, tuple(f.decode("utf-8", "replace") for f in fields[1:]))
        if family == b"7":
            return Marker("7", "P", (payload.decode("utf-8", "surrogateescape"),))
        if payload.startswith(b"CurrentDir="):  # 1337
            return Marker("1337", "P", (payload.decode("utf-8", "surrogateescape"),))
        return None
