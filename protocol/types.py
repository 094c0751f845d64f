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

from typing import Any

import attrs
import cattrs
from lsprotocol.converters import get_converter
from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage

from . import methods
from .strict import OMIT_IF_NONE, RULE, Rule, camel, structure_params, unstructure_fields

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
    "KillParams",
    "Limits",
    "ListParams",
    "OutputParams",
    "OutputResult",
    "ReleaseParams",
    "ReplayParams",
    "ReplayResult",
    "ResizeParams",
    "RunParams",
    "RunResult",
    "SendKeysParams",
    "TerminalIdParams",
    "TerminalInfo",
    "WaitParams",
    "WaitingFor",
    "WriteParams",
    "camel",
    "converter",
    "converter_factory",
    "structure_params",
    "unstructure",
]

# -- requests -------------------------------------------------------------------------

#: Text that reaches a shell, a path or an environment.
_TEXT = Rule(no_nul=True)
#: A command: the shell would run nothing for "" or "   ", and answer with an exit
#: code that means nothing (none for "", 0 for blanks).
_COMMAND = Rule(no_nul=True, not_blank=True)
#: The kernel's window size is two unsigned shorts (struct winsize).
_SIZE = Rule(min=1, max=65535)
#: Durations in ms: not negative; at most ~24.8 days (what a 32-bit int holds).
_MS = Rule(min=0, max=2**31 - 1)
_ENV = Rule(no_nul=True, env_names=True)


_NOT_NEGATIVE = {RULE: Rule(min=0, max=2**31 - 1), OMIT_IF_NONE: True}


@attrs.define
class Limits:
    """A command's resource limits; absent or null: inherited, 0: none."""

    memory_mb: int | None = attrs.field(default=None, metadata=_NOT_NEGATIVE)
    #: At most what the kernel's pid_max can be (2**22).
    pids: int | None = attrs.field(
        default=None, metadata={RULE: Rule(min=0, max=2**22), OMIT_IF_NONE: True}
    )
    cpu_seconds: float | None = attrs.field(default=None, metadata=_NOT_NEGATIVE)
    output_mb: float | None = attrs.field(default=None, metadata=_NOT_NEGATIVE)
    wall_seconds: float | None = attrs.field(default=None, metadata=_NOT_NEGATIVE)


@attrs.define
class AcquireParams:
    cwd: str = attrs.field(metadata={RULE: _TEXT})
    task_id: str | None = None
    provider: str = "shell"
    #: Remote terminals (docs/remote.md): an ssh host (provider ssh) or a container
    #: (provider container); the cwd is then the target's.
    host: str | None = attrs.field(default=None, metadata={RULE: _TEXT})
    container: str | None = attrs.field(default=None, metadata={RULE: _TEXT})
    #: The terminal's own limits from now on (each of its commands gets them).
    limits: Limits | None = None


@attrs.define
class RunParams:
    command: str = attrs.field(metadata={RULE: _COMMAND})
    terminal_id: int | None = None
    cwd: str | None = attrs.field(default=None, metadata={RULE: _TEXT})
    task_id: str | None = None
    provider: str | None = None
    timeout_ms: int | None = attrs.field(default=None, metadata={RULE: _MS})
    env: dict[str, str] | None = attrs.field(default=None, metadata={RULE: _ENV})
    background: bool = False
    work_done_token: int | str | None = None
    #: As in AcquireParams: where the terminal runs when none is given by id.
    host: str | None = attrs.field(default=None, metadata={RULE: _TEXT})
    container: str | None = attrs.field(default=None, metadata={RULE: _TEXT})
    #: This run's limits, over the terminal's and the settings'.
    limits: Limits | None = None
    #: Answer as soon as the command waits for input (``state: "running"`` and
    #: ``waitingFor``); the command goes on.  Off by default: a plain run awaits the end.
    yield_on_input: bool = False


@attrs.define
class WriteParams:
    terminal_id: int
    data: str


@attrs.define
class ResizeParams:
    terminal_id: int
    cols: int = attrs.field(metadata={RULE: _SIZE})
    rows: int = attrs.field(metadata={RULE: _SIZE})


@attrs.define
class TerminalIdParams:
    terminal_id: int


@attrs.define
class KillParams:
    terminal_id: int
    #: Only if this run is the one running (else nothing is killed).
    run_id: int | None = None


@attrs.define
class OutputParams:
    terminal_id: int
    #: Only this run's output (a run of that terminal).
    run_id: int | None = None
    #: Leave it unretrieved.
    peek: bool = False


@attrs.define
class ListParams:
    task_id: str | None = None
    busy: bool | None = None


@attrs.define
class ReplayParams:
    terminal_id: int
    max_bytes: int | None = attrs.field(default=None, metadata={RULE: Rule(min=0)})


@attrs.define
class ReleaseParams:
    task_id: str


@attrs.define
class WaitParams:
    """``terminal/wait``: one of ``run_id`` and ``terminal_id`` (its current run, else
    its last)."""

    run_id: int | None = None
    terminal_id: int | None = None
    timeout_ms: int | None = attrs.field(default=None, metadata={RULE: _MS})
    #: Answer at the next wait for input too (the answer loop); false: the end only.
    yield_on_input: bool = True


@attrs.define
class SendKeysParams:
    terminal_id: int
    #: Named keys (``Enter``, ``C-c``, ``Escape``, ``Up``...) or literal text (``:q!``).
    keys: list[str]


@attrs.define
class EnvironmentDetailsParams:
    task_id: str | None = None
    cooldown_timeout_ms: int | None = attrs.field(default=None, metadata={RULE: _MS})
    #: Report without marking anything retrieved (a person looking, not the agent).
    peek: bool = False


# -- results ----------------------------------------------------------------------------


@attrs.define
class WaitingFor:
    """What a terminal's command waits for (docs/waiting.md)."""

    #: ``input``, ``password``, ``fullScreen`` or ``stoppedJob``.
    kind: str
    #: The question on the screen's cursor row (input, password); else None.
    prompt: str | None
    #: The program concerned (``read`` is the shell's: ``bash``).
    program: str | None
    #: ``certain``, or ``possibly`` where the kernel cannot show it (ssh, docker exec,
    #: a program whose other thread is busy): said after a longer quiet, from the screen.
    certainty: str = "certain"
    #: Full screen: the named keys that leave it (``["q"]``), when known.
    keys: list[str] | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})


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
    #: Remote terminals only (left off the wire otherwise): where the shell runs;
    #: ``cwd`` is then a path there.
    host: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    container: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: Added: the terminal's own limits (left off when it has none).
    limits: Limits | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: Added: how each limit is enforced here: "cgroup", "rlimit", "server", "none".
    limits_by: dict[str, str] | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: ``idle``, ``running``, ``waitingForInput``, ``waitingForPassword``,
    #: ``fullScreen`` or ``stoppedJob``.
    state: str = "idle"
    #: Set in the four waiting states.
    waiting_for: WaitingFor | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})


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
    stdout: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    stderr: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: Added field: why the run ended as it did (fallbacks, heuristics, failures).
    note: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: Added: the limit the run hit ("memoryMb", "pids", ...; then state "failed").
    limit: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: Added field: a run still going whose terminal waits (yieldOnInput, terminal/wait).
    waiting_for: WaitingFor | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})
    #: Added field: when ``output`` was cut, a file with all of it (cleaned).
    full_output_path: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})


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
    missed: int | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})


@attrs.define
class DidEndRunParams:
    terminal_id: int
    run_id: int
    state: str
    exit_code: int | None
    #: Added: the limit the run hit, if it hit one.
    limit: str | None = attrs.field(default=None, metadata={OMIT_IF_NONE: True})


# -- the table ------------------------------------------------------------------------------

#: Each request's params type and result type (None: the result is ``null``).
REQUESTS: dict[str, tuple[type, Any]] = {
    methods.ACQUIRE: (AcquireParams, TerminalInfo),
    methods.RUN: (RunParams, RunResult),
    methods.WRITE: (WriteParams, None),
    methods.RESIZE: (ResizeParams, None),
    methods.KILL: (KillParams, None),
    methods.CLOSE: (TerminalIdParams, None),
    methods.LIST: (ListParams, list[TerminalInfo]),
    methods.OUTPUT: (OutputParams, OutputResult),
    methods.GET: (TerminalIdParams, TerminalInfo),
    methods.REPLAY: (ReplayParams, ReplayResult),
    methods.RELEASE: (ReleaseParams, None),
    methods.ENVIRONMENT_DETAILS: (EnvironmentDetailsParams, EnvironmentDetailsResult),
    methods.WAIT: (WaitParams, RunResult),
    methods.SEND_KEYS: (SendKeysParams, None),
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


_OUR_TYPES = frozenset(
    {
        *(params for params, _result in REQUESTS.values()),
        *(result for _params, result in REQUESTS.values() if attrs.has(result)),
        TerminalInfo,
        Limits,
        WaitingFor,
        *NOTIFICATIONS.values(),
    }
)


def _unstructure_ours(obj: Any) -> dict[str, Any]:
    return unstructure_fields(obj, converter.unstructure)


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
