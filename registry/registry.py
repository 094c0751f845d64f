"""TerminalRegistry: few terminals, reused by task and by where they actually stand.

Lookup (``get_or_create``):

1. closed terminals are dropped (they leave the index when they close);
2. tier 1: an idle terminal bound to the task, same provider, same *live* cwd;
3. tier 2: any idle terminal of that provider with that live cwd -- released
   (unbound) ones first, then idle ones of other tasks, never one that another task
   was just handed and has not used yet;
4. else a new terminal.  The chosen terminal is bound to the task.

Terminals are indexed by (provider, normalised live cwd) and the index follows
``cd`` (:mod:`registry.lookup`, which also holds the tier rule).  Choosing is
synchronous -- no await between looking and binding -- so two tasks asking at once
never get the same terminal.

Terminals are created through :data:`PROVIDERS`, one entry per provider.

The registry also keeps an entry per terminal (:mod:`registry.entry`: its task,
unread output and hot state), waits for hot terminals to cool down before a report
and renders the entries' snapshots (:mod:`registry.environment`), and tells its
listeners (the protocol layer) everything without knowing who they are.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import itertools
import logging
import os
import time
from collections.abc import Mapping

from .awaiting import RunBook, follow
from .config import Settings
from .entry import TerminalEntry, normalise_path
from .environment import EnvironmentReport, render_report
from .errors import UnknownTerminalError
from .fallback import integration_in_time
from .keeper import Keeper
from .limits import NO_LIMITS, Limits
from .listeners import Listeners
from .lookup import PlaceIndex, choose
from .origin import Origin, Suspect, origin_of
from .run import TerminalRun
from .terminals.base import Terminal, TerminalListener, existing_directory
from .terminals.children import NOWHERE
from .terminals.shell import ShellTerminal
from .terminals.subprocess import SubprocessTerminal

__all__ = ["PROVIDERS", "RegistryListener", "TerminalEntry", "TerminalRegistry", "normalise_path"]

log = logging.getLogger(__name__)

#: Every provider by name, and the terminal class whose ``create`` starts one.
#: A new provider (ssh, a container) is a Terminal subclass and one entry here.
PROVIDERS: Mapping[str, type[Terminal]] = {
    ShellTerminal.provider: ShellTerminal,
    SubprocessTerminal.provider: SubprocessTerminal,
}


class RegistryListener(TerminalListener):
    """Hears about every terminal of a registry: its own events plus ``on_open``."""

    def on_open(self, terminal: Terminal) -> None:
        """A terminal was created and registered."""


class TerminalRegistry:
    """The registry of terminals. Create, use, then ``await close()``."""

    def __init__(self, settings: Settings | None = None, *, keeper: Keeper | None = None) -> None:
        self.settings = settings or Settings()
        #: Places terminals' processes and keeps the record that outlives the server.
        self.keeper = keeper
        self._entries: dict[int, TerminalEntry] = {}
        self._places = PlaceIndex()
        #: Closed terminals whose output has not been reported yet (once).
        self._closed_unread: dict[int, TerminalEntry] = {}
        self._ids = itertools.count(1)
        self._listeners: Listeners[RegistryListener] = Listeners()
        self._closing = False
        #: Set (and replaced) when a terminal may have stopped being busy and hot:
        #: what a report waiting for hot terminals to cool down waits on.
        self._cooled = asyncio.Event()
        self._runs = RunBook()  # recent runs by id, for ``wait`` by run id

    # -- observers ----------------------------------------------------------------

    def subscribe(self, listener: RegistryListener) -> None:
        self._listeners.add(listener)

    def unsubscribe(self, listener: RegistryListener) -> None:
        self._listeners.remove(listener)

    def _changed(self, terminal: Terminal) -> None:
        self._wake_reports()
        self._listeners.call(lambda listener: listener.on_change(terminal))

    def _wake_reports(self) -> None:
        """A terminal changed (it cooled down, its run ended, it closed): reports
        waiting for hot terminals to cool down look again."""
        self._cooled.set()
        self._cooled = asyncio.Event()

    # -- lookup -------------------------------------------------------------------

    async def get_or_create(
        self,
        cwd: str,
        task_id: str | None = None,
        provider: str = "shell",
        *,
        shell: str | None = None,
        env: Mapping[str, str] | None = None,
        settings: Settings | None = None,
        limits: Limits | None = None,
    ) -> Terminal:
        """An idle terminal for ``task_id`` standing in ``cwd``; a new one if none.

        A new terminal runs with ``settings`` (the asking client's; default: the
        registry's) for its whole life; ``limits`` become the terminal's own.
        """
        if provider not in PROVIDERS:
            raise ValueError(f"unknown provider {provider!r}; expected one of {tuple(PROVIDERS)}")
        settings = settings or self.settings
        key = normalise_path(existing_directory(cwd))
        entry = None
        if shell is None and not env:
            entry = choose(self._places.at(provider, key), task_id, settings.reuse_across_tasks)
        if entry is not None and entry.task_id not in (task_id, None):
            # Tier 2 took another task's idle terminal: the shell is the same shell.
            entry.notes.append(
                f"terminal {entry.terminal.id} came from task {entry.task_id}: its shell "
                "state (cwd, exported variables, history) carries over"
            )
        if entry is None:
            entry = await self._create(
                provider, cwd, task_id, shell=shell, env=env, settings=settings
            )
        self._bind(entry, task_id)
        entry.claim(task_id)
        if limits is not None:
            entry.terminal.set_limits(limits)
        return entry.terminal

    async def _create(
        self,
        provider: str,
        cwd: str,
        task_id: str | None,
        *,
        shell: str | None,
        env: Mapping[str, str] | None,
        settings: Settings,
    ) -> TerminalEntry:
        terminal_id = next(self._ids)
        keeper = self.keeper
        placement = keeper.placement(terminal_id) if keeper is not None else NOWHERE
        try:
            terminal = await PROVIDERS[provider].create(
                terminal_id, cwd, settings, shell=shell, env=env, placement=placement
            )
        except BaseException:
            if keeper is not None:
                keeper.forget(terminal_id)
            raise
        if keeper is not None:
            keeper.adopt(terminal)
        entry = TerminalEntry(terminal, task_id, settings)
        self._entries[terminal_id] = entry
        self._places.add(entry)
        terminal.subscribe(_EntryListener(self, entry))
        self._listeners.call(lambda listener: listener.on_open(terminal))
        return entry

    def _bind(self, entry: TerminalEntry, task_id: str | None) -> None:
        if entry.task_id != task_id:
            entry.task_id = task_id
            self._changed(entry.terminal)

    # -- queries ------------------------------------------------------------------

    def entry(self, terminal_id: int) -> TerminalEntry:
        try:
            return self._entries[terminal_id]
        except KeyError:
            raise UnknownTerminalError(terminal_id) from None

    def get(self, terminal_id: int) -> Terminal:
        return self.entry(terminal_id).terminal

    def task_of(self, terminal_id: int) -> str | None:
        return self.entry(terminal_id).task_id

    def origin_of(self, pid: int) -> Origin | None:
        """Which of our terminals process ``pid`` was started in (see :mod:`.origin`)."""
        keeper = self.keeper
        suspects = [
            Suspect(
                e.terminal.id,
                e.terminal.pid,
                e.terminal.tag,
                keeper.cgroup_members(e.terminal.id) if keeper is not None else None,
            )
            for e in self._entries.values()
        ]
        return origin_of(pid, keeper.tag if keeper is not None else None, suspects)

    def list(self, task_id: str | None = None, busy: bool | None = None) -> builtins.list[Terminal]:
        """Open terminals, oldest first; filtered by task and by busy when given."""
        return [
            e.terminal
            for e in self._entries.values()
            if (task_id is None or e.task_id == task_id)
            and (busy is None or e.terminal.busy == busy)
        ]

    def is_hot(self, terminal_id: int) -> bool:
        return self.entry(terminal_id).hot.is_hot()

    def unretrieved_output(
        self, terminal_id: int, *, run_id: int | None = None, peek: bool = False
    ) -> str:
        """Output not retrieved yet (of one run, with ``run_id``), cleaned; now marked
        retrieved, unless ``peek``."""
        entry = self._entries.get(terminal_id) or self._closed_unread.get(terminal_id)
        if entry is None:
            raise UnknownTerminalError(terminal_id)
        taken = entry.unread.take(run_id=run_id, peek=peek)
        if entry.terminal.closed and not entry.unread.has_unread_completed():
            self._closed_unread.pop(terminal_id, None)
        return "\n".join(u.text for u in taken if u.text)

    # -- running ------------------------------------------------------------------

    async def run(
        self,
        command: str,
        *,
        cwd: str | None = None,
        task_id: str | None = None,
        terminal_id: int | None = None,
        provider: str = "shell",
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        background: bool = False,
        settings: Settings | None = None,
        limits: Limits | None = None,
    ) -> TerminalRun:
        """Run a command in a given terminal, or in one acquired as get_or_create does.

        ``settings`` are the asking client's (default: the registry's): they give the
        default timeout, the fallback window, and a new terminal's settings.

        A foreground run's output counts as retrieved (the caller has it with the
        result); a background run's is reported later.

        A shell terminal whose integration is not up within
        ``shell_integration_timeout`` does not get the command: it is marked ``none``
        and the command runs on a subprocess terminal for the same task and cwd (the
        run's note says so). The command is never written to the shell in that case,
        so it never runs twice.  With ``background`` the run is returned as soon as
        the command has started.  ``limits`` are the run's own, over the terminal's,
        over the settings'.
        """
        settings = settings or self.settings
        if terminal_id is not None:
            terminal = self.get(terminal_id)
        else:
            terminal = await self.get_or_create(
                cwd or os.getcwd(), task_id, provider, settings=settings
            )
        if isinstance(terminal, ShellTerminal) and settings.fallback_to_subprocess:
            ready, why = await integration_in_time(
                terminal,
                settings.shell_integration_timeout,
                settings.integration_absolute_timeout,
            )
            if not ready:
                task = task_id if terminal_id is None else None
                terminal = await self._substitute(terminal, task, settings, why)
        if timeout is None:
            timeout = settings.command_timeout
        limits = (limits or NO_LIMITS).over(terminal.limits).over(settings.limits)
        run = await terminal.start(command, timeout=timeout, env=env, limits=limits)
        if background:
            return run
        return await self.wait(run)

    async def wait(
        self, run: TerminalRun, *, timeout: float | None = None, yield_on_input: bool = False
    ) -> TerminalRun:
        """Until ``run`` ends (its output is then retrieved), its terminal waits for input
        (``yield_on_input``) or ``timeout`` passes (:func:`~registry.awaiting.follow`)."""
        entry = self._entries.get(run.terminal_id)
        terminal = entry.terminal if entry is not None else None
        await follow(run, terminal, timeout=timeout, yield_on_input=yield_on_input)
        if run.done:
            self.mark_retrieved(run)
        return run

    def find_run(self, run_id: int | None = None, terminal_id: int | None = None) -> TerminalRun:
        """A run by its id (a recent one), or a terminal's current run (else its last)."""
        terminal = self.get(terminal_id) if terminal_id is not None else None
        return self._runs.find(run_id, terminal)

    async def _substitute(
        self, terminal: ShellTerminal, task_id: str | None, settings: Settings, why: str
    ) -> Terminal:
        """The subprocess terminal that runs the command instead (same task and cwd)."""
        task = task_id if task_id is not None else self.entry(terminal.id).task_id
        substitute = await self.get_or_create(terminal.cwd, task, "subprocess", settings=settings)
        self.entry(substitute.id).notes.append(f"{why}; ran in subprocess terminal {substitute.id}")
        return substitute

    def mark_retrieved(self, run: TerminalRun) -> None:
        """The caller got this run's whole output with its result: it is not news."""
        entry = self._entries.get(run.terminal_id) or self._closed_unread.get(run.terminal_id)
        if entry is not None:
            entry.unread.mark_retrieved(run)

    # -- releasing and closing ----------------------------------------------------

    def release(self, task_id: str) -> None:
        """Unbind the task's terminals; they become background terminals. Kills nothing.

        The task's output not reported yet is reported to the next task that asks.
        """
        for entry in [*self._entries.values(), *self._closed_unread.values()]:
            entry.unread.disown(task_id)
            if entry.task_id == task_id and not entry.terminal.closed:
                entry.unclaim()
                self._bind(entry, None)

    async def close_terminal(self, terminal_id: int) -> None:
        await self.get(terminal_id).close()

    async def close(self) -> None:
        """Close every terminal (and end every process they started)."""
        self._closing = True
        terminals = [e.terminal for e in self._entries.values()]
        results = await asyncio.gather(*(t.close() for t in terminals), return_exceptions=True)
        for terminal, result in zip(terminals, results, strict=True):
            if isinstance(result, BaseException):
                log.error("closing terminal %s failed: %r", terminal.id, result)

    # -- reports ------------------------------------------------------------------

    async def environment_details(
        self,
        task_id: str | None = None,
        cooldown_timeout: float | None = None,
        *,
        settings: Settings | None = None,
        peek: bool = False,
    ) -> EnvironmentReport:
        """What the task's terminals are doing, once hot ones have cooled down.

        Covers the task's own terminals and released (unbound) ones; with no task,
        every terminal.  Waits until no busy covered terminal is hot, for at most
        ``cooldown_timeout``: woken by the terminals' cooling timers and run ends,
        not by polling.  Reporting marks the output retrieved (unless ``peek``: a
        person looking does not take it from the agent).  Output is its task's: a
        report for one task never shows another's.
        """
        if cooldown_timeout is None:
            cooldown_timeout = (settings or self.settings).cooldown_timeout
        covered = self.covered_entries(task_id)
        deadline = time.monotonic() + cooldown_timeout
        while any(e.cooling for e in covered):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._cooled.wait(), remaining)
        covered = self.covered_entries(task_id)
        snapshots = [s for s in (e.snapshot(task_id, peek=peek) for e in covered) if s]
        for entry in covered:
            if entry.terminal.closed and not entry.unread.has_unread_completed():
                self._closed_unread.pop(entry.terminal.id, None)
        return render_report(snapshots)

    def covered_entries(self, task_id: str | None) -> builtins.list[TerminalEntry]:
        """The terminals a task's report covers: its own and released ones (every
        terminal without a task), closed ones with unread output included."""

        def covers(entry: TerminalEntry) -> bool:
            return (
                task_id is None
                or entry.task_id in (task_id, None)
                or entry.unread.has_unread_for(task_id)  # it moved on; its output did not
            )

        live = [e for e in self._entries.values() if covers(e)]
        gone = [e for e in self._closed_unread.values() if covers(e)]
        return sorted([*live, *gone], key=lambda e: e.terminal.id)

    # -- terminal events ----------------------------------------------------------

    def _terminal_changed(self, entry: TerminalEntry) -> None:
        self._places.follow(entry)

    def _terminal_closed(self, entry: TerminalEntry) -> None:
        terminal = entry.terminal
        if self.keeper is not None:
            self.keeper.forget(terminal.id)
        self._places.remove(entry)
        self._entries.pop(terminal.id, None)
        entry.closed()
        if entry.unread.has_unread_completed():
            self._closed_unread[terminal.id] = entry
        self._wake_reports()


class _EntryListener(TerminalListener):
    """Routes one terminal's events into the registry and on to its listeners."""

    def __init__(self, registry: TerminalRegistry, entry: TerminalEntry) -> None:
        self._registry = registry
        self._entry = entry

    def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
        # Hot now, and again once it cools: listeners hear both (no polling for them).
        if self._entry.output(data, run, cooled=self._cooled):
            self._registry._changed(terminal)
        self._registry._listeners.call(lambda listener: listener.on_output(terminal, data, run))

    def _cooled(self) -> None:
        self._registry._changed(self._entry.terminal)

    def on_run_start(self, terminal: Terminal, run: TerminalRun) -> None:
        self._entry.run_started(run)
        self._registry._runs.add(run)
        self._registry._listeners.call(lambda listener: listener.on_run_start(terminal, run))

    def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
        self._entry.unread.run_ended(run)
        self._registry._listeners.call(lambda listener: listener.on_run_end(terminal, run))

    def on_change(self, terminal: Terminal) -> None:
        self._registry._terminal_changed(self._entry)
        self._registry._changed(terminal)

    def on_close(self, terminal: Terminal) -> None:
        self._registry._terminal_closed(self._entry)
        self._registry._listeners.call(lambda listener: listener.on_close(terminal))
