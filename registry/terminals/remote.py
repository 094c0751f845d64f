"""Remote shells: our integrated shell on another machine or in a container, driven
through a local PTY.

The local PTY runs a client -- ``ssh -tt`` (:mod:`~registry.terminals.ssh`),
``podman exec -it`` (:mod:`~registry.terminals.container`) -- whose command on the
target is our bootstrap (:mod:`registry.shell.remote`).  The markers come back
through the client unchanged, so :class:`RemoteShellTerminal` is a
:class:`~registry.terminals.shell.ShellTerminal` (phases, submission, Ctrl-C,
multi-line, forged markers ignored) with what differs when the shell is elsewhere:

* start-up: the bootstrap asks for the nonce with an unsigned ``P;NonceWanted``
  (honoured once, before anything else was reported) and answers with a signed
  ``P;Remote=<pid>;...`` (where the shell stands, its scratch directory) or
  ``P;RemoteFailed=<why>``; :meth:`RemoteShellTerminal.open` returns after it;
* the processes are on the target: locally the PTY's foreground job is the client
  itself, so a command is stopped with Ctrl-C through the PTY, then SIGTERM and
  SIGKILL to the remote foreground process group over the provider's control
  channel; closing sweeps the target for every process carrying the terminal's tag
  and removes the scratch directory;
* the connection can drop: the run in flight fails with "connection to HOST lost",
  and :attr:`lost` says so, for the registry to open a new terminal next time.

A provider gives each terminal a :class:`~registry.terminals.channel.RemoteChannel`:
how to start the client, how to run a control command on the target, what to call
the target.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import os
import secrets
from collections.abc import Mapping
from typing import Self

from ..config import Settings
from ..errors import InvalidCwdError, SpawnError
from ..limits import NO_LIMITS, Limits, RunLimits
from ..markers import Marker
from ..output import strip_escape_sequences
from ..run import RunState, TerminalRun
from ..shell import ShellLaunch
from ..shell.remote import (
    NONCE_WANTED,
    SIGNAL_FOREGROUND,
    SWEEP,
    RemoteReport,
    bootstrap_script,
    control_command,
    nonce_reply,
    parse_report,
    posix_command,
)
from ..waiting import Rules, WaitState, WatchSettings
from .channel import RemoteChannel, RemoteTarget
from .children import NOWHERE, TERMINAL_TAG_VARIABLE, Placement, agent_environment, new_tag
from .paths import remote_path_key
from .phases import Phase
from .pty import AsyncPty, spawn_child
from .shell import ShellTerminal

__all__ = ["RemoteShellTerminal"]

log = logging.getLogger(__name__)

#: What the bootstrap's failures mean, for the error a caller gets.
_CWD_FAILURES = {
    "cwd-missing": "does not exist",
    "cwd-not-directory": "is not a directory",
    "cwd-denied": "cannot be entered",
}


#: Limits the server cannot enforce on a target (wire name by field).
_TARGET_LIMITS = {"memory_mb": "memoryMb", "pids": "pids", "cpu_seconds": "cpuSeconds"}
_SERVER_LIMITS = {"outputMb": "server", "wallSeconds": "server"}


def _server_only(limits: Limits) -> Limits:
    """``limits`` without those that would bound the local client, not the command."""
    return dataclasses.replace(limits, **dict.fromkeys(_TARGET_LIMITS))


class RemoteShellTerminal(ShellTerminal):
    """A shell on a target, in a local PTY running the provider's client."""

    #: The kernel here sees only the client relaying the target (registry/waiting).
    _watch_settings = WatchSettings(rules=Rules(relayed=True))

    def __init__(
        self,
        terminal_id: int,
        cwd: str,
        settings: Settings,
        launch: ShellLaunch,
        nonce: str,
        tag: str,
        pty: AsyncPty,
        channel: RemoteChannel,
    ) -> None:
        super().__init__(terminal_id, cwd, settings, launch, nonce, tag, pty)
        self._channel = channel
        self._remote_nonce = nonce
        self._nonce_sent = False
        self._report: RemoteReport | None = None
        self._handshake: asyncio.Future[RemoteReport] = self._loop.create_future()
        self._closing = False
        #: The sweep of the target (one per terminal; close and the EOF share it).
        self._sweeping: asyncio.Task[None] | None = None
        self._lost: str | None = None

    #: What the provider needs to be given, named in the error when it is missing.
    _needs = "a target"

    @classmethod
    async def _resolve(cls, target: str, settings: Settings) -> RemoteTarget:
        """The provider's target, resolved: each remote provider says how."""
        raise NotImplementedError

    @classmethod
    async def _target(cls, target: str | None, settings: Settings) -> RemoteTarget:
        if not target:
            raise ValueError(f"the {cls.provider} provider needs {cls._needs}")
        return await cls._resolve(target, settings)

    @classmethod
    async def locate(cls, cwd: str, target: str | None, settings: Settings) -> tuple[str, str]:
        resolved = await cls._target(target, settings)
        return (resolved.key, remote_path_key(cwd, resolved.home))

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
        target: str | None = None,
        integration: bool = True,
    ) -> Self:
        """Open a channel to ``target``, start the client in it, hand the bootstrap
        its nonce, and return once the shell is about to start on the target.  The
        channel's session is the terminal's from here on (released when its client
        ends).

        Raises :class:`InvalidCwdError` when ``cwd`` is not a directory on the target
        and :class:`SpawnError` when the terminal cannot be started there.
        """
        settings = settings or Settings()
        channel = await (await cls._target(target, settings)).channel(settings, placement)
        nonce = secrets.token_hex(16)
        tag = new_tag(terminal_id)
        script = bootstrap_script(
            tag=tag,
            cwd=cwd,
            shell=shell,
            login=settings.login_shell,
            env=env,
            integration=integration,
        )
        argv = channel.client_argv(posix_command(script))
        # The client is placed as a local shell would be (the server's tag, the
        # terminal's cgroup): it ends with the terminal, and with the server however
        # the server ends -- and with it the session on the target.
        local_env = agent_environment(os.environ, term="xterm-256color")
        local_env.update(placement.env)
        local_env[TERMINAL_TAG_VARIABLE] = tag
        launch = ShellLaunch(shell or "", argv, local_env, None, integrated=True)
        try:
            child = spawn_child(
                argv,
                env=local_env,
                cwd=os.path.expanduser("~") if os.path.isdir(os.path.expanduser("~")) else "/",
                rows=settings.rows,
                cols=settings.cols,
                preexec_fn=placement.preexec(),
            )
        except OSError as error:
            await channel.release()
            raise SpawnError(f"cannot start {argv[0]!r} for {channel.name}: {error}") from error
        pty = AsyncPty(child)
        terminal = cls(terminal_id, cwd, settings, launch, nonce, tag, pty, channel)
        terminal._placement = placement
        pty.start_reading(terminal._on_data, terminal._on_eof)
        try:
            report = await asyncio.wait_for(
                asyncio.shield(terminal._handshake), settings.remote_start_timeout
            )
        except BaseException as error:
            await asyncio.shield(terminal.close())
            if isinstance(error, TimeoutError):
                raise SpawnError(
                    f"no shell came up on {channel.name} within "
                    f"{settings.remote_start_timeout:g} s: {terminal._screen_tail()}"
                ) from None
            raise
        terminal._started(report)
        return terminal

    def _started(self, report: RemoteReport) -> None:
        if b"Session open refused by peer" in self.replay():
            # More sessions than the server allows: the client made a connection of
            # its own instead (which works); the channel learns the real limit.
            self._channel.refused()
        self._channel.learned(report)
        if report.shell:
            self._launch.shell = report.shell
        self._set_cwd(report.cwd or self._cwd)
        if report.kind == "none":
            # A shell we have no integration for: heuristics from the first prompt.
            self.give_up_integration()
        else:
            self._spawn_task(self._detect_integration())

    def _screen_tail(self) -> str:
        text = strip_escape_sequences(self.replay().decode("utf-8", "replace"))
        return " ".join(text.split())[-500:] or "(no output)"

    # -- where it runs --------------------------------------------------------------

    @property
    def target(self) -> str | None:
        return self._channel.spec

    def location(self) -> tuple[str, str]:
        return (self._channel.key, remote_path_key(self._cwd, None))

    @property
    def display_cwd(self) -> str:
        return self._channel.location(self._cwd)

    @property
    def remote_pid(self) -> int | None:
        """The shell's process id on the target (known once it reported)."""
        return self._report.pid if self._report is not None else None

    @property
    def lost(self) -> str | None:
        return self._lost

    # -- start-up markers -------------------------------------------------------------

    def _on_marker(self, marker: Marker) -> None:
        if marker.family == "633" and marker.code == "P" and self._report is None:
            if not marker.verified and marker.args[:1] == (NONCE_WANTED,):
                if not self._nonce_sent:
                    self._nonce_sent = True
                    self._write(nonce_reply(self._remote_nonce))
                return
            report = parse_report(marker.args) if marker.verified else None
            if report is not None:
                self._on_report(report)
                return
        super()._on_marker(marker)

    def _on_report(self, report: RemoteReport) -> None:
        if self._handshake.done():
            return
        if report.failure is None:
            self._report = report
            self._handshake.set_result(report)
            return
        reason = _CWD_FAILURES.get(report.failure)
        error: Exception
        if reason is not None:
            error = InvalidCwdError(self._cwd, f"{reason} on {self._channel.name}")
        else:
            error = SpawnError(f"cannot start a shell on {self._channel.name}: {report.failure}")
        self._handshake.set_exception(error)

    # -- stopping a command on the target -----------------------------------------------

    async def _control(self, script: str, *args: str) -> tuple[int | None, str]:
        command = control_command(script, *args)
        try:
            return await self._channel.control(command, self._settings.remote_control_timeout)
        except OSError as error:
            log.warning("terminal %s: control command failed: %s", self.id, error)
            return (None, "")

    async def _signal_foreground(self, signal_name: str) -> str:
        """Signal the target's foreground job: ``sent``, ``shell`` (the shell itself is
        in the foreground), ``gone`` or ``failed``."""
        if self._report is None:
            return "failed"
        status, out = await self._control(SIGNAL_FOREGROUND, str(self._report.pid), signal_name)
        words = out.split()
        return words[0] if status == 0 and words else "failed"

    async def _ended_within(self, run: TerminalRun, seconds: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(run.wait(), seconds)
        return run.done

    async def _interrupt(self, run: TerminalRun, state: RunState) -> None:
        """Ctrl-C through the PTY (the target's tty signals its foreground job), then
        SIGTERM and SIGKILL to that job over the control channel, grace apart."""
        if run.done or self.current_run is not run:
            return
        self._end_as(state)
        grace = self._settings.kill_grace
        if not run.started and self._guess is None:
            self._abandon_input(state, "ended before the command started", keep_screen=False)
            return
        self._write(b"\x03")
        if await self._ended_within(run, grace):
            return
        for signal_name in ("TERM", "KILL"):
            answer = await self._signal_foreground(signal_name)
            if answer == "shell":
                # The shell runs it itself (a builtin loop): only SIGINT reaches it
                # without ending the shell. Ask again and give it longer.
                self._write(b"\x03")
                if await self._ended_within(run, 3 * grace):
                    return
                break
            if await self._ended_within(run, grace):
                return
        if not run.done:
            log.warning("terminal %s: shell did not return after kill; closing", self.id)
            self._finish_current(state, note="the shell did not return to a prompt")
            await self.close()

    def _no_start(self, run: TerminalRun) -> None:
        """No C and no prompt after submitting: ask the target whether a job runs."""
        self._spawn_task(self._decide_no_start(run))

    async def _decide_no_start(self, run: TerminalRun) -> None:
        answer = await self._signal_foreground("0")
        if run.done or run.started or self._phase is not Phase.SUBMITTED:
            return
        if answer == "sent":
            run.mark_started()  # running without markers: the next prompt ends it
            return
        self._abandon_input(
            RunState.COMPLETED,
            "the shell did not start the command; output is what the screen showed",
        )

    async def _end_for_limit(self, run: TerminalRun) -> None:
        """It broke a limit (its output, its time): SIGKILL to the target's foreground
        job at once, as locally -- never to the client here, which is the terminal's
        connection; the interrupt when the shell runs it itself."""
        sent = await self._signal_foreground("KILL") == "sent"
        if sent and await self._ended_within(run, self._settings.kill_grace):
            return
        await self._interrupt(run, RunState.FAILED)

    # -- limits: only the server's own apply -------------------------------------------

    @property
    def limits_by(self) -> dict[str, str]:
        # The cgroup and rlimits here would bound the client, not the command: memory,
        # processes and CPU time on the target are not ours to limit.
        return {**dict.fromkeys(_TARGET_LIMITS.values(), "none"), **_SERVER_LIMITS}

    def set_limits(self, limits: Limits) -> None:
        super().set_limits(_server_only(limits))

    def _watch_limits(
        self, run: TerminalRun, limits: Limits | None, *, shell_pid: int | None = None
    ) -> RunLimits | None:
        # Output and wall time only (run.limits says so); no rlimit on the client.
        return super()._watch_limits(run, _server_only(limits or NO_LIMITS))

    def _shell_took_over(self, state: WaitState) -> str | None:
        # What reads the terminal here is always the client: a remote program with a
        # prompt like the shell's (a nested shell) must not pass for the shell.
        return None

    def _interrupt_command(self) -> bool:
        # Strategy none only: whether a job runs on the target would take a round
        # trip; the heuristics then only clear the line (docs/remote.md).
        return False

    # -- ending ---------------------------------------------------------------------------

    async def _sweep(self) -> None:
        """On the target: SIGHUP to the shell, then SIGTERM and SIGKILL to every
        process carrying the terminal's tag; remove the scratch directory.  Once per
        terminal: a second call waits for the first."""
        if self._report is None:
            return
        if self._sweeping is None:
            self._sweeping = asyncio.ensure_future(self._sweep_once(self._report))
        await asyncio.shield(self._sweeping)

    def _sweep_args(self, report: RemoteReport) -> tuple[str, ...]:
        steps = max(1, round(self._settings.kill_grace / 0.02))
        tag = f"{TERMINAL_TAG_VARIABLE}={self._tag}"
        return (tag, str(report.pid), str(steps), report.directory)

    @property
    def reap_command(self) -> list[str] | None:
        """The sweep over a connection of its own: should the server die, the watchdog
        ends the client here (and with it the session, so the shell gets SIGHUP), then
        runs this for what escaped on the target, and the scratch directory."""
        if self._report is None:
            return None
        command = control_command(SWEEP, *self._sweep_args(self._report))
        return self._channel.standalone_argv(command)

    async def _sweep_once(self, report: RemoteReport) -> None:
        status, out = await self._control(SWEEP, *self._sweep_args(report))
        if status != 0:
            log.warning("terminal %s: sweeping %s failed (%s)", self.id, self._channel.name, out)

    async def close(self) -> None:
        """End the shell and every process it started on the target, then the client."""
        if self._closed:
            return
        if self._finalizing is None and not self._closing:
            self._closing = True
            self._end_as(RunState.CANCELLED, unless_ending=True)
            await self._sweep()
        await super().close()

    async def _finalize(self) -> None:
        try:
            if self._sweeping is not None or self._channel.control_available():
                # It ended without us (its shell exited, its client died): what it
                # left running on the target, and its scratch directory, go first,
                # so that a terminal is closed only once nothing of it is left.
                await self._sweep()
            await super()._finalize()
        finally:
            await self._channel.release()

    def _shell_gone(self, status: int | None, signum: int | None) -> None:
        if not self._handshake.done():
            how = f"status {status}" if signum is None else f"signal {signum}"
            self._handshake.set_exception(
                SpawnError(
                    f"cannot open a terminal on {self._channel.name} (the client ended with "
                    f"{how}): {self._screen_tail()}"
                )
            )
        elif not self._closing and self._channel.lost(status, signum):
            self._lost = f"connection to {self._channel.name} lost"
            if self.current_run is not None:
                self._finish_current(self._ending_or(RunState.FAILED), note=self._lost)
        super()._shell_gone(status, signum)
