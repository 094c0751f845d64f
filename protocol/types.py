"""The wire types of docs/protocol.md as attrs classes, their table, and the converter.

Field names are snake_case here and camelCase on the wire.  :data:`REQUESTS` and
:data:`NOTIFICATIONS` give each method of :mod:`protocol.methods` its types.

The one converter (:data:`converter`) is lsprotocol's -- pygls speaks LSP's own
messages (``initialize``) through it -- with hooks of our own, registered once:

* our classes keep every field (lsprotocol's default hooks drop fields equal to
  their default, so ``exitCode: 0`` would vanish) and are structured strictly
  (lsprotocol coerces ``"5"`` to 5); a wrong field raises
  :class:`~protocol.errors.InvalidParamsError` naming it (``timeoutMs must be an
  integer``);
* JSON-RPC messages keep their params and results as the plain JSON they came as
  (pygls would make namedtuples of the params of methods it does not know).
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from lsprotocol.converters import get_converter
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage

from . import methods
from .errors import InvalidParamsError

__all__ = [
    "NOTIFICATIONS",
    "REQUESTS",
    "AcquireParams",
    "DidCloseParams",
    "DidEndRunParams",
    "DidStartRunParams",
    "DidWriteParams",
    "EnvironmentDetailsParams",
    "EnvironmentDetailsResult",
    "ListParams",
    "OutputResult",
    "ReleaseParams",
    "ReplayParams",
    "ReplayResult",
    "ResizeParams",
    "RunParams",
    "RunResult",
    "TerminalIdParams",
    "TerminalInfo",
    "WriteParams",
    "converter",
    "converter_factory",
    "structure_params",
    "unstructure",
]

T = TypeVar("T")


@functools.cache
def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


# -- requests -------------------------------------------------------------------------


@attrs.define
class AcquireParams:
    cwd: str
    task_id: str | None = None
    provider: str = "shell"


@attrs.define
class RunParams:
    command: str
    terminal_id: int | None = None
    cwd: str | None = None
    task_id: str | None = None
    provider: str | None = None
    timeout_ms: int | None = None
    env: dict[str, str] | None = None
    background: bool = False
    work_done_token: int | str | None = None


@attrs.define
class WriteParams:
    terminal_id: int
    data: str


@attrs.define
class ResizeParams:
    terminal_id: int
    cols: int
    rows: int


@attrs.define
class TerminalIdParams:
    terminal_id: int


@attrs.define
class ListParams:
    task_id: str | None = None
    busy: bool | None = None


@attrs.define
class ReplayParams:
    terminal_id: int
    max_bytes: int | None = None


@attrs.define
class ReleaseParams:
    task_id: str


@attrs.define
class EnvironmentDetailsParams:
    task_id: str | None = None
    cooldown_timeout_ms: int | None = None


# -- results ----------------------------------------------------------------------------


@attrs.define
class TerminalInfo:
    id: int
    provider: str
    task_id: str | None
    cwd: str
    busy: bool
    hot: bool
    shell_integration: str
    shell: str
    pid: int | None
    last_command: str | None


@attrs.define
class RunResult:
    run_id: int
    terminal_id: int
    command_line: str
    state: str
    exit_code: int | None
    signal: str | None
    output: str
    truncated: bool
    cwd: str | None
    duration_ms: int
    #: Subprocess provider only (None elsewhere, and then left off the wire).
    stdout: str | None = None
    stderr: str | None = None
    #: Added field: why the run ended as it did (fallbacks, heuristics, failures).
    note: str | None = None


@attrs.define
class OutputResult:
    output: str


@attrs.define
class ReplayResult:
    data: str


@attrs.define
class EnvironmentDetailsResult:
    markdown: str
    terminals: list[TerminalInfo]


# -- notifications ----------------------------------------------------------------------


@attrs.define
class DidCloseParams:
    terminal_id: int


@attrs.define
class DidStartRunParams:
    terminal_id: int
    run_id: int
    command_line: str


@attrs.define
class DidWriteParams:
    terminal_id: int
    data: str
    run_id: int | None = None
    #: Characters this client did not get because it was not reading (per connection).
    missed: int | None = None


@attrs.define
class DidEndRunParams:
    terminal_id: int
    run_id: int
    state: str
    exit_code: int | None


# -- the table ------------------------------------------------------------------------------

#: Each request's params type and result type (None: the result is ``null``).
REQUESTS: dict[str, tuple[type, Any]] = {
    methods.ACQUIRE: (AcquireParams, TerminalInfo),
    methods.RUN: (RunParams, RunResult),
    methods.WRITE: (WriteParams, None),
    methods.RESIZE: (ResizeParams, None),
    methods.KILL: (TerminalIdParams, None),
    methods.CLOSE: (TerminalIdParams, None),
    methods.LIST: (ListParams, list[TerminalInfo]),
    methods.OUTPUT: (TerminalIdParams, OutputResult),
    methods.GET: (TerminalIdParams, TerminalInfo),
    methods.REPLAY: (ReplayParams, ReplayResult),
    methods.RELEASE: (ReleaseParams, None),
    methods.ENVIRONMENT_DETAILS: (EnvironmentDetailsParams, EnvironmentDetailsResult),
}

#: Each notification's params type.
NOTIFICATIONS: dict[str, type] = {
    methods.DID_OPEN: TerminalInfo,
    methods.DID_CHANGE: TerminalInfo,
    methods.DID_CLOSE: DidCloseParams,
    methods.DID_START_RUN: DidStartRunParams,
    methods.DID_WRITE: DidWriteParams,
    methods.DID_END_RUN: DidEndRunParams,
}


#: Fields left off the wire when None (docs/protocol.md: "subprocess provider only").
_OMIT_IF_NONE = {
    (RunResult, "stdout"),
    (RunResult, "stderr"),
    (RunResult, "note"),
    (DidWriteParams, "missed"),
}


@attrs.frozen
class _Rule:
    """What an incoming field must be beyond its type (checked by structure_params)."""

    min: int | None = None
    max: int | None = None
    #: Text that reaches a shell, a path or an environment: a NUL cannot be passed on.
    no_nul: bool = False
    #: Dict keys that must be environment variable names.
    env_names: bool = False


#: The kernel's window size is two unsigned shorts (struct winsize).
_SIZE = _Rule(min=1, max=65535)
#: Durations in ms: not negative; at most ~24.8 days (what a 32-bit int holds).
_MS = _Rule(min=0, max=2**31 - 1)

_RULES: dict[tuple[type, str], _Rule] = {
    (AcquireParams, "cwd"): _Rule(no_nul=True),
    (RunParams, "command"): _Rule(no_nul=True),
    (RunParams, "cwd"): _Rule(no_nul=True),
    (RunParams, "timeout_ms"): _MS,
    (RunParams, "env"): _Rule(no_nul=True, env_names=True),
    (ResizeParams, "cols"): _SIZE,
    (ResizeParams, "rows"): _SIZE,
    (ReplayParams, "max_bytes"): _Rule(min=0),
    (EnvironmentDetailsParams, "cooldown_timeout_ms"): _MS,
}

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _apply_rule(rule: _Rule, value: Any, where: str) -> None:
    if value is None:
        return
    if isinstance(value, int) and not isinstance(value, bool):
        if (rule.min is not None and value < rule.min) or (
            rule.max is not None and value > rule.max
        ):
            low = {None: "", 0: "not negative", 1: "positive"}.get(rule.min, f"at least {rule.min}")
            high = "" if rule.max is None else f"at most {rule.max}"
            bounds = " and ".join(part for part in (low, high) if part)
            raise InvalidParamsError(f"{where} must be {bounds}, got {value}")
        return
    if isinstance(value, str):
        if rule.no_nul and "\0" in value:
            raise InvalidParamsError(f"{where} must not contain a NUL character")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if rule.env_names and not _ENV_NAME.fullmatch(key):
                raise InvalidParamsError(
                    f"{where} key {key!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )
            _apply_rule(rule, item, f"{where}.{key}")


_OUR_TYPES = frozenset(
    {
        *(params for params, _result in REQUESTS.values()),
        *(result for _params, result in REQUESTS.values() if attrs.has(result)),
        TerminalInfo,
        *NOTIFICATIONS.values(),
    }
)


# -- strict structuring -----------------------------------------------------------------

_TYPE_WORDS = {int: "an integer", str: "a string", bool: "a boolean", float: "a number"}


def _check(value: Any, annotation: Any, where: str) -> Any:
    """Return ``value`` if it has the annotated type exactly; else raise naming ``where``."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(annotation)
        if value is None and type(None) in options:
            return None
        real = [o for o in options if o is not type(None)]
        if len(real) == 1:
            return _check(value, real[0], where)
        for option in real:
            try:
                return _check(value, option, where)
            except InvalidParamsError:
                continue
        expected = " or ".join(_describe(o) for o in real)
        raise InvalidParamsError(f"{where} must be {expected}, got {_kind(value)}")
    if origin is dict:
        key_type, value_type = typing.get_args(annotation)
        if not isinstance(value, dict):
            raise InvalidParamsError(f"{where} must be an object, got {_kind(value)}")
        return {
            _check(k, key_type, f"{where} key"): _check(v, value_type, f"{where}.{k}")
            for k, v in value.items()
        }
    if annotation is bool:
        if not isinstance(value, bool):
            raise InvalidParamsError(f"{where} must be a boolean, got {_kind(value)}")
        return value
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidParamsError(f"{where} must be an integer, got {_kind(value)}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise InvalidParamsError(f"{where} must be a string, got {_kind(value)}")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                # JSON can carry "\\ud800"; no terminal, path or environment can.
                raise InvalidParamsError(
                    f"{where} contains a lone surrogate (not valid Unicode)"
                ) from None
        return value
    raise TypeError(f"no strict check for {annotation!r}")  # pragma: no cover


def _describe(annotation: Any) -> str:
    return _TYPE_WORDS.get(annotation, "an object")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    return {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "an array",
        dict: "an object",
    }.get(type(value), type(value).__name__)


def _fields(cls: type) -> tuple[tuple[str, str, Any, bool], ...]:
    """(name, wire name, annotation, required) per field: computed once per class."""
    cached = _FIELDS.get(cls)
    if cached is None:
        cached = _FIELDS[cls] = _compute_fields(cls)
    return cached


_FIELDS: dict[type, tuple[tuple[str, str, Any, bool], ...]] = {}


def _compute_fields(cls: type) -> tuple[tuple[str, str, Any, bool], ...]:
    """(name, wire name, annotation, required) per field: computed once per class."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (field.name, camel(field.name), hints[field.name], field.default is attrs.NOTHING)
        for field in attrs.fields(cls)
    )


def structure_params(cls: type[T], params: Any) -> T:
    """Build ``cls`` from wire params, strictly; InvalidParamsError names the field."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise InvalidParamsError(f"params must be an object, got {_kind(params)}")
    values: dict[str, Any] = {}
    for name, wire, annotation, required in _fields(cls):
        if wire not in params:
            if required:
                raise InvalidParamsError(f"missing required field {wire!r}")
            continue
        value = values[name] = _check(params[wire], annotation, wire)
        rule = _RULES.get((cls, name))
        if rule is not None:
            _apply_rule(rule, value, wire)
    return cls(**values)


_PLAIN = (str, int, float, bool, type(None))


def _unstructure_ours(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    cls = type(obj)
    for name, wire, _annotation, _required in _fields(cls):
        value = getattr(obj, name)
        if value is None and (cls, name) in _OMIT_IF_NONE:
            continue
        out[wire] = value if isinstance(value, _PLAIN) else converter.unstructure(value)
    return out


def _make_converter() -> cattrs.Converter:
    conv = get_converter(cattrs.Converter())
    conv.register_unstructure_hook_factory(
        lambda cls: cls in _OUR_TYPES, lambda cls: _unstructure_ours
    )
    conv.register_structure_hook_factory(
        lambda cls: cls in _OUR_TYPES,
        lambda cls: lambda obj, _cls: structure_params(_cls, obj),
    )
    # JSON-RPC messages: params and results stay the plain JSON they came as.
    conv.register_structure_hook(
        JsonRPCRequestMessage,
        lambda obj, cls: cls(
            id=obj["id"], method=obj["method"], jsonrpc=obj["jsonrpc"], params=obj.get("params")
        ),
    )
    conv.register_structure_hook(
        JsonRPCNotification,
        lambda obj, cls: cls(
            method=obj["method"], jsonrpc=obj["jsonrpc"], params=obj.get("params")
        ),
    )
    conv.register_structure_hook(
        JsonRPCResponseMessage,
        lambda obj, cls: cls(id=obj["id"], jsonrpc=obj["jsonrpc"], result=obj.get("result")),
    )
    return conv


converter = _make_converter()


def unstructure(obj: Any) -> Any:
    """Wire form (camelCase dicts) of one of our types, or of a list of them."""
    if type(obj) in _OUR_TYPES:  # the common case, without cattrs's dispatch
        return _unstructure_ours(obj)
    return converter.unstructure(obj)


def converter_factory() -> cattrs.Converter:
    """For pygls's ``converter_factory`` arguments: the one converter, built once."""
    return converter
