"""Remote terminals: the ssh provider against the local shell provider, same machine.

A private sshd on 127.0.0.1 (tests/sshd.py: a throwaway user, its own keys and
config), so the network is loopback and the figures are what ssh itself adds: the
handshake, the ControlMaster, one more process and a socket on every byte's way.
Both sides run bash with an empty rc file.  Rounds alternate local and ssh.

(a) start, spawn to a verified prompt (``ready()`` is ``rich``):
    local; ssh with no master yet (the ControlMaster connects first); ssh on the
    master (three more terminals while the first stays open);
    ``--container NAME``: also ``podman exec`` into that running container;
(b) ``true`` round trip, median of N;
(c) 5 MB of output (``head -c 5000000 /dev/zero | tr '\\0' x | fold -w 99``): MB/s.

Needs root (the throwaway user).  Nothing is asserted.

    python3 bench/bench_remote.py [--rounds 5] [--n 200] [--container NAME]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from registry.config import Settings
from registry.terminals.base import IntegrationState, Terminal
from registry.terminals.container import ContainerTerminal
from registry.terminals.shell import ShellTerminal
from registry.terminals.ssh import SshTerminal
from tests.sshd import PrivateSshd, cannot_run, private_sshd

BIG = "head -c 5000000 /dev/zero | tr '\\0' x | fold -w 99"
_ids = iter(range(1, 1_000_000))


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def ms(values: list[float]) -> str:
    return f"{statistics.median(values) * 1e3:8.1f} ms"


async def local_terminal(home: str, settings: Settings) -> ShellTerminal:
    terminal = await ShellTerminal.spawn(
        next(_ids), home, settings, shell="/bin/bash", env={"HOME": home}
    )
    assert await terminal.ready() is IntegrationState.RICH
    return terminal


async def ssh_terminal(sshd: PrivateSshd, settings: Settings) -> SshTerminal:
    terminal = await SshTerminal.create(next(_ids), "~", settings, target=sshd.alias)
    assert await terminal.ready() is IntegrationState.RICH
    return terminal


async def timed(make: object) -> tuple[float, Terminal]:
    start = time.perf_counter()
    terminal = await make  # type: ignore[misc]
    return time.perf_counter() - start, terminal


async def bench_start(
    sshd: PrivateSshd, home: str, settings: Settings, rounds: int, container: str | None
) -> None:
    figures: dict[str, list[float]] = {"local": [], "ssh, new master": [], "ssh, on master": []}
    if container:
        figures["podman exec"] = []
    for r in range(rounds):
        log(f"  start: round {r + 1}/{rounds}")
        took, local = await timed(local_terminal(home, settings))
        figures["local"].append(took)
        await local.close()
        took, first = await timed(ssh_terminal(sshd, settings))
        figures["ssh, new master"].append(took)
        later = []
        for _ in range(3):
            took, terminal = await timed(ssh_terminal(sshd, settings))
            figures["ssh, on master"].append(took)
            later.append(terminal)
        for terminal in [*later, first]:
            await terminal.close()  # the last one ends the master: next round starts cold
        if container:
            start = time.perf_counter()
            boxed = await ContainerTerminal.create(
                next(_ids), "/tmp", settings, target=container, env={"HOME": "/tmp"}
            )
            assert await boxed.ready() is IntegrationState.RICH
            figures["podman exec"].append(time.perf_counter() - start)
            await boxed.close()
    base = statistics.median(figures["local"])
    print("(a) spawn to a verified prompt")
    for name, values in figures.items():
        ratio = statistics.median(values) / base
        print(f"    {name:<16} median {ms(values)}   {ratio:5.1f}x local   ({len(values)} starts)")


def alternate(i: int, local: Terminal, remote: Terminal) -> list[tuple[str, Terminal]]:
    """Both sides, the first alternating from one round to the next."""
    pair = [("local", local), ("ssh", remote)]
    return pair if i % 2 == 0 else pair[::-1]


async def bench_round_trip(local: Terminal, remote: Terminal, n: int) -> None:
    times: dict[str, list[float]] = {"local": [], "ssh": []}
    for i in range(n):
        for name, terminal in alternate(i, local, remote):
            start = time.perf_counter()
            run = await terminal.run("true")
            times[name].append(time.perf_counter() - start)
            assert run.exit_code == 0
    ratio = statistics.median(times["ssh"]) / statistics.median(times["local"])
    print(f"(b) `true` round trip, median of {n}")
    print(f"    local {ms(times['local'])}   ssh {ms(times['ssh'])}   ssh/local {ratio:.2f}x")


async def bench_throughput(local: Terminal, remote: Terminal, rounds: int) -> None:
    rates: dict[str, list[float]] = {"local": [], "ssh": []}
    for r in range(rounds):
        log(f"  5 MB: round {r + 1}/{rounds}")
        for name, terminal in alternate(r, local, remote):
            start = time.perf_counter()
            run = await terminal.run(BIG)
            took = time.perf_counter() - start
            assert run.exit_code == 0
            assert run.output_bytes >= 5_000_000, run.output_bytes
            rates[name].append(run.output_bytes / took / 1e6)
    local_rate = statistics.median(rates["local"])
    remote_rate = statistics.median(rates["ssh"])
    print(f"(c) 5 MB of output, median of {rounds}")
    print(
        f"    local {local_rate:6.1f} MB/s   ssh {remote_rate:6.1f} MB/s   "
        f"ssh/local {remote_rate / local_rate:.2f}x"
    )


async def main(rounds: int, n: int, container: str | None) -> None:
    reason = cannot_run()
    if reason is not None:
        sys.exit(f"bench_remote: {reason}")
    with tempfile.TemporaryDirectory() as tmp:
        Path(tmp, "sshd").mkdir()
        with private_sshd(Path(tmp, "sshd")) as sshd:
            await bench(sshd, Path(tmp, "home"), rounds, n, container)


async def bench(sshd: PrivateSshd, home: Path, rounds: int, n: int, container: str | None) -> None:
    home.mkdir()
    # Both sides: bash with an empty rc file.
    Path(sshd.home, ".bashrc").write_text("")
    settings = Settings(ssh_config_file=sshd.config, kill_grace=0.5)
    if container:
        settings.container_engine = "podman"
    await bench_start(sshd, str(home), settings, rounds, container)
    local = await local_terminal(str(home), settings)
    remote = await ssh_terminal(sshd, settings)
    try:
        await bench_round_trip(local, remote, n)
        await bench_throughput(local, remote, rounds)
    finally:
        await local.close()
        await remote.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--container", help="a running container to time `podman exec` into")
    args = parser.parse_args()
    asyncio.run(main(args.rounds, args.n, args.container))
