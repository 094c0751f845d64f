"""The protocol's one table, held together: Python's and the extension's mirror of it,
and a client that loads no engine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import typing
from pathlib import Path

import attrs

from protocol import methods
from protocol import types as wire
from protocol.errors import ERRORS, ErrorCode

ROOT = Path(__file__).resolve().parent.parent
TS = (ROOT / "vscode-client" / "src" / "protocol.ts").read_text()


def _ts_block(name: str) -> str:
    match = re.search(rf"(?:interface|const) {name}\b[^{{]*\{{(.*?)\n\}}", TS, re.S)
    assert match, f"{name} not found in protocol.ts"
    return match.group(1)


def _ts_fields(interface: str) -> set[str]:
    return set(re.findall(r"^\s+(\w+)\??:", _ts_block(interface), re.M))


def _ts_map(name: str) -> dict[str, str]:
    return dict(re.findall(r"^\s+'([^']+)': (.+);$", _ts_block(name), re.M))


def _fields(cls: type) -> set[str]:
    return {wire.camel(f.name) for f in attrs.fields(cls)}


def _ts_type_name(cls: typing.Any) -> str:
    if cls is None:
        return "null"
    if typing.get_origin(cls) is list:
        return _ts_type_name(typing.get_args(cls)[0]) + "[]"
    return "Terminal" if cls is wire.TerminalInfo else str(cls.__name__)


def test_requests_match_the_extensions_request_map() -> None:
    ts = _ts_map("RequestMap")
    assert list(ts) == list(methods.REQUESTS) == list(wire.REQUESTS)
    for method, (params, result) in wire.REQUESTS.items():
        assert ts[method] == f"[{params.__name__}, {_ts_type_name(result)}]", method


def test_notifications_match_the_extensions_notification_map() -> None:
    ts = _ts_map("NotificationMap")
    assert list(ts) == list(methods.NOTIFICATIONS) == list(wire.NOTIFICATIONS)
    for method, params in wire.NOTIFICATIONS.items():
        assert ts[method] == _ts_type_name(params), method
    listed = re.search(r"NOTIFICATION_METHODS[^=]*= \[(.*?)\]", TS, re.S)
    assert listed is not None
    assert re.findall(r"'([^']+)'", listed.group(1)) == list(methods.NOTIFICATIONS)


def _nested(cls: type) -> set[type]:
    """The attrs classes ``cls`` holds in its fields (``waitingFor``), recursively."""
    found: set[type] = set()
    for hint in typing.get_type_hints(cls).values():
        for arg in (hint, *typing.get_args(hint)):
            if isinstance(arg, type) and attrs.has(arg) and arg not in found:
                found |= {arg, *_nested(arg)}
    return found


def test_every_wire_type_has_the_same_fields_in_both_languages() -> None:
    types = {p for p, _ in wire.REQUESTS.values()} | set(wire.NOTIFICATIONS.values())
    types |= {r for _, r in wire.REQUESTS.values() if r is not None and attrs.has(r)}
    types |= {n for cls in types for n in _nested(cls)}
    assert wire.WaitingFor in types
    for cls in types:
        assert _fields(cls) == _ts_fields(_ts_type_name(cls)), cls.__name__


def test_nested_wire_types_have_the_same_fields_in_both_languages() -> None:
    assert _fields(wire.Limits) == _ts_fields("Limits")
    limit_names = set(re.findall(r"'(\w+)'", TS.split("type LimitName =")[1].split(";")[0]))
    assert limit_names == _fields(wire.Limits)


def test_error_codes_match_the_extensions_error_codes() -> None:
    ts = {
        name: int(value)
        for name, value in re.findall(r"^\s+(\w+): (-?\d+),", _ts_block("ErrorCode"), re.M)
    }
    assert ts == {code.name: code.value for code in ErrorCode}
    assert set(ERRORS) == set(ErrorCode)


def test_the_client_loads_no_engine_and_no_server() -> None:
    probe = (
        "import sys, json, protocol.client, protocol.cli;"
        "protocol.client.RegistryClient();"
        "print(json.dumps(sorted(sys.modules)))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
        ).stdout
    )
    engine = [m for m in loaded if m == "registry" or m.startswith("registry.")]
    assert engine == []
    server_side = {
        "protocol.server",
        "protocol.connection",
        "protocol.handlers",
        "protocol.notifications",
        "pygls.lsp.server",
        "pygls.server",
        "pexpect",
        "psutil",
    }
    assert sorted(server_side & set(loaded)) == []
