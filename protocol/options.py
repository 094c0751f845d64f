"""``initializationOptions``: typed, bounded, and per connection.

The options a client sends in ``initialize`` (camelCase, durations in milliseconds)
are structured strictly into :class:`InitializationOptions` -- the same checks as
every request's params (:mod:`protocol.strict`): a wrong type or a value out of
bounds is an error naming it (``initializationOptions.cols must be positive and at
most 65535, got 70000``).  Unknown keys are not an error -- a newer client may know
more settings than this server -- they come back as warnings for
``window/logMessage``.

They make a :class:`~registry.config.Settings` of that connection's own
(:func:`settings_for`): the server's defaults with the client's choices on top.
Nothing is shared: one client's ``commandTimeoutMs`` is not another's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import attrs

from registry.config import Settings
from registry.limits import Limits as EngineLimits

from .errors import InvalidParamsError
from .strict import RULE, Rule, camel, structure_params
from .types import Limits

__all__ = ["InitializationOptions", "engine_limits", "settings_for", "wire_limits"]

#: Durations in ms: not negative; at most ~24.8 days (what a 32-bit int holds).
_MS = {RULE: Rule(min=0, max=2**31 - 1)}
#: Sizes in bytes and counts: not negative, at most 2 GiB.
_COUNT = {RULE: Rule(min=0, max=2**31)}
#: The kernel's window size is two unsigned shorts (struct winsize).
_SIZE = {RULE: Rule(min=1, max=65535)}
_TEXT = {RULE: Rule(no_nul=True)}


@attrs.define
class InitializationOptions:
    """Every setting a client may send; each maps onto the Settings field of its name
    (``...Ms`` onto seconds)."""

    shell_integration_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    output_line_limit: int | None = attrs.field(default=None, metadata=_COUNT)
    output_character_limit: int | None = attrs.field(default=None, metadata=_COUNT)
    output_line_character_limit: int | None = attrs.field(default=None, metadata=_COUNT)
    full_output_cap_bytes: int | None = attrs.field(default=None, metadata=_COUNT)
    compress_progress_bar: bool | None = None
    default_shell: str | None = attrs.field(default=None, metadata=_TEXT)
    #: ``null`` here means "no timeout", not "unset".
    command_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    hot_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    hot_compiling_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    cooldown_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    integration_idle_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    integration_absolute_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    command_start_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    none_quiet_timeout_ms: float | None = attrs.field(default=None, metadata=_MS)
    kill_grace_ms: float | None = attrs.field(default=None, metadata=_MS)
    run_output_cap_bytes: int | None = attrs.field(default=None, metadata=_COUNT)
    replay_cap_bytes: int | None = attrs.field(default=None, metadata=_COUNT)
    fallback_to_subprocess: bool | None = None
    reuse_across_tasks: str | None = attrs.field(
        default=None, metadata={RULE: Rule(choices=("idle", "released", "never"))}
    )
    login_shell: bool | None = None
    cols: int | None = attrs.field(default=None, metadata=_SIZE)
    rows: int | None = attrs.field(default=None, metadata=_SIZE)
    #: Every command's limits unless its terminal or run sets its own (over the
    #: server's: only ``outputMb`` by default).
    limits: Limits | None = None


def engine_limits(limits: Limits | None) -> EngineLimits | None:
    """The engine's limits from their wire form."""
    if limits is None:
        return None
    return EngineLimits(**attrs.asdict(limits))


def wire_limits(limits: EngineLimits) -> Limits | None:
    """The wire form of limits that apply (None when none does)."""
    effective = limits.effective()
    if effective == EngineLimits():
        return None
    return Limits(**dataclasses.asdict(effective))


#: Wire name -> (option field, Settings field, milliseconds to seconds).
_FIELDS: dict[str, tuple[str, str, bool]] = {}
for _field in attrs.fields(InitializationOptions):
    _setting = _field.name
    _ms = _setting.endswith("_ms")
    if _ms:
        _setting = _setting.removesuffix("_ms")
    elif _setting.endswith("_bytes"):
        _setting = _setting.removesuffix("_bytes")
    _FIELDS[camel(_field.name)] = (_field.name, _setting, _ms)
    if _setting not in {f.name for f in dataclasses.fields(Settings)}:  # pragma: no cover
        raise AssertionError(f"option {_field.name} names no setting")


def settings_for(base: Settings, options: Any) -> tuple[Settings, list[str]]:
    """A connection's Settings: ``base`` with ``options`` on top; and warnings."""
    if options is None:
        return dataclasses.replace(base), []
    if not isinstance(options, Mapping):
        raise InvalidParamsError("initializationOptions must be an object")
    known = {key: value for key, value in options.items() if key in _FIELDS}
    warnings = [f"unknown setting {key!r} ignored" for key in options if key not in _FIELDS]
    try:
        typed = structure_params(InitializationOptions, known)
    except InvalidParamsError as error:
        raise InvalidParamsError(f"initializationOptions.{error.message}") from None
    changes: dict[str, Any] = {}
    for key in known:
        name, setting, ms = _FIELDS[key]
        value = getattr(typed, name)
        if value is None and setting != "command_timeout":
            continue  # null for a setting that has no "none": keep the default
        if isinstance(value, Limits):
            changes[setting] = (engine_limits(value) or EngineLimits()).over(base.limits)
            continue
        changes[setting] = value / 1000.0 if ms and value is not None else value
    return dataclasses.replace(base, **changes), warnings
