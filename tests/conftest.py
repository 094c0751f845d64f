"""Shared fixtures: settings with short windows, and warm shells reused across tests.

A test that needs a fresh shell (its own rc, its own HOME, one it will break or
close) spawns it with ``spawn_terminal``; everything else shares one warm terminal
per shell so the suite stays fast.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from registry.config import Settings
from registry.run import TerminalRun
from registry.terminals.base import Terminal, TerminalListener
from registry.terminals.shell import ShellTerminal

from .rpc import StdioServer, serve_socket

SHELLS = [s for s in ("bash", "zsh", "fish") if shutil.which(s)]
REQUIRED_SHELLS = ("bash", "zsh")
#: Shells that take POSIX-style command lines (fish has its own language).
POSIX_SHELLS = [s for s in SHELLS if s != "fish"]

_ids = itertools.count(1000)


@pytest.fixture(autouse=True, scope="session")
def _empty_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Every shell the suite starts gets an empty HOME unless a test gives it one.

    A person's startup files are theirs, not the suite's: a prompt hook that forks on
    every prompt (pyenv-virtualenv's) lands processes in a terminal's cgroup just as a
    test counts them, and slow rcs starve the timing of others.  Tests about rc files
    write their own.
    """
    saved = os.environ.get("HOME")
    os.environ["HOME"] = str(tmp_path_factory.mktemp("home"))
    yield
    if saved is None:
        os.environ.pop("HOME", None)
    else:
        os.environ["HOME"] = saved


def fast_settings() -> Settings:
    return Settings(
        integration_idle_timeout=3.0,
        integration_absolute_timeout=10.0,
        command_start_timeout=2.0,
        none_quiet_timeout=0.3,
        kill_grace=0.5,
    )


@pytest.fixture
def settings() -> Settings:
    return fast_settings()


SpawnTerminal = Callable[..., Awaitable[ShellTerminal]]


@pytest_asyncio.fixture
async def spawn_terminal(tmp_path: Path) -> AsyncIterator[SpawnTerminal]:
    """Spawn fresh terminals (HOME is an empty temp dir unless given); closed after."""
    spawned: list[ShellTerminal] = []

    async def spawn(
        shell: str = "bash",
        *,
        cwd: str | None = None,
        home: Path | None = None,
        env: dict[str, str] | None = None,
        settings: Settings | None = None,
        integration: bool = True,
        wait_ready: bool = True,
    ) -> ShellTerminal:
        if home is None:
            home = tmp_path / "home"
            home.mkdir(exist_ok=True)
        full_env = {"HOME": str(home), **(env or {})}
        full_env.setdefault("ZDOTDIR", str(home))
        terminal = await ShellTerminal.spawn(
            next(_ids),
            cwd or str(tmp_path),
            settings or fast_settings(),
            shell=shutil.which(shell) or shell,
            env=full_env,
            integration=integration,
        )
        spawned.append(terminal)
        if wait_ready:
            await terminal.ready()
        return terminal

    yield spawn
    for terminal in spawned:
        await terminal.close()


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def warm_terminals(
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[dict[str, ShellTerminal]]:
    home = tmp_path_factory.mktemp("warm-home")
    warm: dict[str, ShellTerminal] = {}
    for shell in SHELLS:
        terminal = await ShellTerminal.spawn(
            next(_ids),
            str(home),
            fast_settings(),
            shell=shutil.which(shell) or shell,
            env={"HOME": str(home), "ZDOTDIR": str(home)},
        )
        warm[shell] = terminal
    for terminal in warm.values():
        await terminal.ready()
    yield warm
    for terminal in warm.values():
        await terminal.close()


@pytest_asyncio.fixture(params=POSIX_SHELLS)
async def warm(
    request: pytest.FixtureRequest, warm_terminals: dict[str, ShellTerminal]
) -> ShellTerminal:
    """A warm terminal of each POSIX-syntax shell (bash, zsh), at a prompt."""
    return _warm_one(warm_terminals, request.param)


@pytest_asyncio.fixture
async def warm_fish(warm_terminals: dict[str, ShellTerminal]) -> ShellTerminal:
    if "fish" not in warm_terminals:
        pytest.skip("fish is not installed")
    return _warm_one(warm_terminals, "fish")


def _warm_one(warm_terminals: dict[str, ShellTerminal], shell: str) -> ShellTerminal:
    terminal = warm_terminals[shell]
    if terminal.closed:
        pytest.fail(f"the warm {shell} terminal was closed by an earlier test")
    return terminal


def pytest_report_header() -> str:
    return f"shells under test: {', '.join(SHELLS)}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    missing = [s for s in REQUIRED_SHELLS if s not in SHELLS]
    if missing:
        raise pytest.UsageError(f"tests need these shells installed: {', '.join(missing)}")


@pytest_asyncio.fixture
async def socket_path(tmp_path: Path) -> AsyncIterator[Path]:
    """A real server on a Unix socket in a private directory; terminated after."""
    directory = tmp_path / "private"
    directory.mkdir(mode=0o700)
    path = directory / "registry.sock"
    process = await serve_socket(path)
    yield path
    process.terminate()
    await asyncio.wait_for(process.wait(), 30)


def next_run_end(terminal: Terminal) -> asyncio.Future[TerminalRun]:
    """The next run that ends in ``terminal`` (one a person types, say)."""
    ended: asyncio.Future[TerminalRun] = asyncio.get_running_loop().create_future()

    class Ends(TerminalListener):
        def on_run_end(self, terminal: Terminal, run: TerminalRun) -> None:
            if not ended.done():
                ended.set_result(run)
                terminal.unsubscribe(self)

    terminal.subscribe(Ends())
    return ended


async def started(terminal: Terminal, command: str, needle: bytes, **kw: object) -> TerminalRun:
    """Start ``command`` and return its run once it has printed ``needle`` (which the
    echo of the command line must not contain) -- an event, not a poll."""
    assert needle.decode() not in command
    shown = asyncio.Event()
    seen = bytearray()

    class Shows(TerminalListener):
        def on_output(self, terminal: Terminal, data: bytes, run: TerminalRun | None) -> None:
            seen.extend(data)
            if needle in seen:
                shown.set()

    listener = Shows()
    terminal.subscribe(listener)
    try:
        run = await terminal.start(command, **kw)  # type: ignore[arg-type]
        await asyncio.wait_for(shown.wait(), 30)
    finally:
        terminal.unsubscribe(listener)
    return run


@pytest_asyncio.fixture
async def fresh() -> AsyncIterator[StdioServer]:
    """A server of this test's own, not initialised; stopped after if still running."""
    peer = await StdioServer.start()
    yield peer
    if peer.process.returncode is None:
        await peer.stop()
