"""Named keys to bytes, as xterm sends them."""

from __future__ import annotations

import pytest

from registry.keys import UnknownKeyError, key_bytes


@pytest.mark.parametrize(
    ("keys", "normal", "application"),
    [
        (["q"], b"q", b"q"),
        (["Escape", ":q!", "Enter"], b"\x1b:q!\r", b"\x1b:q!\r"),
        (["C-c"], b"\x03", b"\x03"),
        (["C-x", "C-c"], b"\x18\x03", b"\x18\x03"),
        (["C-a", "C-z"], b"\x01\x1a", b"\x01\x1a"),
        (["C-["], b"\x1b", b"\x1b"),
        (["C-@"], b"\x00", b"\x00"),
        (["M-x"], b"\x1bx", b"\x1bx"),
        (["M-C-a"], b"\x1b\x01", b"\x1b\x01"),
        (["M-Enter"], b"\x1b\r", b"\x1b\r"),
        (["Tab", "S-Tab", "BTab"], b"\t\x1b[Z\x1b[Z", b"\t\x1b[Z\x1b[Z"),
        (["Backspace"], b"\x7f", b"\x7f"),
        (["Space"], b" ", b" "),
        (["Up", "Down", "Right", "Left"], b"\x1b[A\x1b[B\x1b[C\x1b[D", b"\x1bOA\x1bOB\x1bOC\x1bOD"),
        (["Home", "End"], b"\x1b[H\x1b[F", b"\x1bOH\x1bOF"),
        (["C-Left"], b"\x1b[1;5D", b"\x1b[1;5D"),
        (["S-Up"], b"\x1b[1;2A", b"\x1b[1;2A"),
        (["PageUp", "PageDown"], b"\x1b[5~\x1b[6~", b"\x1b[5~\x1b[6~"),
        (["Insert", "Delete"], b"\x1b[2~\x1b[3~", b"\x1b[2~\x1b[3~"),
        (["C-Delete"], b"\x1b[3;5~", b"\x1b[3;5~"),
        (["F1", "F4"], b"\x1bOP\x1bOS", b"\x1bOP\x1bOS"),
        (["F5", "F12"], b"\x1b[15~\x1b[24~", b"\x1b[15~\x1b[24~"),
        (["S-F5"], b"\x1b[15;2~", b"\x1b[15;2~"),
        (["enter", "ESCAPE", "pgup"], b"\r\x1b\x1b[5~", b"\r\x1b\x1b[5~"),
        (["yes", "hello world", "é"], "yeshello worldé".encode(), "yeshello worldé".encode()),
    ],
)
def test_key_bytes(keys: list[str], normal: bytes, application: bytes) -> None:
    assert key_bytes(keys) == normal
    assert key_bytes(keys, application_cursor=True) == application


def test_backspace_follows_the_erase_character() -> None:
    assert key_bytes(["Backspace"], erase=b"\x08") == b"\x08"


@pytest.mark.parametrize(
    ("keys", "message"),
    [
        (["Enter", "Entr"], "keys[1]: unknown key 'Entr' (did you mean 'Enter'?"),
        (["Escpae"], "unknown key 'Escpae' (did you mean 'Escape'?"),
        (["PageUpp"], "did you mean 'PageUp'?"),
        (["F13"], "unknown key 'F13': function keys go from F1 to F12"),
        (["C-foo"], "unknown key 'C-foo': 'foo' is neither a key name nor one character"),
        (["C-1"], "unknown key 'C-1': '1' has no control code"),
        (["C-Enter"], "unknown key 'C-Enter': Enter cannot take C- or S- here"),
        ([""], "unknown key '': an empty key sends nothing"),
    ],
)
def test_unknown_keys_are_named(keys: list[str], message: str) -> None:
    with pytest.raises(UnknownKeyError) as caught:
        key_bytes(keys)
    assert message in str(caught.value)


def test_nothing_is_sent_when_one_key_is_wrong() -> None:
    # key_bytes returns all or raises: a caller never writes half a sequence.
    with pytest.raises(UnknownKeyError):
        key_bytes(["q", "Escpae"])
