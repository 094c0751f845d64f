"""What a model reads before it calls a tool: the server's instructions, and each tool's
title and description (``{timeout}`` is the call bound, filled in at start).

Written for a model: what the tool does, what it returns, and which tool comes next.
The argument schemas are with the tools (:mod:`protocol.mcp_tools`), the text of the
results with the results (:mod:`protocol.mcp_results`).
"""

from __future__ import annotations

__all__ = ["DESCRIPTIONS", "INSTRUCTIONS"]

INSTRUCTIONS = (
    "These tools run commands in real, persistent shells (bash, zsh or fish in a PTY) owned "
    "by terminal-registry, which a person can watch live in VS Code or with "
    "`terminal-registry list`; terminals outlive this session. Your terminals belong to "
    "this session's task (pass task_id only to share another's), and run_command reuses an "
    "idle terminal of the task standing in the requested cwd, so omit cwd to continue where "
    "your previous command left the shell (a `cd` carries over) or give an absolute path. "
    "A call returns after at most {timeout:g} s, or as soon as the command waits for input "
    "(waiting_for says what: a question, a password, a full-screen program's keys): the "
    "command keeps running with nothing lost, and write_input, send_keys, "
    "wait_for_command, read_output and kill_command follow it by its terminal_id."
)

#: tool name -> (title, description).
DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "run_command": (
        "Run a shell command",
        "Run a shell command in a real, persistent terminal and get its exit code, the "
        "directory the shell stands in afterwards, how long it took and its output (long "
        "output keeps its head and tail). A command goes to an idle terminal of your task "
        "standing in cwd, so `cd`, exported variables and activated environments carry "
        "over between calls. The call returns after at most {timeout:g} s: a longer "
        'command keeps running and you get its output so far with state "running"; '
        "then call wait_for_command. It also returns as soon as the command waits for "
        "input (a [y/N] question, a password, a pager or editor), with waiting_for saying "
        "what and how to answer (write_input or send_keys). Use background for servers "
        "and watchers. One command at a time per terminal; commands in different "
        "terminals run in parallel.",
    ),
    "wait_for_command": (
        "Wait for a running command",
        "Wait for the command running in a terminal to end; get its exit code, cwd after "
        "and the output you have not seen yet. Returns after at most {timeout:g} s with "
        'state "running" and the output so far if it is still going: call it again to '
        "keep waiting. Returns at once when the command waits for input (waiting_for: "
        "the question, or the keys that leave a full-screen program), not on the question "
        "just answered. On a terminal whose command already ended, returns that end.",
    ),
    "write_input": (
        "Type into a terminal",
        "Type text into a terminal as a person would: answers a prompt of the running "
        "command such as [Y/n], Password: or Name:. Enter is pressed after it unless "
        "press_enter is false. Then call wait_for_command to see what the command did "
        "with it. For Ctrl-C, arrows, Escape or q in a pager use send_keys.",
    ),
    "send_keys": (
        "Press keys in a terminal",
        'Press keys in a terminal, in order: named keys and plain text, e.g. ["q"] to '
        'leave a pager, ["C-c"] to interrupt, ["Escape", ":q!", "Enter"] to quit '
        'vim, ["Down", "Enter"] in a menu. Then call wait_for_command or read_output.',
    ),
    "read_output": (
        "Read a terminal's new output",
        "Get the output of a terminal you have not seen yet (a running command's "
        "complete lines so far, or an ended command's output) with its state and cwd. "
        "Does not wait: wait_for_command does.",
    ),
    "list_terminals": (
        "List terminals",
        "List the terminals: id, state (idle, busy, or waiting for input and for what), "
        "cwd, last command, and the task each "
        "belongs to (yours are marked). Includes those of other sessions and of people "
        "using the CLI or VS Code.",
    ),
    "kill_command": (
        "Stop a running command",
        "Interrupt the command running in a terminal: Ctrl-C, then SIGTERM and SIGKILL to "
        "its whole process tree. The terminal stays open for the next command. Returns "
        "how the command ended and its remaining output.",
    ),
    "close_terminal": (
        "Close a terminal",
        "Close a terminal: its shell and every process started in it end, background jobs "
        "included. Idle terminals are otherwise kept for reuse.",
    ),
    "environment_details": (
        "What your terminals did",
        "Report what your terminals did that you have not seen: commands still running, "
        "and ended background commands with exit codes and new output; terminals an "
        "earlier session released are included. Call it after background work or at the "
        "start of a session. Waits up to 5 s for terminals still printing to settle.",
    ),
}
