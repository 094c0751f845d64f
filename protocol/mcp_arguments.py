"""Argument errors of the MCP tools, in words a model acts on.

The SDK checks a call's arguments against the tool's pydantic model before the tool
runs and, when they do not fit, answers with pydantic's own report (``1 validation
error for run_commandArguments ... For further information visit https://...``): a
validator's internals, not what to send instead.  :class:`CheckedTool` is the SDK's
``Tool``, built and registered the SDK's way (``Tool.from_function``, then
``MCPServer(tools=...)``), whose ``run`` turns that one failure into a short
sentence per argument -- ``command: must not be empty``, ``keys[1]: must be a
string`` -- still a tool error (``isError``), since a ``ToolError`` is what the SDK
makes one of.  Everything else a tool raises passes through untouched.

The SDK documents how that failure reaches us (``Tool.run``: a ``ToolError`` whose
``__cause__`` is what was raised; its own call handler tells argument errors apart
the same way, to log only their field names), so nothing of it is patched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.tools import Tool
from pydantic import ValidationError
from pydantic_core import ErrorDetails

__all__ = ["CheckedTool", "describe"]

#: pydantic's error types whose meaning needs no context, as what the argument takes.
_FIXED = {
    "string_type": "must be a string",
    "int_type": "must be an integer",
    "int_parsing": "must be an integer",
    "int_from_float": "must be a whole number",
    "float_type": "must be a number",
    "float_parsing": "must be a number",
    "bool_type": "must be true or false",
    "bool_parsing": "must be true or false",
    "dict_type": "must be an object",
}
#: Bounds: pydantic's error type -> (its context key, the words before the bound).
_BOUNDS = {
    "greater_than": ("gt", "must be greater than"),
    "greater_than_equal": ("ge", "must be at least"),
    "less_than": ("lt", "must be less than"),
    "less_than_equal": ("le", "must be at most"),
}
#: JSON schema types, as what a missing argument should have been.
_TYPES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
}

#: The same, for the items of a list.
_PLURALS = {"string": "strings", "integer": "integers", "number": "numbers"}


class CheckedTool(Tool):
    """The SDK's tool, whose argument errors say what each argument takes."""

    async def run(
        self, arguments: dict[str, Any], context: Any, convert_result: bool = False
    ) -> Any:
        try:
            return await super().run(arguments, context, convert_result)
        except UnexpectedToolError:
            raise  # a crash (its cause may be a ValidationError of our own making)
        except ToolError as error:
            cause = error.__cause__
            if not isinstance(cause, ValidationError):
                raise
            raise ToolError(describe(self.name, cause, arguments, self.parameters)) from cause


def describe(
    tool: str, error: ValidationError, arguments: Mapping[str, Any], schema: Mapping[str, Any]
) -> str:
    """One line: each argument that does not fit and what it should be; names given
    that the tool does not take (ignored otherwise, but the likely typo behind a
    missing argument)."""
    properties: Mapping[str, Any] = schema.get("properties", {})
    problems: dict[str, list[str]] = {}
    for detail in error.errors(include_url=False):
        where = _where(detail["loc"])
        what = _problem(detail, properties.get(where, {}))
        if what not in problems.setdefault(where, []):
            problems[where].append(what)
    parts = [f"{where}: {' or '.join(whats)}" for where, whats in problems.items()]
    unknown = [name for name in arguments if name not in properties]
    if unknown:
        parts.append(f"not arguments of {tool}: {', '.join(unknown)}")
    return (
        f"Invalid arguments to {tool}: {'; '.join(parts)} "
        "(nothing was done: correct the call and make it again)"
    )


def _number(bound: Any) -> str:
    """A bound as written in the schema: ``0``, not pydantic's ``0.0``."""
    if isinstance(bound, float) and bound.is_integer():
        return str(int(bound))
    return str(bound)


def _where(loc: tuple[int | str, ...]) -> str:
    """``("keys", 1)`` as ``keys[1]``; the arguments as a whole as ``arguments``."""
    if not loc:
        return "arguments"
    where = str(loc[0])
    for part in loc[1:]:
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    return where


def _problem(detail: ErrorDetails, spec: Mapping[str, Any]) -> str:
    kind = detail["type"]
    context: Mapping[str, Any] = detail.get("ctx") or {}
    if kind == "missing":
        expected = _TYPES.get(spec.get("type", ""))
        return f"required, {expected}" if expected else "required"
    if kind in _FIXED:
        return _FIXED[kind]
    if kind == "list_type":
        items = _PLURALS.get(spec.get("items", {}).get("type", ""))
        return f"must be a list of {items}" if items else "must be a list"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"{words} {_number(context.get(key))}"
    if kind == "string_too_short":
        least = context.get("min_length", 1)
        return "must not be empty" if least == 1 else f"must be at least {least} characters"
    if kind == "too_short":
        least = context.get("min_length", 1)
        return f"must have at least {least} item{'' if least == 1 else 's'}"
    # Anything else: pydantic's sentence, in the same voice.
    message = detail["msg"].removeprefix("Value error, ")
    message = message.replace("Input should be", "must be", 1)
    return message[:1].lower() + message[1:]
