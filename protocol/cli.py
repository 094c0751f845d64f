"""The ``terminal-registry`` command line.

``run`` starts a real shell in a real PTY (with our shell integration) through a
terminal registry, runs one command in it with its output streamed live, then
prints the exit code, the working directory the command left the shell in, and the
environment-details report an agent would show its model.  The CLI exits with the
command's exit code.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence

from registry.config import Settings
from registry.errors import TerminalRegistryError
from registry.registry import PROVIDERS, RegistryListener, TerminalRegistry
from registry.run import RunState, TerminalRun
from registry.terminals.base import Terminal


class _StreamOutput(RegistryListener):
    """Copies a run's raw output to our stdout as it arrives."""

    def __init__(self) -> None:
        self._out = sys.stdout.buffer

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        if run is not None:
            self._out.write(data)
            self._out.flush()


def _exit_status(run: TerminalRun) -> int:
    if run.exit_code is not None:
        return run.exit_code & 0xFF
    return 0 if run.state is RunState.COMPLETED else 1


async def _run(args: argparse.Namespace) -> int:
    settings = Settings()
    if args.shell:
        settings.default_shell = args.shell
    registry = TerminalRegistry(settings)
    try:
        registry.subscribe(_StreamOutput())
        # Started in the background and then awaited, so that the report below shows
        # the run the way an agent's model would see it.
        run = await registry.run(
            args.command,
            cwd=args.cwd,
            task_id=args.task,
            provider=args.provider,
            timeout=args.timeout,
            background=True,
        )
        await run.wait()
        terminal = registry.get(run.terminal_id)
        if run.output and not run.output.endswith(b"\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
        summary = [
            f"exit code: {run.exit_code if run.exit_code is not None else 'unknown'}",
            f"state: {run.state.value}",
            f"cwd: {run.cwd}",
            f"terminal: {terminal.id} ({terminal.provider}, {terminal.shell}, "
            f"{terminal.integration.value} integration)",
            f"duration: {run.duration * 1000:.0f} ms",
        ]
        if run.signal:
            summary.insert(1, f"signal: {run.signal}")
        if run.note:
            summary.append(f"note: {run.note}")
        print("\n".join(f"[terminal-registry] {line}" for line in summary), file=sys.stderr)
        report = await registry.environment_details(args.task, cooldown_timeout=0)
        print("[terminal-registry] environment details:", file=sys.stderr)
        print(report.markdown or "(no terminal has output not yet seen)", file=sys.stderr)
        return _exit_status(run)
    finally:
        await registry.close()


def _serve(args: argparse.Namespace) -> int:
    import logging

    from .server import RegistryServer

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    if not args.stdio and not args.socket:
        print("terminal-registry serve: give --stdio, --socket PATH or both", file=sys.stderr)
        return 2

    async def serve() -> int:
        return await RegistryServer().run(stdio=args.stdio, socket_path=args.socket)

    return asyncio.run(serve())


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="terminal-registry",
        description="Own real shells in real PTYs for editors and agents.",
    )
    commands = parser.add_subparsers(dest="subcommand", required=True)
    serve = commands.add_parser("serve", help="serve the registry over JSON-RPC")
    serve.add_argument("--stdio", action="store_true", help="serve one client on stdin/stdout")
    serve.add_argument("--socket", help="serve any number of clients on this Unix socket")
    serve.add_argument("--log-level", default="WARNING")
    run = commands.add_parser(
        "run",
        help="run a command in a real terminal and report exit code and cwd",
        description="Run COMMAND in a shell terminal; output streams live, then the "
        "exit code and cwd are printed. Exits with the command's exit code.",
    )
    run.add_argument("--cwd", default=os.getcwd(), help="directory to start in")
    run.add_argument("--shell", help="shell to use (default: $SHELL, else bash)")
    run.add_argument("--task", help="task id the terminal is bound to")
    run.add_argument("--provider", choices=PROVIDERS, default="shell")
    run.add_argument("--timeout", type=float, help="seconds before the command is ended")
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.subcommand == "serve":
        return _serve(args)
    if args.subcommand == "run":
        words = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not words:
            _parser().error("run needs a command after --")
        args.command = " ".join(words)
        try:
            return asyncio.run(_run(args))
        except TerminalRegistryError as error:
            print(f"terminal-registry: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
