"""A plain bash in a real PTY with a wait-state watcher: the harness for waiting tests.

Not ShellTerminal (being rewritten while this lands): ``bash --norc --noprofile``
from ptyprocess, read on the event loop, every chunk fed to a ScreenModel and noted
by a WaitWatcher.  "A command is running" comes from a unique PS1: true from the
moment a command line is written until the prompt comes back -- the job our OSC 633
markers do in ShellTerminal.  States are collected as the watcher reports them, and
awaited, never slept for.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Callable, Mapping

import psutil
from ptyprocess import PtyProcess

from registry.keys import key_bytes
from registry.screen import ScreenModel
from registry.waiting import Check, TerminalState, WaitState, WaitWatcher, WatchSettings

PROMPT = b"<<ready>>$ "


class PtyShell:
    def __init__(
        self,
        cwd: str,
        env: Mapping[str, str] | None = None,
        settings: WatchSettings | None = None,
        cols: int = 80,
        rows: int = 24,
    ) -> None:
        base = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": cwd,
            "TERM": "xterm-256color",
            "LANG": "C.UTF-8",
            "HISTFILE": "/dev/null",
            "PS1": PROMPT.decode(),
        }
        base.update(env or {})
        self.process = PtyProcess.spawn(
            ["bash", "--norc", "--noprofile"], cwd=cwd, env=base, dimensions=(rows, cols)
        )
        self.fd: int = self.process.fd
        os.set_blocking(self.fd, False)
        self.loop = asyncio.get_running_loop()
        self.screen = ScreenModel(cols, rows)
        self.output = bytearray()
        self.running = False
        self.states: list[WaitState] = []
        #: (state, when the output before it last arrived): detection latency.
        self.timeline: list[tuple[WaitState, float]] = []
        #: Off: output is read but neither modelled nor watched (a baseline).
        self.detecting = True
        self.checks: list[Check] = []
        self.last_output = time.monotonic()
        self._changed = asyncio.Event()
        self._output_event = asyncio.Event()
        self._check_event = asyncio.Event()
        self._prompt_at = 0  # where in ``output`` to look for the next prompt
        self._echo_at: int | None = None  # where the echo of a submitted line starts
        self.prompt_seen = asyncio.Event()
        self.watcher = WaitWatcher(
            self.fd,
            self.process.pid,
            self.screen,
            lambda: self.running,
            self._on_change,
            settings=settings,
            on_check=self._on_check,
        )
        self.loop.add_reader(self.fd, self._on_readable)

    # -- plumbing --------------------------------------------------------------------

    def _on_readable(self) -> None:
        try:
            data = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            self.loop.remove_reader(self.fd)
            return
        self.last_output = time.monotonic()
        self.output += data
        if len(self.output) > 1 << 20:  # bulk output: keep the tail only
            cut = len(self.output) - (1 << 19)
            del self.output[:cut]
            self._prompt_at = max(0, self._prompt_at - cut)
            self._echo_at = None
        self._output_event.set()
        # Search only what is new (plus a prompt's length): bulk output stays linear.
        fresh = max(0, len(self.output) - len(data) - len(PROMPT))
        if self.running and self.output.find(PROMPT, max(self._prompt_at, fresh)) >= 0:
            self.running = False
            self.prompt_seen.set()
            if self.detecting:
                self.watcher.note_command()
        if not self.detecting:
            return
        newline = -1 if self._echo_at is None else self.output.find(b"\n", self._echo_at)
        if newline >= 0:
            # The echoed command line ends here: the command's own output follows.
            split = max(0, newline + 1 - (len(self.output) - len(data)))
            self.screen.feed(data[:split])
            self.screen.mark_command_start()
            self.screen.feed(data[split:])
            self._echo_at = None
        else:
            self.screen.feed(data)
        self.watcher.note_output()

    def _on_check(self, check: Check) -> None:
        self.checks.append(check)
        self._check_event.set()

    def _on_change(self, state: WaitState) -> None:
        self.states.append(state)
        self.timeline.append((state, self.last_output))
        self._changed.set()

    def write(self, data: bytes) -> None:
        os.write(self.fd, data)
        if self.detecting:
            self.watcher.note_write()

    def send_keys(self, keys: list[str]) -> None:
        self.write(key_bytes(keys, application_cursor=self.screen.application_cursor))

    async def ready(self, timeout: float = 10.0) -> None:
        """The first prompt is up."""
        async with asyncio.timeout(timeout):
            while PROMPT not in self.output:
                self._output_event.clear()
                await self._output_event.wait()

    def submit(self, command: str) -> None:
        """Type a command line; "running" until the prompt comes back."""
        self._prompt_at = len(self.output) + len(command) + 1
        self._echo_at = len(self.output)
        self.prompt_seen.clear()
        self.running = True
        if self.detecting:
            self.watcher.note_command()
        self.write(command.encode() + b"\r")

    async def until(self, accept: Callable[[WaitState], bool], timeout: float = 10.0) -> WaitState:
        """The first reported state (from now on, or the current one) that ``accept``s."""
        seen = 0
        current = self.watcher.state
        if accept(current):
            return current
        seen = len(self.states)
        async with asyncio.timeout(timeout):
            while True:
                for state in self.states[seen:]:
                    if accept(state):
                        return state
                seen = len(self.states)
                self._changed.clear()
                await self._changed.wait()

    async def until_state(self, state: TerminalState, timeout: float = 10.0) -> WaitState:
        try:
            return await self.until(lambda s: s.state is state, timeout)
        except TimeoutError:
            raise AssertionError(
                f"no {state} within {timeout}s; states: {self.states}; "
                f"screen: {self.screen.prompt_line()!r}"
            ) from None

    async def until_prompt(self, timeout: float = 10.0) -> None:
        async with asyncio.timeout(timeout):
            await self.prompt_seen.wait()

    async def until_checks(self, accept: Callable[[Check], bool], timeout: float = 10.0) -> None:
        """A look by the watcher that ``accept``s (e.g. made after 2 s of quiet)."""
        async with asyncio.timeout(timeout):
            seen = 0
            while not any(accept(check) for check in self.checks[seen:]):
                seen = len(self.checks)
                await self._next_check()

    async def _next_check(self) -> None:
        self._check_event.clear()
        await self._check_event.wait()

    def stop_detecting(self) -> None:
        """Read output only: the baseline a detector's cost is measured against."""
        self.detecting = False
        self.watcher.close()

    def start_detecting(self, settings: WatchSettings | None = None) -> None:
        self.detecting = True
        self.watcher = WaitWatcher(
            self.fd,
            self.process.pid,
            self.screen,
            lambda: self.running,
            self._on_change,
            settings=settings,
            on_check=self._on_check,
        )

    def close(self) -> None:
        """End the shell and everything below it."""
        self.watcher.close()
        with contextlib.suppress(Exception):
            self.loop.remove_reader(self.fd)
        try:
            tree = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            tree = []
        for proc in tree:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.process.terminate(force=True)
        psutil.wait_procs(tree, timeout=2)
        with contextlib.suppress(Exception):
            self.process.close(force=True)
