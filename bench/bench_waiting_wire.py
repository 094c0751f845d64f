"""Benchmark: commands that wait, told over the wire (printed, never asserted).

The engine's own figures are bench_waiting.py's (a bare bash and the watcher).  This
one measures the whole path a client sees: the real server over stdio, shells with
our integration, real programs.

(a) Detection latency: from the arrival of the last ``terminal/didWrite`` before the
    change (the one carrying the prompt) to the arrival of the ``terminal/didChange``
    that says the terminal waits; median and p90 per case over ``--rounds`` runs.
    Both notifications travel the same pipe, so this is the server's detection time
    plus at most the 20 ms didWrite coalescing window (which makes it look shorter).
    Target (issue 8): median <= 250 ms.
(b) The answer loop: ``terminal/run`` with ``yieldOnInput`` from request to answer,
    for ``read -p 'go? '``; then write, ``terminal/wait`` to the end.
(c) Negatives: waiting states announced while ``sleep``, ``sleep | cat``, ``yes >
    /dev/null`` and a loop printing every 0.2 s ran.  Target: zero.

Run: ``python3 bench/bench_waiting_wire.py [--rounds 5]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_waiting import pct, prepare

from tests.rpc import StdioServer

PY = sys.executable
WAITING = {"waitingForInput", "waitingForPassword", "fullScreen"}


@dataclass
class Case:
    name: str
    command: str
    answer: dict[str, Any]  # terminal/write data or terminal/sendKeys keys
    needs: str | None = None


NODE = (
    "const rl=require('readline').createInterface({input:process.stdin,output:process.stdout});"
    "rl.question('name? ',a=>rl.close())"
)
CASES = [
    Case("read -p", "read -p 'continue? ' x", {"data": "\r"}),
    Case("python input()", f"{PY} -c 'input(\"name? \")'", {"data": "\r"}),
    Case("python REPL", f"{PY} -q", {"data": "exit()\r"}),
    Case("getpass", f"{PY} -c 'import getpass; getpass.getpass()'", {"data": "x\r"}),
    Case("cat", "cat", {"keys": ["C-d"]}),
    Case("less", "less long.txt", {"keys": ["q"]}, "less"),
    Case("vim", "vim -u NONE -N x.txt", {"keys": ["Escape", ":qa!", "Enter"]}, "vim"),
    Case("git log (pager)", "GIT_PAGER=less git -C repo log", {"keys": ["q"]}, "git"),
    Case("node readline", f'node -e "{NODE}"', {"data": "\r"}, "node"),
]
NEGATIVES = [
    "sleep 2",
    "sleep 2 | cat",
    "timeout 2 yes > /dev/null",
    "for i in $(seq 10); do echo $i; sleep 0.2; done",
]


class TimedServer(StdioServer):
    """The server, each message stamped with the time it was taken off the pipe."""

    async def _next(self) -> dict[str, Any]:
        message = await super()._next()
        message["_at"] = time.monotonic()
        return message


class Timeline:
    """One terminal's notifications from a mark on: when it was last written, and
    when it was said to wait."""

    def __init__(self, server: TimedServer) -> None:
        self.server = server
        self.seen = 0

    async def until_waiting(self, terminal_id: int) -> tuple[float, float, str]:
        """(arrival of the last didWrite before it, of the didChange, the state)."""
        last_write = 0.0
        while True:
            notes = self.server.notifications
            while self.seen < len(notes):
                note = notes[self.seen]
                self.seen += 1
                params = note.get("params") or {}
                if note["method"] == "terminal/didWrite" and params["terminalId"] == terminal_id:
                    last_write = note["_at"]
                if (
                    note["method"] == "terminal/didChange"
                    and params["id"] == terminal_id
                    and params.get("state") in WAITING
                ):
                    return last_write, note["_at"], params["state"]
            self.server.notifications.append(await self.server._next())


async def latency(server: TimedServer, directory: Path, rounds: int) -> None:
    print("\n(a) didWrite of the prompt -> didChange waiting, at the client (ms)")
    print(f"{'case':18} {'state':20} {'median':>7} {'p90':>7} {'min':>7} {'max':>7}  n")
    timeline = Timeline(server)
    everything: list[float] = []
    terminal = await server.call("terminal/acquire", {"cwd": str(directory), "taskId": "bench"})
    tid = terminal["id"]
    for case in CASES:
        if case.needs and shutil.which(case.needs) is None:
            print(f"{case.name:18} (skipped: no {case.needs})")
            continue
        samples: list[float] = []
        state = ""
        for _ in range(rounds):
            timeline.seen = len(server.notifications)
            run = await server.call(
                "terminal/run", {"command": case.command, "terminalId": tid, "background": True}
            )
            wrote, changed, state = await timeline.until_waiting(tid)
            samples.append((changed - wrote) * 1000)
            method = "terminal/write" if "data" in case.answer else "terminal/sendKeys"
            await server.call(method, {"terminalId": tid, **case.answer})
            await server.call("terminal/wait", {"runId": run["runId"], "yieldOnInput": False})
        everything += samples
        print(
            f"{case.name:18} {state:20} {statistics.median(samples):7.0f} "
            f"{pct(samples, 0.9):7.0f} {min(samples):7.0f} {max(samples):7.0f}  {len(samples)}"
        )
    print(
        f"{'all cases':39} {statistics.median(everything):7.0f} {pct(everything, 0.9):7.0f}"
        f" {min(everything):7.0f} {max(everything):7.0f}  {len(everything)}"
    )


async def answer_loop(server: TimedServer, directory: Path, rounds: int) -> None:
    print("\n(b) the answer loop: run with yieldOnInput -> answer; write; wait -> end (ms)")
    asked: list[float] = []
    ended: list[float] = []
    for _ in range(rounds):
        start = time.monotonic()
        run = await server.call(
            "terminal/run",
            {
                "command": "read -p 'go? ' x; echo \"got $x\"",
                "cwd": str(directory),
                "taskId": "loop",
                "yieldOnInput": True,
            },
        )
        asked.append((time.monotonic() - start) * 1000)
        assert run.get("waitingFor", {}).get("prompt") == "go? ", run
        start = time.monotonic()
        await server.call("terminal/write", {"terminalId": run["terminalId"], "data": "y\r"})
        done = await server.call("terminal/wait", {"runId": run["runId"]})
        ended.append((time.monotonic() - start) * 1000)
        assert done["state"] == "completed", done
    print(
        f"  run -> waitingFor   median {statistics.median(asked):6.0f}  p90 {pct(asked, 0.9):6.0f}"
    )
    print(
        f"  write + wait -> end median {statistics.median(ended):6.0f}  p90 {pct(ended, 0.9):6.0f}"
    )


async def negatives(server: TimedServer, directory: Path) -> None:
    print("\n(c) negatives: waiting states announced while they ran")
    for command in NEGATIVES:
        mark = len(server.notifications)
        done = await server.call("terminal/run", {"command": command, "cwd": str(directory)})
        await server.call("terminal/get", {"terminalId": done["terminalId"]})  # drain notes
        false = [
            n
            for n in server.notifications[mark:]
            if n["method"] == "terminal/didChange" and n["params"].get("state") in WAITING
        ]
        print(f"  {command:52} exit {done['exitCode']}  false reports {len(false)}")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        prepare(directory)
        server = await TimedServer.start()
        try:
            await server.initialize({"hotTimeoutMs": 300})
            await latency(server, directory, args.rounds)
            await answer_loop(server, directory, args.rounds)
            await negatives(server, directory)
        finally:
            await server.stop()


if __name__ == "__main__":
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]
    asyncio.run(main())
