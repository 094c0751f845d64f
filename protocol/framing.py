"""Reading the LSP base protocol robustly: a byte stream into message bodies.

pygls frames outgoing messages (``JsonRPCProtocol._send_data``) and dispatches
incoming ones (``handle_message``); this module only replaces its *reading* loop,
because that loop (``pygls.io_.run_async``) goes deaf for good after one framing
error (a missing or wrong ``Content-Length``, a lower-case header, LF-only line
ends) and never answers malformed JSON.  :class:`MessageFramer` splits a byte
stream into message bodies and framing errors, and resynchronises at the next
``Content-Length`` header whatever came before it:

* header names are matched case-insensitively and LF-only line ends are accepted;
* bytes that are not a header (a stray line, the tail of a body whose declared
  length was too short) are skipped up to the next ``Content-Length:`` line and
  reported once;
* a body whose declared length was too long (or that never came) is cut where the
  next header begins, so the message after it is not swallowed;
* a body declared larger than :data:`MAX_BODY` is refused as soon as its header
  says so, and skipped as it arrives rather than held;
* the cost is linear in the bytes read, however they are chunked.

Pure parsing, no I/O: the server's connections and the CLI's blocking client feed it
whatever they read.  :func:`frame` is the other direction.
"""

from __future__ import annotations

import re
from typing import NamedTuple

__all__ = ["MAX_BODY", "FramingError", "MessageFramer", "frame"]

# A Content-Length line with its raw line end. Raw CR/LF never occur inside a JSON
# string, so this cannot match inside a well-formed body's text.
_HEADER_START = re.compile(rb"(?i)content-length[ \t]*:[ \t]*[^\r\n]*\r?\n")
_HEADER_NAME = b"content-length"
_HEADER_END = re.compile(rb"\r?\n\r?\n")
_MAX_HEADER = 8 * 1024
#: The longest Content-Length line we look for inside a body's span.
_MAX_HEADER_LINE = 256
#: A declared body larger than this is refused (and skipped) rather than awaited.
MAX_BODY = 64 * 1024 * 1024


class FramingError(NamedTuple):
    """Something in the stream that is not a well-framed message.

    (A NamedTuple rather than a dataclass: the CLI imports this module, and
    ``dataclasses`` alone would add a tenth to its start-up.)
    """

    message: str


class MessageFramer:
    """Splits an LSP byte stream into bodies (``bytes``) and :class:`FramingError`s.

    Linear in the bytes fed, however they are chunked: a body's search for a header
    inside its declared span resumes where the previous read's search stopped.
    """

    def __init__(self, max_body: int = MAX_BODY) -> None:
        self._max_body = max_body
        self._buffer = bytearray()
        self._body_length: int | None = None  # set while waiting for a body
        #: The body being waited for was refused (over the cap): skip it, emit nothing.
        self._discarding = False
        #: How far into the buffer the current body has been searched for a header.
        self._scanned = 0
        self._just_failed = False

    def feed(self, data: bytes) -> list[bytes | FramingError]:
        self._buffer += data
        out: list[bytes | FramingError] = []
        while True:
            if self._body_length is not None:
                if not self._take_body(out):
                    return out
                continue
            if not self._take_header(out):
                return out

    def _take_header(self, out: list[bytes | FramingError]) -> bool:
        buffer = self._buffer
        start = _HEADER_START.search(buffer)
        if start is None:
            # Keep a possible partial header at the end; report and drop the rest.
            keep = _partial_header_tail(buffer)
            self._skip(len(buffer) - keep, out)
            return False
        if start.start() > 0:
            self._skip(start.start(), out)
            return True
        end = _HEADER_END.search(buffer)
        if end is None:
            if len(buffer) > _MAX_HEADER:
                self._skip(start.end(), out)
                return True
            return False
        header = bytes(buffer[: end.start()])
        del buffer[: end.end()]
        length = _content_length(header)
        self._scanned = 0
        if isinstance(length, FramingError):
            self._fail(length, out)
            return True
        if length > self._max_body:
            # Refused from the header alone: the client hears it now, and the body,
            # as it arrives, is skipped rather than held.
            self._fail(
                FramingError(f"Content-Length {length} is larger than {self._max_body}"), out
            )
            self._discarding = True
        self._body_length = length
        return True

    def _take_body(self, out: list[bytes | FramingError]) -> bool:
        assert self._body_length is not None
        buffer = self._buffer
        length = self._body_length
        # A new header inside the declared span means the length was too long (or
        # the body never came): the body ends there.  Raw line ends never occur
        # inside JSON strings, so a well-formed body cannot contain one.  Only bytes
        # not searched yet are searched (less a header's worth, which may straddle).
        resume = max(0, self._scanned - _MAX_HEADER_LINE)
        overlap = _HEADER_START.search(buffer, resume, min(length, len(buffer)) + _MAX_HEADER_LINE)
        if overlap is not None and overlap.start() < length:
            length = overlap.start()
        elif len(buffer) < length:
            self._scanned = len(buffer)
            if self._discarding:
                # Nothing of a refused body is kept but what a header could straddle.
                drop = max(0, len(buffer) - _MAX_HEADER_LINE)
                del buffer[:drop]
                self._body_length = length - drop
                self._scanned = len(buffer)
            return False
        body = bytes(buffer[:length])
        del buffer[:length]
        self._body_length = None
        self._scanned = 0
        self._just_failed = False
        if self._discarding:
            self._discarding = False
        else:
            out.append(body)
        return True

    def _skip(self, count: int, out: list[bytes | FramingError]) -> None:
        if count <= 0:
            return
        skipped = bytes(self._buffer[:count])
        del self._buffer[:count]
        if skipped.strip() and not self._just_failed:
            self._fail(
                FramingError(
                    f"expected a Content-Length header; skipped {count} bytes: {skipped[:40]!r}"
                ),
                out,
            )

    def _fail(self, error: FramingError, out: list[bytes | FramingError]) -> None:
        self._just_failed = True
        out.append(error)


def _partial_header_tail(buffer: bytearray) -> int:
    """How many bytes at the end could be a ``Content-Length`` line still arriving."""
    tail = bytes(buffer[-64:]).lower()
    name_at = tail.rfind(_HEADER_NAME)
    if name_at >= 0 and b"\n" not in tail[name_at:]:
        return len(tail) - name_at
    for size in range(min(len(_HEADER_NAME) - 1, len(tail)), 0, -1):
        if _HEADER_NAME.startswith(tail[-size:]):
            return size
    return 0


def _content_length(header: bytes) -> int | FramingError:
    for line in header.splitlines():
        name, sep, value = line.partition(b":")
        if sep and name.strip().lower() == b"content-length":
            text = value.strip()
            if not text.isdigit():
                return FramingError(f"invalid Content-Length {text[:20]!r}")
            return int(text)
    return FramingError("missing Content-Length header")


def frame(body: bytes) -> bytes:
    """One message on the wire: its header, then its body."""
    return b"Content-Length: %d\r\n\r\n" % len(body) + body
