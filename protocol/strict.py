"""Strict structuring of the wire types: incoming params checked, outgoing kept whole.

lsprotocol's converter coerces loosely (``"5"`` passes as 5) and drops fields equal
to their default (``exitCode: 0`` would vanish); ours does neither.  Incoming params
are checked field by field against the attrs class's annotations -- and the
:class:`Rule` in a field's metadata (bounds, NUL, variable names) -- and a wrong
field raises :class:`~protocol.errors.InvalidParamsError` naming it: ``timeoutMs
must be an integer, got a string``, ``cols must be positive and at most 65535, got
100000``.  Every string is checked to be valid Unicode (JSON can carry a lone
surrogate; no terminal, path or environment can).
"""

from __future__ import annotations

import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

import attrs

from .errors import InvalidParamsError

__all__ = ["OMIT_IF_NONE", "RULE", "Rule", "camel", "structure_params", "unstructure_fields"]

T = TypeVar("T")

#: Field metadata key of a :class:`Rule`.
RULE = "terminal_registry.rule"
#: Field metadata key: leave the field off the wire when it is None.
OMIT_IF_NONE = "terminal_registry.omit_if_none"


@functools.cache
def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@attrs.frozen
class Rule:
    """What an incoming field must be beyond its type (checked by structure_params)."""

    min: int | None = None
    max: int | None = None
    #: Text that reaches a shell, a path or an environment: a NUL cannot be passed on.
    no_nul: bool = False
    #: Dict keys that must be environment variable names.
    env_names: bool = False
    #: The only values a string may take.
    choices: tuple[str, ...] = ()
    #: Text that must say something: a command of only whitespace runs nothing.
    not_blank: bool = False


_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _apply_rule(rule: Rule, value: Any, where: str) -> None:
    if value is None:
        return
    if isinstance(value, (int, float)) and not isinstance(value, bool):
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
        if rule.not_blank and not value.strip():
            raise InvalidParamsError(f"{where} must not be empty or blank, got {value!r}")
        if rule.choices and value not in rule.choices:
            expected = ", ".join(repr(choice) for choice in rule.choices)
            raise InvalidParamsError(f"{where} must be one of {expected}, got {value!r}")
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if rule.env_names and not _ENV_NAME.fullmatch(key):
                raise InvalidParamsError(
                    f"{where} key {key!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
                )
            _apply_rule(rule, item, f"{where}.{key}")
        return
    if isinstance(value, list):
        for index, item in enumerate(value):
            _apply_rule(rule, item, f"{where}[{index}]")


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
    if origin is list:
        (item_type,) = typing.get_args(annotation)
        if not isinstance(value, list):
            raise InvalidParamsError(f"{where} must be an array, got {_kind(value)}")
        return [_check(item, item_type, f"{where}[{index}]") for index, item in enumerate(value)]
    if attrs.has(annotation):
        if not isinstance(value, dict):
            raise InvalidParamsError(f"{where} must be an object, got {_kind(value)}")
        try:
            return structure_params(annotation, value)
        except InvalidParamsError as error:
            raise InvalidParamsError(f"{where}.{error.message}") from None
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
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise InvalidParamsError(f"{where} must be a number, got {_kind(value)}")
        if value != value or value in (float("inf"), float("-inf")):
            raise InvalidParamsError(f"{where} must be a finite number")
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
    if typing.get_origin(annotation) is list:
        return "an array"
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


class _Field(typing.NamedTuple):
    name: str
    wire: str
    annotation: Any
    required: bool
    rule: Rule | None
    omit_if_none: bool


def _fields(cls: type) -> tuple[_Field, ...]:
    """What structuring needs of each field of ``cls``: computed once per class."""
    cached = _FIELDS.get(cls)
    if cached is None:
        hints = typing.get_type_hints(cls)
        cached = _FIELDS[cls] = tuple(
            _Field(
                field.name,
                camel(field.name),
                hints[field.name],
                field.default is attrs.NOTHING,
                field.metadata.get(RULE),
                bool(field.metadata.get(OMIT_IF_NONE)),
            )
            for field in attrs.fields(cls)
        )
    return cached


_FIELDS: dict[type, tuple[_Field, ...]] = {}


def structure_params(cls: type[T], params: Any) -> T:
    """Build ``cls`` from wire params, strictly; InvalidParamsError names the field."""
    if params is None:
        params = {}
    if not isinstance(params, Mapping):
        raise InvalidParamsError(f"params must be an object, got {_kind(params)}")
    values: dict[str, Any] = {}
    for field in _fields(cls):
        if field.wire not in params:
            if field.required:
                raise InvalidParamsError(f"missing required field {field.wire!r}")
            continue
        value = values[field.name] = _check(params[field.wire], field.annotation, field.wire)
        if field.rule is not None:
            _apply_rule(field.rule, value, field.wire)
    return cls(**values)


_PLAIN = (str, int, float, bool, type(None))


def unstructure_fields(obj: Any, nested: typing.Callable[[Any], Any]) -> dict[str, Any]:
    """The wire dict of one of our attrs objects; ``nested`` converts non-plain values."""
    out: dict[str, Any] = {}
    for field in _fields(type(obj)):
        value = getattr(obj, field.name)
        if value is None and field.omit_if_none:
            continue
        out[field.wire] = value if isinstance(value, _PLAIN) else nested(value)
    return out
