"""The subprocess provider: no PTY, one child process per command.

Each command runs as ``<shell> -c`` in the terminal's cwd with stdin at end-of-file
and no controlling terminal (a new session), so ``vim``, ``less`` or a password
prompt fail fast instead of hanging.  stdout and stderr are read separately, and
merged in arrival order; the exit code is the process's own.

Unlike a plain ``subprocess.run`` wrapper, the terminal stays *live*: an EXIT trap
writes the command's final directory and exported environment to a state file of
the terminal's (a side channel: nothing is parsed out of the output), so ``cd`` and
``export`` in one command carry over to the next.

Timeout or cancel ends the command's process group with SIGTERM, then SIGKILL after
a grace period, including children that escaped into their own session: every
process a command starts inherits a per-run tag in its environment, by which psutil
finds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping

from ..config import Settings
from ..errors import SpawnError, TerminalClosedError
from ..limits import Limits, rlimit_preexec
from ..processes import end_processes, process_tree, tagged_processes
from ..run import RunState, TerminalRun
from ..shell import write_private
from ..shell.syntax import LONG_COMMAND_BYTES, source_line
from .base import IntegrationState, Terminal, existing_directory
from .children import (
    NOWHERE,
    RUN_TAG_VARIABLE,
    TERMINAL_TAG_VARIABLE,
    Placement,
    agent_environment,
    new_tag,
)

__all__ = ["RUN_TAG_VARIABLE", "SubprocessTerminal"]

# The command runs through eval, so a syntax error is the command's failure (exit 2)
# and the EXIT trap still reports where the shell stands.  $1 is the command line,
# $2 the state file.
_WRAPPER = (
    'trap \'__tr_status=$?; { builtin printf "%s\\0" "$PWD"; env -0; } '
    '>"$__tr_state" 2>/dev/null; exit $__tr_status\' EXIT\n'
    "__tr_state=$2\n"
    'eval "$1"\n'
)
#: Variables a shell sets for itself; their changes never carry over.
_SHELL_OWN = frozenset({"PWD", "OLDPWD", "SHLVL", "_", "__tr_state", "__tr_status"})
_STDIN_NOTE = "stdin is at end-of-file here: programs that wait for input get none"


def _remove(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def _posix_shell(preferred: str) -> str:
    """A POSIX shell for ``-c``: the preferred one if it is one, else bash, else sh."""
    name = os.path.basename(preferred)
    if name in ("bash", "zsh", "sh", "dash", "ksh") and shutil.which(preferred):
        return shutil.which(preferred) or preferred
    return shutil.which("bash") or "/bin/sh"


class SubprocessTerminal(Terminal):
    """A terminal whose commands are child processes of the server."""

    provider = "subprocess"

    def __init__(
        self,
        terminal_id: int,
        cwd: str,
        settings: Settings,
        shell: str,
        env: dict[str, str],
        placement: Placement = NOWHERE,
    ) -> None:
        super().__init__(terminal_id, cwd, settings.replay_cap)
        self._settings = settings
        self._shell = shell
        self._env = env
        self._placement = placement
        self._env.update(placement.env)
        self._tag = new_tag(terminal_id)
        self._env[TERMINAL_TAG_VARIABLE] = self._tag
        self._state_dir = tempfile.mkdtemp(prefix="terminal-registry-sub-")
        self._transport: asyncio.SubprocessTransport | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @classmethod
    async def create(
        cls,
        terminal_id: int,
        cwd: str,
        settings: Settings | None = None,
        *,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        placement: Placement = NOWHERE,
    ) -> SubprocessTerminal:
        settings = settings or Settings()
        cwd = existing_directory(cwd)
        # No PTY: programs must not draw for a terminal that is not there.
        base = agent_environment({**os.environ, **(env or {})}, term="dumb")
        shell = _posix_shell(shell or settings.default_shell)
        return cls(terminal_id, cwd, settings, shell, base, placement)

    # -- reported state -----------------------------------------------------------

    @property
    def shell(self) -> str:
        return self._shell

    @property
    def pid(self) -> int | None:
        """The running command's process, if one runs."""
        return self._transport.get_pid() if self._transport is not None else None

    @property
    def tag(self) -> str:
        return self._tag

    @property
    def scratch(self) -> str | None:
        return self._state_dir

    @property
    def integration(self) -> IntegrationState:
        # Boundaries and exit codes are exact: the process is the command.
        return IntegrationState.RICH

    @property
    def environment(self) -> dict[str, str]:
        """The environment the next command starts with (exports carry over)."""
        return dict(self._env)

    # -- commands -----------------------------------------------------------------

    async def start(
        self,
        command: str,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        *,
        limits: Limits | None = None,
    ) -> TerminalRun:
        self._check_can_start()
        run = TerminalRun(self.id, command, self._settings.run_output_cap, separate_streams=True)
        run.note = _STDIN_NOTE
        state_file = os.path.join(self._state_dir, f"run-{run.id}")
        run_env = {**self._env, **(env or {}), RUN_TAG_VARIABLE: f"{self._tag}.{run.id}"}
        argument = command
        if len(command.encode("utf-8", "surrogateescape")) > LONG_COMMAND_BYTES:
            # Too long for one argument: the wrapper sources it from a private file.
            argument = source_line(None, f"{state_file}.command")
            write_private(f"{state_file}.command", command)
            run.add_done_callback(lambda: _remove(f"{state_file}.command"))
        self._begin_run(run)
        guard = self._watch_limits(run, limits)
        placed = self._placement.preexec()
        limited = rlimit_preexec(guard.limits, self._placement.cgroup) if guard else None

        def preexec() -> None:
            placed()
            if limited is not None:
                limited()

        loop = asyncio.get_running_loop()
        spawn = asyncio.ensure_future(
            loop.subprocess_exec(
                lambda: _CommandProtocol(self, run),
                self._shell,
                "-c",
                _WRAPPER,
                "terminal-registry",
                argument,
                state_file,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=self._cwd,
                env=run_env,
                start_new_session=True,
                preexec_fn=preexec,
            )
        )
        cancelled = False
        try:
            # Shielded: asyncio's own clean-up of a cancelled spawn kills the shell
            # only, then waits for its pipes to close -- which the command's children
            # hold open for as long as they run, so the request was never answered
            # and the command ran on.  A spawn the caller gave up on completes, and
            # what it started is ended as a cancelled run is.
            transport, protocol = await asyncio.shield(spawn)
        except asyncio.CancelledError:
            cancelled = True
            with contextlib.suppress(OSError):
                transport, protocol = await spawn
        except OSError as error:
            run.finish(RunState.FAILED, note=f"cannot start {self._shell!r}: {error}")
            self._end_run(run)
            raise SpawnError(f"cannot start {self._shell!r}: {error}") from error
        if cancelled:
            if spawn.exception() is None:
                self._transport = transport
                run.mark_started()
                self._spawn_supervisor(run, protocol, state_file, None, env)
                await asyncio.shield(self.kill())
            if not run.done:
                run.finish(RunState.CANCELLED, note="cancelled while the command was starting")
                self._end_run(run)
            raise asyncio.CancelledError
        self._transport = transport
        run.mark_started()
        timeout = timeout if timeout is not None else self._settings.command_timeout
        self._spawn_supervisor(run, protocol, state_file, timeout, env)
        return run

    def _spawn_supervisor(
        self,
        run: TerminalRun,
        protocol: _CommandProtocol,
        state_file: str,
        timeout: float | None,
        env: Mapping[str, str] | None,
    ) -> None:
        task = asyncio.ensure_future(self._supervise(run, protocol, state_file, timeout, env))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _supervise(
        self,
        run: TerminalRun,
        protocol: _CommandProtocol,
        state_file: str,
        timeout: float | None,
        run_env: Mapping[str, str] | None,
    ) -> None:
        try:
            await asyncio.wait_for(asyncio.shield(protocol.exited), timeout)
        except TimeoutError:
            self._end_as(RunState.TIMED_OUT)
            await self._end_command(run, protocol.pid)
        # Gone (pidfd said so); the exit status arrives through the child watcher.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.exited), self._settings.kill_grace)
        # Output written before the exit is still in the pipes: read to end-of-file.
        # A background child that keeps them open is not waited for: what it writes
        # later reaches the terminal's listeners, outside this run.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(
                asyncio.shield(protocol.drained), self._settings.output_drain_timeout
            )
        self._apply_state(state_file, run_env)
        self._transport = None
        protocol.detach()
        code = protocol.returncode
        # asyncio reports a death by signal N as -N; a shell reports it as 128 + N
        # (130 for SIGINT), which is what run.signal and every other provider use.
        exit_code = 128 - code if code is not None and code < 0 else code
        run.finish(self._ending_or(RunState.COMPLETED), exit_code=exit_code, cwd=self._cwd)
        self._end_run(run)

    def _command_output(self, run: TerminalRun | None, stream: str, data: bytes) -> None:
        if run is not None and not run.done:
            run.append_stream(stream, data)
            self._output(data, run)
        else:
            # A background child of an ended command: output between runs.
            self._output(data, None, idle=True)

    def _apply_state(self, state_file: str, run_env: Mapping[str, str] | None) -> None:
        """Take the command's final cwd and exported environment from its state file."""
        try:
            with open(state_file, "rb") as f:
                fields = f.read().split(b"\0")
            os.unlink(state_file)
        except OSError:
            return  # exec'd away, or killed before the trap ran: nothing changes
        cwd = os.fsdecode(fields[0]) if fields and fields[0] else None
        if cwd and os.path.isdir(cwd):
            self._set_cwd(cwd)
        exported: dict[str, str] = {}
        for item in fields[1:]:
            key, sep, value = os.fsdecode(item).partition("=")
            if sep and key not in _SHELL_OWN:
                exported[key] = value
        if not exported:
            return
        before = {**self._env, **(run_env or {})}
        for key, value in exported.items():
            if before.get(key) != value and key != RUN_TAG_VARIABLE:
                self._env[key] = value
        for key in list(self._env):
            if key not in exported and key != TERMINAL_TAG_VARIABLE:
                del self._env[key]

    async def _end_command(self, run: TerminalRun, pid: int) -> None:
        """SIGTERM, grace, SIGKILL: the process group, its tree and escaped children."""
        procs = process_tree(pid, RUN_TAG_VARIABLE, f"{self._tag}.{run.id}")
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGTERM)
        await end_processes(procs, self._settings.kill_grace)
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)

    async def _end_for_limit(self, run: TerminalRun) -> None:
        """It broke a limit: SIGKILL at once, its tree, group and what joined the
        terminal's cgroup since it started; the supervisor then ends the run."""
        transport = self._transport
        if transport is None:
            return
        pid = transport.get_pid()
        self._kill_run_group(run, set())
        procs = process_tree(pid, RUN_TAG_VARIABLE, f"{self._tag}.{run.id}")
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
        await end_processes(procs, 0.0, signals=())

    async def write(self, data: str | bytes) -> None:
        raise TerminalClosedError(
            f"terminal {self.id} is a subprocess terminal: its commands have no stdin"
        )

    def resize(self, cols: int, rows: int) -> None:
        """Nothing to resize: there is no PTY."""

    async def kill(self) -> None:
        run = self.current_run
        transport = self._transport
        if run is None or transport is None:
            return
        self._end_as(RunState.CANCELLED)
        await self._end_command(run, transport.get_pid())
        await run.wait()

    async def close(self) -> None:
        if self._closed:
            return
        await self.kill()
        leftovers = tagged_processes(TERMINAL_TAG_VARIABLE, self._tag)
        if leftovers:
            await end_processes(leftovers, self._settings.kill_grace)
        await self._end_group(self._settings.kill_grace)
        for task in list(self._tasks):
            task.cancel()
        shutil.rmtree(self._state_dir, ignore_errors=True)
        self._mark_closed()


class _CommandProtocol(asyncio.SubprocessProtocol):
    """One command's pipes and exit, delivered as they happen.

    asyncio's high-level ``Process.wait()`` returns only once every pipe has closed,
    so a background child holding stdout would hold the run open; ``process_exited``
    is the exit itself.
    """

    def __init__(self, terminal: SubprocessTerminal, run: TerminalRun) -> None:
        loop = asyncio.get_running_loop()
        self._terminal = terminal
        self._run: TerminalRun | None = run
        self._transport: asyncio.SubprocessTransport | None = None
        self._open_pipes = {1, 2}
        self.exited: asyncio.Future[None] = loop.create_future()
        self.drained: asyncio.Future[None] = loop.create_future()
        self.returncode: int | None = None
        self.pid = -1

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.SubprocessTransport)
        self._transport = transport
        self.pid = transport.get_pid()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self._terminal._command_output(self._run, "stdout" if fd == 1 else "stderr", data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open_pipes.discard(fd)
        if not self._open_pipes and not self.drained.done():
            self.drained.set_result(None)

    def process_exited(self) -> None:
        if self._transport is not None:
            self.returncode = self._transport.get_returncode()
        if not self.exited.done():
            self.exited.set_result(None)

    def detach(self) -> None:
        """The run is over: later output belongs to the terminal, not to it."""
        self._run = None
