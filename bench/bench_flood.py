"""Benchmark: does a flood of output starve a small request on another connection?

One socket server.  Connection A (a mirror: it reads everything it is sent) starts
N terminals each running ``yes`` (their output limit lifted).  Connection B, which
also reads everything (every client is sent every terminal's output), times small
requests: ``terminal/get`` of an idle terminal of its own, and ``terminal/run true``
in it.  The same requests are timed with no flood before it starts and after it is
killed, in the same run; medians, p90 and the ratio to the idle baseline are
printed, with the server's RSS and output throughput.  Nothing is asserted.

    python3 bench/bench_flood.py [--terminals 50] [--n 200] [--provider shell]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from typing import Any

import psutil

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from protocol.framing import MessageFramer, frame

SERVER = [sys.executable, "-m", "protocol.cli", "serve"]
perf = time.perf_counter


class RpcError(RuntimeError):
    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error.get("message"))
        self.code = error.get("code")


class Peer:
    """A raw framed client that reads everything it is sent and keeps only answers."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer
        self._framer = MessageFramer()
        self._ids = 0
        self._answers: dict[int, asyncio.Future[Any]] = {}
        self.notified_bytes = 0
        self._task = asyncio.ensure_future(self._read())

    @classmethod
    async def connect(cls, path: str) -> Peer:
        reader, writer = await asyncio.open_unix_connection(path, limit=2**24)
        peer = cls(reader, writer)
        await peer.call("initialize", {"processId": os.getpid(), "capabilities": {}})
        peer._send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        return peer

    def _send(self, message: dict[str, Any]) -> None:
        self._writer.write(frame(json.dumps(message).encode()))

    def request(self, method: str, params: Any) -> tuple[int, asyncio.Future[Any]]:
        """Send a request; its id and the future of its answer."""
        self._ids += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._answers[self._ids] = future
        self._send({"jsonrpc": "2.0", "id": self._ids, "method": method, "params": params})
        return self._ids, future

    def cancel(self, msg_id: int) -> None:
        self._send({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": msg_id}})

    async def call(self, method: str, params: Any) -> Any:
        _msg_id, future = self.request(method, params)
        return await asyncio.wait_for(future, 120)

    async def _read(self) -> None:
        while data := await self._reader.read(1 << 20):
            for body in self._framer.feed(data):
                if isinstance(body, bytes) and body.startswith(b'{"method"'):
                    self.notified_bytes += len(body)  # a notification: not parsed
                    continue
                message = json.loads(body)
                future = self._answers.pop(message.get("id"), None)
                if future is not None and not future.done():
                    if "error" in message:
                        future.set_exception(RpcError(message["error"]))
                    else:
                        future.set_result(message.get("result"))

    def close(self) -> None:
        self._task.cancel()
        self._writer.close()


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


async def timed(peer: Peer, terminal_id: int, n: int) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {"terminal/get": [], "terminal/run true": []}
    for index in range(n):
        start = perf()
        await peer.call("terminal/get", {"terminalId": terminal_id})
        found["terminal/get"].append(perf() - start)
        if index % 4 == 0:  # fewer: each is a whole command
            start = perf()
            await peer.call("terminal/run", {"command": "true", "terminalId": terminal_id})
            found["terminal/run true"].append(perf() - start)
    return found


def report(name: str, values: list[float], baseline: list[float]) -> None:
    median, base = statistics.median(values), statistics.median(baseline)
    print(
        f"  {name:<18} median {median * 1000:8.2f} ms  p90 {p90(values) * 1000:8.2f} ms"
        f"  ({median / base:5.1f}x idle median)"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--terminals", type=int, default=50)
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--provider", default="shell", choices=("shell", "subprocess"))
    parser.add_argument("--flood-seconds", type=float, default=3.0)
    parser.add_argument(
        "--serve", default="", help="more arguments for serve, e.g. '--max-queued-mb 4'"
    )
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="bench-flood-")
    os.chmod(work, 0o700)
    path = os.path.join(work, "s.sock")
    env = {**os.environ, "XDG_RUNTIME_DIR": work, "HOME": work}
    read_end, write_end = os.pipe()
    server = await asyncio.create_subprocess_exec(
        *SERVER,
        "--socket",
        path,
        *args.serve.split(),
        "--ready-fd",
        str(write_end),
        pass_fds=(write_end,),
        env=env,
    )
    os.close(write_end)
    await asyncio.to_thread(os.read, read_end, 16)
    os.close(read_end)
    proc = psutil.Process(server.pid)
    mirror = await Peer.connect(path)
    probe = await Peer.connect(path)
    try:
        # A directory of its own: no flooding task may be handed its idle terminal.
        quiet = os.path.join(work, "probe")
        os.mkdir(quiet)
        own = await probe.call("terminal/acquire", {"cwd": quiet, "taskId": "probe"})
        await probe.call("terminal/run", {"command": "true", "terminalId": own["id"]})
        idle = await timed(probe, own["id"], args.n)
        rss_idle = proc.memory_info().rss
        flooders = []
        for index in range(args.terminals):
            started = await mirror.call(
                "terminal/run",
                {
                    "command": "yes",
                    "cwd": work,
                    "taskId": f"flood{index}",
                    "provider": args.provider,
                    "background": True,
                    "limits": {"outputMb": 0},
                },
            )
            flooders.append(started["terminalId"])
        await asyncio.sleep(args.flood_seconds)  # a bench: let the flood reach its pace
        before = mirror.notified_bytes
        start = perf()
        flooded = await timed(probe, own["id"], args.n)
        elapsed = perf() - start
        rate = (mirror.notified_bytes - before) / elapsed / 2**20
        rss_flood = proc.memory_info().rss
        await asyncio.gather(*(mirror.call("terminal/kill", {"terminalId": t}) for t in flooders))
        after = await timed(probe, own["id"], args.n)
        rss_after = proc.memory_info().rss
        print(
            f"{args.terminals} {args.provider} terminals printing `yes`; small requests "
            f"on another connection (n={args.n})"
        )
        for name in idle:
            print(f" {name}:")
            report("idle (before)", idle[name], idle[name])
            report("during the flood", flooded[name], idle[name])
            report("idle (after)", after[name], idle[name])
        print(f" didWrite to one mirror during the flood: {rate:.1f} MB/s")
        print(
            f" server RSS: idle {rss_idle / 2**20:.0f} MiB, flood "
            f"{rss_flood / 2**20:.0f} MiB, after {rss_after / 2**20:.0f} MiB"
        )
    finally:
        mirror.close()
        probe.close()
        server.terminate()
        await server.wait()


if __name__ == "__main__":
    asyncio.run(main())
