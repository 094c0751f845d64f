"""Settings from ``initializationOptions`` (camelCase, milliseconds) onto Settings.

Unknown keys are not an error -- a newer client may know more settings than this
server -- they come back as warnings for ``window/logMessage``.  A known key with a
value of the wrong type is an error that names it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from registry.config import Settings

from .errors import InvalidParamsError

__all__ = ["OPTIONS", "apply_options"]


def _ms(field: str) -> tuple[str, Callable[[Any], Any], str]:
    return (field, lambda v: v / 1000.0, "number")


def _same(field: str, kind: str) -> tuple[str, Callable[[Any], Any], str]:
    return (field, lambda v: v, kind)


#: Wire name -> (Settings field, conversion, expected JSON type).
OPTIONS: dict[str, tuple[str, Callable[[Any], Any], str]] = {
    "shellIntegrationTimeoutMs": _ms("shell_integration_timeout"),
    "outputLineLimit": _same("output_line_limit", "integer"),
    "outputCharacterLimit": _same("output_character_limit", "integer"),
    "compressProgressBar": _same("compress_progress_bar", "boolean"),
    "defaultShell": _same("default_shell", "string"),
    "commandTimeoutMs": _ms("command_timeout"),
    "hotTimeoutMs": _ms("hot_timeout"),
    "hotCompilingTimeoutMs": _ms("hot_compiling_timeout"),
    "cooldownTimeoutMs": _ms("cooldown_timeout"),
    # The engine's other knobs, same naming.
    "integrationIdleTimeoutMs": _ms("integration_idle_timeout"),
    "integrationAbsoluteTimeoutMs": _ms("integration_absolute_timeout"),
    "commandStartTimeoutMs": _ms("command_start_timeout"),
    "noneQuietTimeoutMs": _ms("none_quiet_timeout"),
    "killGraceMs": _ms("kill_grace"),
    "runOutputCapBytes": _same("run_output_cap", "integer"),
    "replayCapBytes": _same("replay_cap", "integer"),
    "fallbackToSubprocess": _same("fallback_to_subprocess", "boolean"),
    "loginShell": _same("login_shell", "boolean"),
    "cols": _same("cols", "integer"),
    "rows": _same("rows", "integer"),
    # Remote terminals (docs/remote.md).
    "sshCommand": _same("ssh_command", "string"),
    "sshConfigFile": _same("ssh_config_file", "string"),
    "sshMaxSessions": _same("ssh_max_sessions", "integer"),
    "sshKeepaliveIntervalMs": _ms("ssh_keepalive_interval"),
    "sshKeepaliveCount": _same("ssh_keepalive_count", "integer"),
    "sshConnectTimeoutMs": _ms("ssh_connect_timeout"),
    "containerEngine": _same("container_engine", "string"),
    "remoteStartTimeoutMs": _ms("remote_start_timeout"),
    "remoteControlTimeoutMs": _ms("remote_control_timeout"),
}

_CHECKS: dict[str, Callable[[Any], bool]] = {
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0,
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 0,
    "boolean": lambda v: isinstance(v, bool),
    "string": lambda v: isinstance(v, str) and bool(v),
}


def apply_options(settings: Settings, options: Any) -> list[str]:
    """Apply ``options`` to ``settings``; return warnings (unknown keys)."""
    if options is None:
        return []
    if not isinstance(options, Mapping):
        raise InvalidParamsError("initializationOptions must be an object")
    warnings = []
    for key, value in options.items():
        known = OPTIONS.get(key)
        if known is None:
            warnings.append(f"unknown setting {key!r} ignored")
            continue
        field, convert, kind = known
        if value is None and key == "commandTimeoutMs":
            settings.command_timeout = None
            continue
        if not _CHECKS[kind](value):
            raise InvalidParamsError(f"initializationOptions.{key} must be a {kind}")
        setattr(settings, field, convert(value))
    return warnings
