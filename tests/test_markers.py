"""The marker parser: families, escaping, nonce, terminators, chunking, bounds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from registry.markers import (
    MAX_SEQUENCE_BYTES,
    Marker,
    MarkerParser,
    escape_value,
    unescape_value,
)

NONCE = "n0nce"


def parse(data: bytes, nonce: str | None = NONCE) -> list[bytes | Marker]:
    parser = MarkerParser(nonce)
    return normalise(parser.feed(data) + parser.flush())


def normalise(events: list[bytes | Marker]) -> list[bytes | Marker]:
    """Merge adjacent output items: chunking may split output, never markers."""
    merged: list[bytes | Marker] = []
    for event in events:
        if isinstance(event, bytes) and merged and isinstance(merged[-1], bytes):
            merged[-1] = merged[-1] + event
        else:
            merged.append(event)
    return merged


def parse_chunked(data: bytes, cuts: list[int], nonce: str | None = NONCE) -> list[bytes | Marker]:
    parser = MarkerParser(nonce)
    events: list[bytes | Marker] = []
    last = 0
    for cut in sorted(set(cuts)):
        events += parser.feed(data[last:cut])
        last = cut
    events += parser.feed(data[last:])
    events += parser.flush()
    return normalise(events)


def markers(events: list[bytes | Marker]) -> list[Marker]:
    return [e for e in events if isinstance(e, Marker)]


def output(events: list[bytes | Marker]) -> bytes:
    return b"".join(e for e in events if isinstance(e, bytes))


# -- the 633 family --------------------------------------------------------------


def test_633_basic_codes_with_bel_and_st() -> None:
    events = parse(
        b"\x1b]633;A;n0nce\x07$ \x1b]633;B;n0nce\x1b\\\x1b]633;C;n0nce\x07hi\r\n"
        b"\x1b]633;D;7;n0nce\x07"
    )
    assert [(m.code, m.verified) for m in markers(events)] == [
        ("A", True),
        ("B", True),
        ("C", True),
        ("D", True),
    ]
    assert output(events) == b"$ hi\r\n"
    assert markers(events)[-1].exit_code == 7


def test_633_command_line_unescaped() -> None:
    raw = b"\x1b]633;E;echo a\\x3b b \\\\ c\\x0ad\\xc3\\xa9;n0nce\x07"
    (marker,) = markers(parse(raw))
    assert marker.command_line == "echo a; b \\ c\nd\u00e9"
    assert marker.verified


def test_633_cwd_unescaped_whole_field_then_split() -> None:
    (marker,) = markers(parse(b"\x1b]633;P;Cwd=/tmp/a\\x3bb=c d\\xe2\\x82\\xac;n0nce\x07"))
    assert marker.cwd == "/tmp/a;b=c d\u20ac"
    assert marker.args == ("Cwd=/tmp/a;b=c d\u20ac",)


def test_nonce_mismatch_or_absent_is_unverified() -> None:
    forged = markers(parse(b"\x1b]633;D;0\x07\x1b]633;P;Cwd=/etc;other\x07"))
    assert [m.verified for m in forged] == [False, False]
    assert forged[0].exit_code == 0
    assert forged[1].args == ("Cwd=/etc", "other")
    (no_nonce,) = markers(parse(b"\x1b]633;D;0;n0nce\x07", nonce=None))
    assert not no_nonce.verified
    assert no_nonce.args == ("0", "n0nce")


def test_bare_d_has_no_exit_code() -> None:
    (marker,) = markers(parse(b"\x1b]633;D\x07"))
    assert marker.code == "D"
    assert marker.exit_code is None


def test_rest_of_633_family_are_markers_named_by_code() -> None:
    codes = [b"F", b"G", b"H", b"I", b"SetMark", b"EnvSingleStart", b"EnvJson"]
    data = b"".join(b"\x1b]633;" + c + b";n0nce\x07" for c in codes)
    events = parse(data)
    assert [m.code for m in markers(events)] == [c.decode() for c in codes]
    assert output(events) == b""


# -- other families -----------------------------------------------------------------


def test_133_with_options() -> None:
    events = parse(
        b"\x1b]133;A;aid=12;cl=m\x07\x1b]133;C;\x07x\x1b]133;D;2;aid=12\x1b\\\x1b]133;D;aid=42\x07"
    )
    found = markers(events)
    assert [m.code for m in found] == ["A", "C", "D", "D"]
    assert [m.family for m in found] == ["133"] * 4
    assert found[2].exit_code == 2
    assert found[3].exit_code is None
    assert not any(m.verified for m in found)
    assert output(events) == b"x"


def test_osc7_file_url_percent_decoded() -> None:
    (marker,) = markers(parse(b"\x1b]7;file://myhost/home/u/a%20b/%C3%A9%3B\x07"))
    assert (marker.family, marker.code) == ("7", "P")
    assert marker.cwd == "/home/u/a b/\u00e9;"


def test_osc7_kitty_url_raw() -> None:
    (marker,) = markers(parse(b"\x1b]7;kitty-shell-cwd://h/tmp/100%\x1b\\"))
    assert marker.cwd == "/tmp/100%"


def test_osc1337_current_dir_and_other_1337_passes_through() -> None:
    events = parse(b"\x1b]1337;CurrentDir=/srv/x y\x07\x1b]1337;SetUserVar=a=b\x07")
    (marker,) = markers(events)
    assert (marker.family, marker.cwd) == ("1337", "/srv/x y")
    assert output(events) == b"\x1b]1337;SetUserVar=a=b\x07"


def test_non_marker_sequences_pass_through_unchanged() -> None:
    data = (
        b"\x1b[1;31mred\x1b[0m \x1b]0;title\x07\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\"
        b"\xff\xfe bad utf8 \x1b]63;x\x07\x1b]13;y\x07\x1b]77;z\x07\x1b]6333;q\x07\x1b]\x07"
    )
    events = parse(data)
    assert events == [data]


# -- terminators and aborts ----------------------------------------------------------


def test_other_esc_ends_sequence_and_starts_next() -> None:
    events = parse(b"\x1b]633;A;n0nce\x1b[0m$ ")
    assert markers(events) == [Marker("633", "A", (), True)]
    assert output(events) == b"\x1b[0m$ "


def test_can_and_sub_abort_sequence_into_output() -> None:
    data = b"\x1b]633;D;0;n0nce\x18after\x1b]133;A\x1aend"
    events = parse(data)
    assert markers(events) == []
    assert output(events) == data


def test_unterminated_sequence_released_after_bound() -> None:
    data = b"\x1b]633;E;" + b"x" * (MAX_SEQUENCE_BYTES + 10)
    parser = MarkerParser(NONCE)
    events = parser.feed(data)
    assert output(events) == data
    assert parser.flush() == []


def test_unterminated_sequence_at_end_of_stream_released_by_flush() -> None:
    parser = MarkerParser(NONCE)
    assert parser.feed(b"ok\x1b]633;E;partial") == [b"ok"]
    assert parser.flush() == [b"\x1b]633;E;partial"]


def test_long_sequence_fed_bytewise_is_released_once_past_bound() -> None:
    data = b"\x1b]633;E;" + b"y" * (MAX_SEQUENCE_BYTES + 5) + b"\x07tail"
    assert parse_chunked(data, list(range(1, len(data)))) == parse(data) == [data]


# -- chunking ------------------------------------------------------------------------

RECORDED = (
    b"\x1b]633;P;Cwd=/home/u;n0nce\x07\x1b]633;A;n0nce\x07\x1b[01;32mu@h\x1b[00m:~$ "
    b"\x1b]633;B;n0nce\x07\x1b[?2004hecho \xc3\xa9t\xc3\xa9\r\n\x1b[?2004l\r"
    b"\x1b]633;E;echo \xc3\xa9t\xc3\xa9;n0nce\x07\x1b]633;C;n0nce\x07\xc3\xa9t\xc3\xa9\r\n"
    b"\x1b]633;D;0;n0nce\x1b\\\x1b]133;A;aid=1\x07\x1b]7;file://h/tmp\x07"
    b"\x1b]633;D;0\x07forged\x1b]0;t\x07"
)


def test_recorded_stream_split_everywhere_parses_the_same() -> None:
    whole = parse(RECORDED)
    for cut in range(len(RECORDED) + 1):
        assert parse_chunked(RECORDED, [cut]) == whole, cut
    assert parse_chunked(RECORDED, list(range(len(RECORDED)))) == whole


_pieces = st.sampled_from(
    [
        b"\x1b]633;",
        b"\x1b]133;",
        b"\x1b]7;file://h/x",
        b"\x1b]1337;CurrentDir=/y",
        b"\x1b]",
        b"\x1b",
        b"\x07",
        b"\x1b\\",
        b"\x18",
        b";",
        b"D;0",
        b"E;ls\\x3b",
        b"n0nce",
        b"A",
        b"P;Cwd=/tmp",
        b"text",
        b"\r\n",
        b"\xc3",
        b"\xa9",
        b"\x1b[31m",
        b"6",
        b"3",
    ]
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(_pieces | st.binary(max_size=6), max_size=40),
    st.lists(st.integers(min_value=0, max_value=400), max_size=12),
)
def test_any_chunking_gives_the_same_events(pieces: list[bytes], cuts: list[int]) -> None:
    data = b"".join(pieces)
    whole = parse(data)
    assert parse_chunked(data, [c % (len(data) + 1) for c in cuts]) == whole
    # Nothing is lost or invented: markers are removed, every other byte survives.
    assert len(output(whole)) <= len(data)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_never_raises_and_plain_bytes_survive(data: bytes) -> None:
    events = parse(data)
    if b"\x1b]" not in data:
        assert output(events) == data


def test_no_marker_byte_leaks_into_output() -> None:
    body = b"plain \x1b]633;C;n0nce\x07out\x1b]633;D;1;n0nce\x07"
    assert output(parse(body)) == b"plain out"


# -- value escaping ------------------------------------------------------------------


@given(st.text())
def test_escape_then_unescape_round_trips(value: str) -> None:
    escaped = escape_value(value)
    assert ";" not in escaped
    assert not any(ord(ch) < 0x20 for ch in escaped)
    assert unescape_value(escaped.encode("utf-8")) == value


def test_unescape_leaves_unknown_escapes() -> None:
    assert unescape_value(b"a\\qb\\x4") == "a\\qb\\x4"
    assert unescape_value(b"\\x5c\\\\") == "\\\\"
