"""Benchmark: the JSON-RPC server against the engine, the shell floor and pexpect.

In one run, interleaved round by round so machine noise falls on all alike:

(a) ``terminal/run {command: "true"}`` on a warm terminal over stdio, timed from
    writing the request to reading its response (a raw framed client, no library);
(b) the same command through the in-process engine (``terminal.run("true")``);
(c) the shell floor of ``bench_shell.py``: the same integrated bash in a bare PTY,
    blocking reads until the D marker;
(d) pexpect driving a persistent bash (``--norc``, a unique prompt,
    ``delaybeforesend=None``) with the exit code fetched by a second round trip
    (``echo $?``) -- the fastest plain-Python way to get an exit code.

Then ``didWrite`` throughput: ``seq 1 3000000`` over stdio to a client that only
counts the bytes of didWrite messages, against the same command through the
in-process terminal; and spawn-to-``initialize`` time of the server process.

Medians and p90; ratios are printed, nothing is asserted.

    python3 bench/bench_server.py [--n 300]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from typing import Any

import pexpect

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_shell import FloorShell

from protocol.framing import MessageFramer
from registry.config import Settings
from registry.terminals.shell import Phase, ShellTerminal

perf = time.perf_counter
SERVER = [sys.executable, "-m", "protocol.cli", "serve", "--stdio"]


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def ms(value: float) -> str:
    return f"{value * 1000:7.3f} ms"


class StdioClient:
    """A raw framed client: writes requests, reads until the matching response."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        assert process.stdin is not None
        assert process.stdout is not None
        self.process = process
        self._in = process.stdout
        self._out = process.stdin
        self._framer = MessageFramer()
        self._pending: list[bytes] = []
        self._next_id = 0
        self.did_write_bytes = 0

    @classmethod
    async def start(cls) -> tuple[StdioClient, float]:
        started = perf()
        process = await asyncio.create_subprocess_exec(
            *SERVER,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        client = cls(process)
        await client.request("initialize", {"processId": os.getpid(), "capabilities": {}})
        elapsed = perf() - started
        client.notify("initialized", {})
        return client, elapsed

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps(message).encode()
        self._out.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params: Any) -> None:
        self._send({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        msg_id = self._next_id
        self._send({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
        marker = b'"id": %d,' % msg_id
        while True:
            while self._pending:
                body = self._pending.pop(0)
                if b'"terminal/didWrite"' in body[:40]:
                    self.did_write_bytes += len(body)
                    continue
                if body.startswith(b'{"method"'):
                    continue
                if marker in body[:40]:
                    reply = json.loads(body)
                    if "error" in reply:
                        raise RuntimeError(reply["error"])
                    return reply["result"]
            data = await self._in.read(1 << 20)
            if not data:
                raise EOFError("server closed")
            self._pending.extend(b for b in self._framer.feed(data) if isinstance(b, bytes))

    async def close(self) -> None:
        await self.request("shutdown", None)
        self.notify("exit", None)
        await self.process.wait()


class PexpectBash:
    """The peer: pexpect on a persistent bash, exit code by a second round trip."""

    PROMPT = "__tr_bench_prompt__> "

    def __init__(self, cwd: str) -> None:
        self.child = pexpect.spawn(
            "bash",
            ["--norc", "--noprofile"],
            cwd=cwd,
            echo=False,
            encoding=None,
            env={**os.environ, "PS1": self.PROMPT, "HOME": cwd, "TERM": "dumb"},
        )
        self.child.delaybeforesend = None
        self._prompt = self.PROMPT.encode()
        self.child.expect_exact(self._prompt, timeout=15)

    def run(self, command: str) -> int:
        self.child.sendline(command.encode())
        self.child.expect_exact(self._prompt, timeout=30)
        self.child.sendline(b"echo $?")
        self.child.expect_exact(self._prompt, timeout=30)
        return int(self.child.before.strip().splitlines()[-1])

    def close(self) -> None:
        self.child.close(force=True)


async def until_prompt(terminal: ShellTerminal) -> None:
    while terminal.phase is not Phase.PROMPT:  # noqa: ASYNC110 - outside the timing
        await asyncio.sleep(0.001)


async def main(n: int) -> None:
    home = tempfile.mkdtemp(prefix="tr-bench-home-")
    cwd = tempfile.mkdtemp(prefix="tr-bench-cwd-")
    os.environ["HOME"] = home  # every shell below starts with an empty rc
    settings = Settings()
    spawn_times = []
    client, spawn = await StdioClient.start()
    spawn_times.append(spawn)
    terminal_info = await client.request("terminal/acquire", {"cwd": cwd})
    terminal_id = terminal_info["id"]
    await client.request("terminal/run", {"command": "true", "terminalId": terminal_id})
    ours = await ShellTerminal.spawn(1, cwd, settings, shell=shutil.which("bash"))
    await ours.ready()
    floor = FloorShell(shutil.which("bash") or "bash", cwd, settings, {})
    peer = PexpectBash(cwd)

    times: dict[str, list[float]] = {"stdio": [], "engine": [], "floor": [], "pexpect": []}
    for round_number in range(n):
        order = ["stdio", "engine", "floor", "pexpect"]
        if round_number % 2:
            order.reverse()
        for name in order:
            if name == "stdio":
                start = perf()
                result = await client.request(
                    "terminal/run", {"command": "true", "terminalId": terminal_id}
                )
                times[name].append(perf() - start)
                assert result["exitCode"] == 0
            elif name == "engine":
                await until_prompt(ours)
                start = perf()
                run = await ours.run("true")
                times[name].append(perf() - start)
                assert run.exit_code == 0
            elif name == "floor":
                times[name].append(floor.run("true").to_end)
            else:
                start = perf()
                code = peer.run("true")
                times[name].append(perf() - start)
                assert code == 0

    # didWrite throughput, stdio against the in-process terminal.
    command = "seq 1 3000000"
    size = sum(len(f"{i}\r\n") for i in range(1, 3_000_001))
    through: dict[str, list[float]] = {"stdio": [], "engine": []}
    for round_number in range(3):
        for name in ("stdio", "engine") if round_number % 2 == 0 else ("engine", "stdio"):
            if name == "stdio":
                client.did_write_bytes = 0
                start = perf()
                await client.request(
                    "terminal/run", {"command": command, "terminalId": terminal_id}
                )
                through[name].append(size / (perf() - start) / 1e6)
            else:
                await until_prompt(ours)
                start = perf()
                await ours.run(command)
                through[name].append(size / (perf() - start) / 1e6)

    await client.close()
    for _ in range(4):
        extra, spawn = await StdioClient.start()
        spawn_times.append(spawn)
        await extra.close()
    await ours.close()
    floor.close()
    peer.close()
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(cwd, ignore_errors=True)

    floor_median = statistics.median(times["floor"])
    print(f"round trip of `true`, N={n} each, interleaved (median / p90):")
    for name, label in (
        ("stdio", "terminal/run over stdio"),
        ("engine", "in-process engine"),
        ("floor", "shell floor (bare PTY to D)"),
        ("pexpect", "pexpect + `echo $?`"),
    ):
        values = times[name]
        print(
            f"  {label:<30} {ms(statistics.median(values))}  {ms(p90(values))}"
            f"   {statistics.median(values) / floor_median:5.2f}x floor"
        )
    stdio = statistics.median(times["stdio"])
    print(f"  stdio / floor:   {stdio / floor_median:.2f}x   (target <= 2.5x)")
    print(
        f"  stdio / pexpect: {stdio / statistics.median(times['pexpect']):.2f}x   (target <= 0.8x)"
    )
    print(
        f"  stdio - engine:  {(stdio - statistics.median(times['engine'])) * 1000:.3f} ms"
        " of JSON-RPC per request"
    )
    print(f"didWrite throughput, {command} ({size / 1e6:.1f} MB), median of 3:")
    stdio_rate = statistics.median(through["stdio"])
    engine_rate = statistics.median(through["engine"])
    print(f"  over stdio to a byte-counting client {stdio_rate:6.1f} MB/s")
    print(f"  the terminal in-process              {engine_rate:6.1f} MB/s")
    print(f"  ratio {stdio_rate / engine_rate:.2f}x   (target >= 0.5x)")
    print(
        f"spawn to initialize answer: median {statistics.median(spawn_times) * 1000:.0f} ms"
        f" (of {len(spawn_times)})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    asyncio.run(main(parser.parse_args().n))
