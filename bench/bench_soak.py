"""Soak: 50 tasks over the socket, commands of every ending, for minutes; what is left?

One socket server; each task has its own connection and, for the whole soak, runs
one action after another in its own terminal (half the tasks on the shell provider,
half on the subprocess one):

* ``ok``: a short command (``echo``, ``ls``), or some output (``seq 1 20000``);
* ``timeout``: ``sleep 30`` with a 300 ms timeout, or a command that leaves a child
  behind (``bash -c 'sleep 60 & sleep 60'``) timing out;
* ``cancel``: ``$/cancelRequest`` for a running ``terminal/run`` after 200 ms;
* ``kill``: ``terminal/kill`` 200 ms into a background ``sleep 30``;
* ``limit``: ``yes`` under ``outputMb: 1``.

At the end, with every task's terminal idle, it counts processes leaked: any
process carrying the server's tag, or below the server, that is neither a
terminal's shell nor the server's watchdog (must be 0); then the same after the
server stopped.  It prints the server's open fds and RSS at the start (terminals
made, before the soak) and at the end, and how each kind of action ended.

    python3 bench/bench_soak.py [--minutes 3] [--tasks 50] [--seed 1]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import random
import sys
import tempfile
import time
from typing import Any

import psutil

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench_flood import SERVER, Peer, RpcError

SERVER_TAG = "TERMINAL_REGISTRY_SERVER"
outcomes: collections.Counter[str] = collections.Counter()


async def act(peer: Peer, rng: random.Random, terminal: int, last: list[str]) -> None:
    kind = rng.choice(["ok", "ok", "timeout", "cancel", "kill", "limit"])
    last[0] = kind
    base = {"terminalId": terminal}
    if kind == "ok":
        command = rng.choice(["echo $RANDOM", "ls >/dev/null; pwd", "seq 1 20000"])
        result = await peer.call("terminal/run", {**base, "command": command})
    elif kind == "timeout":
        command = rng.choice(["sleep 30", "bash -c 'sleep 60 & sleep 60'"])
        result = await peer.call("terminal/run", {**base, "command": command, "timeoutMs": 300})
    elif kind == "cancel":
        msg_id, answer = peer.request("terminal/run", {**base, "command": "sleep 30"})
        await asyncio.sleep(0.2)
        peer.cancel(msg_id)
        try:
            result = await asyncio.wait_for(answer, 60)
        except RpcError as error:
            # Answered once the command has been interrupted and its run has ended.
            outcomes[f"cancel -> error {error.code}"] += 1
            return
    elif kind == "kill":
        await peer.call("terminal/run", {**base, "command": "sleep 30", "background": True})
        await asyncio.sleep(0.2)
        # Answered once the run has ended.
        await peer.call("terminal/kill", {"terminalId": terminal})
        outcomes["kill -> done"] += 1
        return
    else:
        limits = {"outputMb": 1}
        result = await peer.call("terminal/run", {**base, "command": "yes", "limits": limits})
    outcomes[
        f"{kind} -> {result['state']}" + (f" ({result['limit']})" if result.get("limit") else "")
    ] += 1


async def task(path: str, index: int, work: str, deadline: float, seed: int) -> tuple[Peer, int]:
    rng = random.Random(seed * 1000 + index)
    peer = await Peer.connect(path)
    provider = "shell" if index % 2 == 0 else "subprocess"
    info = await peer.call(
        "terminal/acquire",
        {"cwd": os.path.join(work, f"t{index}"), "taskId": f"soak{index}", "provider": provider},
    )
    last = ["-"]
    while time.monotonic() < deadline:
        try:
            await act(peer, rng, info["id"], last)
        except (RpcError, TimeoutError) as error:
            what = str(error) or type(error).__name__
            outcomes[f"error ({provider}, after {last[0]}): {what}"] += 1
    return peer, info["id"]


def tagged(tag: str) -> set[int]:
    found = set()
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(SERVER_TAG) == tag:
                found.add(proc.pid)
        except (psutil.Error, OSError):
            continue
    return found


def server_tag(server: psutil.Process) -> str | None:
    for child in server.children(recursive=True):
        try:
            tag = child.environ().get(SERVER_TAG)
        except psutil.Error:
            continue
        if tag:
            return tag
    return None


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--minutes", type=float, default=3.0)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-soak-")
    os.chmod(work, 0o700)
    path = os.path.join(work, "s.sock")
    env = {**os.environ, "XDG_RUNTIME_DIR": work, "HOME": work}
    read_end, write_end = os.pipe()
    server = await asyncio.create_subprocess_exec(
        *SERVER, "--socket", path, "--ready-fd", str(write_end), pass_fds=(write_end,), env=env
    )
    os.close(write_end)
    await asyncio.to_thread(os.read, read_end, 16)
    os.close(read_end)
    proc = psutil.Process(server.pid)
    # Start: every task's terminal made and used once.
    warm = await Peer.connect(path)
    for index in range(args.tasks):
        # A directory each: every task keeps its own terminal (no idle one is handed
        # to another task), so the start already has all of them.
        os.mkdir(os.path.join(work, f"t{index}"))
        provider = "shell" if index % 2 == 0 else "subprocess"
        info = await warm.call(
            "terminal/acquire",
            {
                "cwd": os.path.join(work, f"t{index}"),
                "taskId": f"soak{index}",
                "provider": provider,
            },
        )
        await warm.call("terminal/run", {"command": "true", "terminalId": info["id"]})
    # Measured with one connection open, at the start and at the end alike.
    fds_start, rss_start = proc.num_fds(), proc.memory_info().rss
    warm.close()
    deadline = time.monotonic() + args.minutes * 60
    started = time.monotonic()
    results = await asyncio.gather(
        *(task(path, i, work, deadline, args.seed) for i in range(args.tasks))
    )
    soaked = time.monotonic() - started
    peers = [peer for peer, _ in results]
    for peer in peers:
        peer.close()
    await asyncio.sleep(0.5)  # a bench: the server notices the closed connections
    checker = await Peer.connect(path)
    terminals: list[dict[str, Any]] = await checker.call("terminal/list", {})
    fds_end, rss_end = proc.num_fds(), proc.memory_info().rss
    tag = server_tag(proc)
    busy = [t["id"] for t in terminals if t["busy"]]
    shells = {t["pid"] for t in terminals if t["provider"] == "shell" and t["pid"]}
    watchdogs = {c.pid for c in proc.children() if "registry.watchdog" in " ".join(c.cmdline())}
    below = {c.pid for c in proc.children(recursive=True)}
    leaked = ((tagged(tag) if tag else set()) | below) - shells - watchdogs
    checker.close()
    server.terminate()
    await server.wait()
    await asyncio.sleep(1.0)  # a bench: give the kernel a moment to finish exits
    after = tagged(tag) if tag else set()
    total = sum(outcomes.values())
    print(f"soak: {args.tasks} tasks over the socket for {soaked / 60:.1f} min, {total} actions")
    for name, count in sorted(outcomes.items()):
        print(f"  {name:<32} {count}")
    print(f"terminals: {len(terminals)} ({len(shells)} shells), busy at the end: {busy}")
    print(f"processes leaked while serving: {len(leaked)} {sorted(leaked)[:10]}")
    print(f"processes left after the server stopped: {len(after)} {sorted(after)[:10]}")
    print(f"server fds (one client connected): start {fds_start}, end {fds_end}")
    print(f"server RSS: start {rss_start / 2**20:.1f} MiB, end {rss_end / 2**20:.1f} MiB")


if __name__ == "__main__":
    asyncio.run(main())
