"""What the MCP tools return: output schemas (pydantic, as the MCP SDK publishes them)
and the short text a model reads first.

Every tool answers twice: ``structuredContent`` matching the tool's output schema, for
hosts and programs, and one text block for the model that leads with what it needs --
exit code (and signal), state, cwd after, duration -- then what to do next, then the
output (cleaned by the server: escape sequences removed, head and tail kept with an
explicit count of what was left out).  The text is made from the structured result
only, so the two never disagree.  Pure: no I/O here.
"""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

__all__ = [
    "CloseResult",
    "CommandResult",
    "EnvironmentResult",
    "InputResult",
    "KillResult",
    "TerminalList",
    "TerminalSummary",
    "Waiting",
    "render_close",
    "render_command",
    "render_environment",
    "render_input",
    "render_kill",
    "render_terminals",
    "tool_result",
]


class Waiting(BaseModel):
    """What a running command waits for, as the registry tells it (docs/waiting.md)."""

    kind: str = Field(
        description="input (a question), password (typed input not shown), fullScreen "
        "(a pager, an editor, a menu: it takes keys) or stoppedJob (stopped with Ctrl-Z)."
    )
    prompt: str | None = Field(description="The question on the screen, for input and password.")
    program: str | None = Field(description="The program reading the terminal.")
    certain: bool = Field(
        description="False where it cannot be seen for sure (ssh, containers): told from "
        "the screen after a longer quiet."
    )
    keys: list[str] | None = Field(
        default=None, description='For fullScreen: the keys that leave it, e.g. ["q"].'
    )


class CommandResult(BaseModel):
    """One command: how it ended, or that it still runs, and its output not yet seen."""

    terminal_id: int = Field(description="The terminal the command runs in.")
    run_id: int | None = Field(description="The registry's id of the command, when known.")
    command: str | None = Field(description="The command line.")
    state: str = Field(
        description="running (still going: follow with wait_for_command), completed, "
        "timedOut, cancelled, failed (its shell died, or it broke a limit), idle (no "
        "command known)."
    )
    waiting_for: Waiting | None = Field(
        default=None,
        description="While running: what the command waits for (answer with write_input "
        "or send_keys); null when it is not waiting.",
    )
    exit_code: int | None = Field(description="The exit code, once ended and known.")
    signal: str | None = Field(description="For exit codes above 128: the signal, e.g. SIGINT.")
    cwd: str | None = Field(description="Where the shell stands now (after the command).")
    duration_seconds: float | None = Field(description="How long the command ran (so far).")
    output: str = Field(
        description="Output not shown before, cleaned for reading; long output keeps its "
        "head and tail with a count of what was left out."
    )
    full_output_path: str | None = Field(
        default=None,
        description="When output was cut and the command has ended: a file with all of "
        "it, to search with grep or read in parts with sed through run_command.",
    )
    limit: str | None = Field(
        default=None, description="The resource limit the command broke (then state failed)."
    )
    note: str | None = Field(default=None, description="Why it ended as it did, if notable.")
    next_step: str | None = Field(default=None, description="What to do next, when anything.")
    task_id: str | None = Field(default=None, description="The task the terminal belongs to.")


class TerminalSummary(BaseModel):
    id: int = Field(description="terminal_id for the other tools.")
    task_id: str | None = Field(description="The task it belongs to; null once released.")
    yours: bool = Field(description="It belongs to this session's task.")
    busy: bool = Field(description="A command is running in it.")
    cwd: str = Field(description="Where its shell stands now.")
    last_command: str | None = Field(description="The running or last command line.")
    shell: str = Field(description="The shell (or, for subprocess terminals, its command).")
    provider: str = Field(description="shell (a real shell in a PTY) or subprocess.")
    integration: str = Field(description="rich (exact exit codes), none or pending.")
    state: str = Field(
        description="idle, running, waitingForInput, waitingForPassword, fullScreen or stoppedJob."
    )
    waiting_for: Waiting | None = Field(default=None, description="What it waits for, if it does.")


class TerminalList(BaseModel):
    task_id: str = Field(description="This session's task.")
    terminals: list[TerminalSummary]


class EnvironmentResult(BaseModel):
    task_id: str = Field(description="The task reported on.")
    markdown: str = Field(description="The report; empty when there is nothing new.")
    terminals: list[TerminalSummary] = Field(description="The terminals the report covers.")


class InputResult(BaseModel):
    terminal_id: int
    sent: str = Field(
        description="What was sent, escaped (\\r is Enter); for a password, only its length."
    )
    busy: bool = Field(description="A command was running in the terminal when it was sent.")
    command: str | None = Field(
        default=None, description="That command, when one was running (else null)."
    )
    next_step: str


class KillResult(BaseModel):
    terminal_id: int
    killed: bool = Field(description="A command was running and was interrupted.")
    result: CommandResult | None = Field(
        description="The interrupted command, when one was running (or how it ended, when "
        "it ended on its own just before the kill reached it: killed is then false)."
    )


class CloseResult(BaseModel):
    terminal_id: int
    closed: bool


def tool_result(text: str, structured: BaseModel) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(type="text", text=text)],
        structured_content=structured.model_dump(mode="json"),
    )


# -- text for the model ---------------------------------------------------------------------


def _seconds(value: float | None) -> str:
    if value is None:
        return ""
    return f"{value:.2f} s" if value < 10 else f"{value:.0f} s"


def headline(r: CommandResult) -> str:
    """``exit code 0 · completed in 0.42 s · cwd /repo · terminal 1``."""
    where = [f"cwd {r.cwd}" if r.cwd else "", f"terminal {r.terminal_id}"]
    if r.state == "running" and r.waiting_for is not None:
        head = [_waiting_headline(r.waiting_for, r.duration_seconds or 0.0)]
    elif r.state == "running":
        ran = r.duration_seconds or 0.0
        head = [f"still running after {_seconds(ran)}" if ran >= 0.5 else "running"]
    elif r.state == "idle":
        head = ["no command running"]
    else:
        code = "exit code " + (str(r.exit_code) if r.exit_code is not None else "unknown")
        if r.signal:
            code += f" ({r.signal})"
        how = {"completed": "completed in", "timedOut": "timed out after"}.get(
            r.state, f"{r.state} after"
        )
        head = [
            code,
            f"{how} {_seconds(r.duration_seconds)}" if r.duration_seconds is not None else r.state,
        ]
    return " · ".join(part for part in (*head, *where) if part)


_WAITS = {
    "input": "waiting for input",
    "password": "waiting for a password",
    "fullScreen": "open full screen",
    "stoppedJob": "a job is stopped",
}


def _waiting_headline(w: Waiting, ran: float) -> str:
    what = _WAITS.get(w.kind, f"waiting ({w.kind})")
    if w.kind == "fullScreen":
        what = f"{w.program or 'a program'} is {what}"
    seems = "" if w.certain else " (it seems)"
    return f"{what}{seems} after {_seconds(ran)}"


def waiting_hint(w: Waiting, terminal_id: int) -> str:
    """What the model should do about a command that waits: the answer loop."""
    then = f"then call wait_for_command with terminal_id {terminal_id}"
    if w.kind in ("input", "password"):
        asked = f" ({w.prompt.strip()!r})" if w.prompt and w.prompt.strip() else ""
        typed = " (it is not shown as typed)" if w.kind == "password" else ""
        return (
            f"The command asks{asked}: answer with write_input{typed}, {then}; "
            "kill_command stops it."
        )
    if w.kind == "fullScreen":
        program = w.program or "A full-screen program"
        keys = f" {json_list(w.keys)}" if w.keys else ' (e.g. ["q"] or ["Escape", ":q", "Enter"])'
        return f"{program} takes keys: leave it with send_keys{keys}, {then}."
    if w.kind == "stoppedJob":
        return (
            "A job was stopped (Ctrl-Z): write_input 'fg' resumes it, kill_command ends "
            f"the command; {then}."
        )
    return f"It waits ({w.kind}): answer with write_input or send_keys, {then}."


def json_list(keys: list[str]) -> str:
    return "[" + ", ".join(f'"{key}"' for key in keys) + "]"


def render_command(
    r: CommandResult, *, output_label: str = "output", show_output: bool = True
) -> str:
    lines = [headline(r)]
    if r.command:
        lines.append(f"command: {r.command}")
    if r.waiting_for is not None and r.waiting_for.prompt:
        lines.append(f"prompt: {r.waiting_for.prompt.rstrip()}")
    if r.note:
        lines.append(f"note: {r.note}")
    if r.next_step:
        lines.append(r.next_step)
    if show_output:
        label = f"{output_label} so far" if r.state == "running" else output_label
        lines.append("")
        lines.append(f"{label}:\n{r.output}" if r.output else f"({label}: none)")
    if r.full_output_path:
        lines.append(f"\n(cut to head and tail; all of it is in {r.full_output_path})")
    return "\n".join(lines)


def render_terminals(result: TerminalList) -> str:
    if not result.terminals:
        return "No terminals yet: run_command opens one."
    lines = [f"{len(result.terminals)} terminal(s); yours are those of task {result.task_id}:"]
    for t in result.terminals:
        plain = "busy" if t.busy else "idle"
        state = plain if t.state in ("idle", "running") else t.state
        if t.waiting_for is not None and t.waiting_for.prompt:
            state += f" ({t.waiting_for.prompt.strip()!r})"
        owner = "yours" if t.yours else (f"task {t.task_id}" if t.task_id else "released")
        last = f" · last: {t.last_command}" if t.last_command else ""
        lines.append(f"- terminal {t.id} · {state} · {owner} · cwd {t.cwd}{last}")
    return "\n".join(lines)


def render_environment(result: EnvironmentResult) -> str:
    if not result.markdown:
        return (
            f"Nothing new: no terminal of task {result.task_id} (or released terminal) "
            "has output you have not seen, and none is running a command."
        )
    return result.markdown


def render_input(result: InputResult) -> str:
    sent = f"Sent {result.sent} to terminal {result.terminal_id}"
    if not result.busy:
        return f"{sent}. {result.next_step}"
    # Said in words, with the command: whether the text answers a command or waits for
    # the shell is what the model needs to know next.
    running = f": {result.command}" if result.command else ""
    return f"{sent} while a command was running there{running}.\n{result.next_step}"


def render_kill(result: KillResult) -> str:
    if result.result is None:
        return f"Terminal {result.terminal_id} has no command running: nothing to kill."
    if not result.killed:
        return "It ended before it could be interrupted. " + render_command(result.result)
    return "Interrupted. " + render_command(result.result)


def render_close(result: CloseResult) -> str:
    return (
        f"Closed terminal {result.terminal_id}: its shell and every process it started have ended."
    )
