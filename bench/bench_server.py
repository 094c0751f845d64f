"""Benchmark: the JSON-RPC server against the engine, the shell floor and pexpect.

In one run, interleaved round by round so machine noise falls on all alike:

(a) ``terminal/run {command: "true"}`` on a warm terminal over stdio, timed from
    writing the request to reading its response (a raw framed client, no library);
(b) the same command through the in-process engine (``terminal.run("true")``);
(c) the shell floor of ``bench_shell.py``: the same integrated bash in a bare PTY,
    blocking reads until the D marker (so (b)/(c) is what the engine adds);
(c') the issue's floor: a minimal OSC 633 bash in the same bare PTY -- PS0 prints
    C, PROMPT_COMMAND prints D and P;Cwd, no nonce, no E, no DEBUG trap -- the least
    a marker-driven shell can cost (so (c)/(c') is what our integration adds);
(e) ``terminal/get`` over the same stdio: a request that does no work, the floor
    of a JSON-RPC round trip through pygls and this client (so (a) - (b) - (e) is
    what a run's own wire work adds: its notifications, its result);
(f) the same request to an asyncio server on the same pipes that only frames,
    parses and answers ``null`` (so (e) - (f) is pygls's dispatch and our handler);
(d) pexpect driving a persistent bash (``--norc``, a unique prompt,
    ``delaybeforesend=None``) with the exit code fetched by a second round trip
    (``echo $?``) -- the fastest plain-Python way to get an exit code.

Then ``didWrite`` throughput: ``seq 1 3000000`` over stdio to a client that only
counts the bytes of didWrite messages, against the same command through the
in-process terminal; and spawn-to-``initialize`` time of the server process against
``python -c pass`` plus the server's look for shells, with the import of
``lsprotocol.types`` timed the same way.

Medians and p90; ratios are printed, nothing is asserted.

    python3 bench/bench_server.py [--n 300]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
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
from bench_shell import FloorRun, FloorShell, deadline

from protocol.framing import MessageFramer
from registry.config import Settings
from registry.terminals.shell import Phase, ShellTerminal

perf = time.perf_counter
SERVER = [sys.executable, "-m", "protocol.cli", "serve", "--stdio"]


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def ms(value: float) -> str:
    return f"{value * 1000:7.3f} ms"


async def process_time(argv: list[str]) -> float:
    """Wall time of a whole process, spawn to exit."""
    start = perf()
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    await process.wait()
    return perf() - start


#: (f) The floor under pygls: an asyncio server on the same stdio pipes that frames,
#: parses and answers every request with ``null`` -- no dispatch, no handler.
ASYNCIO_ECHO = [
    sys.executable,
    "-c",
    """
import asyncio, json, os, sys
from protocol.framing import MessageFramer, frame

class Echo(asyncio.Protocol):
    def __init__(self, out):
        self.out, self.framer = out, MessageFramer()
    def data_received(self, data):
        for body in self.framer.feed(data):
            message = json.loads(body)
            if "id" in message:
                reply = {"id": message["id"], "jsonrpc": "2.0", "result": None}
                self.out.write(frame(json.dumps(reply).encode()))
    def connection_lost(self, exc):
        done.set_result(None)

async def main():
    global done
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    out, _ = await loop.connect_write_pipe(asyncio.Protocol, os.fdopen(1, "wb", 0))
    await loop.connect_read_pipe(lambda: Echo(out), os.fdopen(0, "rb", 0))
    await done

asyncio.run(main())
""",
]


def look_for_shells() -> float:
    """Median time of the server's look for shells (answered in ``initialize``)."""
    from protocol import connection

    looks = []
    for _ in range(20):
        connection._shells_seen = None  # the look itself, not its 30 s cache
        start = perf()
        connection.available_shells()
        looks.append(perf() - start)
    return statistics.median(looks)


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
    async def start(cls, argv: list[str] = SERVER) -> tuple[StdioClient, float]:
        started = perf()
        process = await asyncio.create_subprocess_exec(
            *argv,
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


class MinimalShell(FloorShell):
    """A bash whose only integration is PS0 -> C and PROMPT_COMMAND -> D, P;Cwd."""

    RC = (
        "PS0='\\e]633;C\\a'\n"
        'PROMPT_COMMAND=\'builtin printf "\\e]633;D;%s\\a\\e]633;P;Cwd=%s\\a" "$?" "$PWD"\'\n'
        "PS1='\\[\\e]633;A\\a\\]$ \\[\\e]633;B\\a\\]'\n"
    )

    def __init__(self, cwd: str, settings: Settings) -> None:
        from registry.terminals.children import agent_environment, reset_signals
        from registry.terminals.pty import spawn_child

        self.launch = None  # type: ignore[assignment]
        self._rc = tempfile.NamedTemporaryFile("w", suffix=".bash", delete=False)  # noqa: SIM115
        self._rc.write(self.RC)
        self._rc.close()
        env = agent_environment(dict(os.environ), term="xterm-256color")
        self.child = spawn_child(
            [shutil.which("bash") or "bash", "--noprofile", "--rcfile", self._rc.name, "-i"],
            env=env,
            cwd=cwd,
            rows=settings.rows,
            cols=settings.cols,
            preexec_fn=reset_signals,
        )
        self.fd = self.child.child_fd
        os.set_blocking(self.fd, True)
        self.end_marker = b"\x1b]633;D;0\x07"
        self.cwd_marker = b"\x1b]633;P;Cwd=" + cwd.encode() + b"\x07"
        self.prompt_marker = b"\x1b]633;B\x07"
        with deadline(15, "minimal shell start-up"):
            self._read_until(self.prompt_marker, b"", None)

    def run(self, command: str, sizes: list[int] | None = None) -> FloorRun:
        return super().run(command, sizes)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.child.close(force=True)
        os.unlink(self._rc.name)


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
    minimal = MinimalShell(cwd, settings)
    peer = PexpectBash(cwd)
    echo, _ = await StdioClient.start(ASYNCIO_ECHO)

    times: dict[str, list[float]] = {
        "stdio": [],
        "engine": [],
        "floor": [],
        "minimal": [],
        "pexpect": [],
        "noop": [],
        "echo": [],
    }
    for round_number in range(n):
        order = ["stdio", "engine", "floor", "minimal", "pexpect", "noop", "echo"]
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
            elif name == "noop":
                start = perf()
                await client.request("terminal/get", {"terminalId": terminal_id})
                times[name].append(perf() - start)
            elif name == "echo":
                start = perf()
                await echo.request("terminal/get", {"terminalId": terminal_id})
                times[name].append(perf() - start)
            elif name == "engine":
                await until_prompt(ours)
                start = perf()
                run = await ours.run("true")
                times[name].append(perf() - start)
                assert run.exit_code == 0
            elif name == "floor":
                times[name].append(floor.run("true").to_end)
            elif name == "minimal":
                times[name].append(minimal.run("true").to_end)
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
    echo.process.stdin.close()  # type: ignore[union-attr]
    await echo.process.wait()
    # Issue 10's item 3: spawn to initialize against Python's own start-up plus the
    # look for shells the server does before it answers; and the import that stands
    # between (lsprotocol's types, which pygls imports), each in the same rounds.
    python_times: list[float] = []
    lsprotocol_times: list[float] = []
    for _ in range(4):
        extra, spawn = await StdioClient.start()
        spawn_times.append(spawn)
        await extra.close()
        python_times.append(await process_time([sys.executable, "-c", "pass"]))
        lsprotocol_times.append(
            await process_time([sys.executable, "-c", "import lsprotocol.types"])
        )
    look = look_for_shells()
    await ours.close()
    floor.close()
    minimal.close()
    peer.close()
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(cwd, ignore_errors=True)

    floor_median = statistics.median(times["minimal"])
    print(f"round trip of `true`, N={n} each, interleaved (median / p90):")
    for name, label in (
        ("stdio", "terminal/run over stdio"),
        ("engine", "in-process engine"),
        ("floor", "our bash, bare PTY to D"),
        ("minimal", "minimal-marker bash to D"),
        ("pexpect", "pexpect + `echo $?`"),
        ("noop", "terminal/get over stdio"),
        ("echo", "asyncio echo over stdio"),
    ):
        values = times[name]
        print(
            f"  {label:<30} {ms(statistics.median(values))}  {ms(p90(values))}"
            f"   {statistics.median(values) / floor_median:5.2f}x minimal"
        )
    stdio = statistics.median(times["stdio"])
    engine = statistics.median(times["engine"])
    ours_bash = statistics.median(times["floor"])
    print(f"  stdio / minimal floor: {stdio / floor_median:.2f}x   (target <= 2.5x)")
    print(
        f"  stdio / pexpect:       {stdio / statistics.median(times['pexpect']):.2f}x"
        "   (target <= 0.8x)"
    )
    print("  where the time goes (medians):")
    print(f"    the minimal shell and PTY    {floor_median * 1000:.3f} ms")
    print(f"    our integration adds         {(ours_bash - floor_median) * 1000:.3f} ms")
    print(f"    the engine adds              {(engine - ours_bash) * 1000:.3f} ms")
    noop = statistics.median(times["noop"])
    print(f"    JSON-RPC over stdio adds     {(stdio - engine) * 1000:.3f} ms, of which")
    print(f"      a request doing nothing    {noop * 1000:.3f} ms (terminal/get), of which")
    echoed = statistics.median(times["echo"])
    print(f"        asyncio, framing, JSON   {echoed * 1000:.3f} ms (the echo server)")
    print(f"        pygls's dispatch, ours   {(noop - echoed) * 1000:.3f} ms")
    print(f"      the run's wire work        {(stdio - engine - noop) * 1000:.3f} ms")
    print(f"didWrite throughput, {command} ({size / 1e6:.1f} MB), median of 3:")
    stdio_rate = statistics.median(through["stdio"])
    engine_rate = statistics.median(through["engine"])
    print(f"  over stdio to a byte-counting client {stdio_rate:6.1f} MB/s")
    print(f"  the terminal in-process              {engine_rate:6.1f} MB/s")
    print(f"  ratio {stdio_rate / engine_rate:.2f}x   (target >= 0.5x)")
    spawned = statistics.median(spawn_times)
    python_start = statistics.median(python_times)
    print(
        f"spawn to initialize answer: median {spawned * 1000:.0f} ms (of {len(spawn_times)});"
        f" python -c pass {python_start * 1000:.0f} ms + the look for shells"
        f" {look * 1000:.1f} ms: {spawned / (python_start + look):.1f}x   (target <= 2x)"
    )
    print(
        f"  of which importing lsprotocol.types (pygls imports it):"
        f" {(statistics.median(lsprotocol_times) - python_start) * 1000:.0f} ms"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300)
    asyncio.run(main(parser.parse_args().n))
