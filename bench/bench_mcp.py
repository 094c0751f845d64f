"""Benchmark: a command through the MCP face against the same command through our client.

One registry server on a private socket (started once, stopped after), and two clients
of it in this process, each with a warm terminal of its own:

(a) ``terminal/run true`` through the Python client (``RegistryClient.run``): one
    JSON-RPC request, answered when the command has ended -- the baseline;
(b) ``run_command true`` through ``terminal-registry mcp --socket PATH``, driven by the
    MCP SDK's ``ClientSession`` over stdio: the MCP hop, then the face's own work (a
    background ``terminal/run``, the ``didEndRun`` it waits for; a run that printed
    nothing needs no ``terminal/output``);
(a2), (b2): the same with ``echo hi``, whose output costs the face one more request;
(c), (d), informational: ``terminal/list`` against the ``list_terminals`` tool, the
    cost of the MCP hop alone;
(e) the SDK's floor: a tool that does nothing, on an ``MCPServer`` served exactly as
    ``terminal-registry mcp`` is (same SDK, same stdio streams), so (b) - (a) - (e) is
    what the face itself adds.

Interleaved round by round (the order reversed every other round) so machine noise
falls on all alike; medians, p90 and the ratios (b)/(a), (b2)/(a2) and (d)/(c) are
printed, nothing is asserted (target for (b)/(a): <= 1.5x).

Wall time on a shared 2-core machine moves with its load; CPU time much less.  So the
CPU each case costs is printed too, per call and per process: this process (the SDK's
client and our client), the MCP server, the floor's server and the registry server,
read from the kernel's per-thread run time (``/proc/PID/task/*/schedstat``, in ns;
for this process, its CPU-time clock).

    python3 bench/bench_mcp.py [--n 200]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import psutil
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from protocol import daemon
from protocol.client import RegistryClient

perf = time.perf_counter

#: The SDK's floor: an MCPServer with one no-op tool, on the face's own stdio path.
FLOOR_SERVER = """
import anyio
from mcp.server.mcpserver import MCPServer
from protocol.mcp_face import _run_stdio

server = MCPServer("floor", log_level="WARNING")


@server.tool()
async def noop() -> str:  # async, as every tool of ours: no worker thread
    return "ok"


anyio.run(_run_stdio, server)
"""


def cpu_seconds(pid: int) -> float:
    """CPU time of every thread of ``pid`` so far (the kernel's own count, in ns).

    For this process the clock of its own CPU time: the kernel adds a running
    thread's current slice to ``schedstat`` only when it stops running."""
    if pid == os.getpid():
        return time.process_time()
    total = 0
    for task in os.listdir(f"/proc/{pid}/task"):
        # A thread that ended since the listing has nothing more to count.
        with (
            contextlib.suppress(FileNotFoundError),
            open(f"/proc/{pid}/task/{task}/schedstat") as f,
        ):
            total += int(f.read().split()[0])
    return total / 1e9


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


async def timed(call: Callable[[], Awaitable[object]]) -> float:
    start = perf()
    await call()
    return perf() - start


async def bench(n: int, socket_path: str, home: str, env: dict[str, str], server_pid: int) -> None:
    rpc_cwd = os.path.join(home, "rpc")
    mcp_cwd = os.path.join(home, "mcp")
    os.mkdir(rpc_cwd)
    os.mkdir(mcp_cwd)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "protocol.cli", "mcp", "--socket", socket_path],
        env=env,
    )
    floor_params = StdioServerParameters(command=sys.executable, args=["-c", FLOOR_SERVER], env=env)
    client = await RegistryClient.connect(socket_path)
    try:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
            stdio_client(floor_params) as (floor_read, floor_write),
            ClientSession(floor_read, floor_write) as floor,
        ):
            await session.initialize()
            await floor.initialize()
            # The MCP server, the floor's, and the registry server: all children of ours.
            children = {" ".join(c.cmdline()): c.pid for c in psutil.Process().children()}
            pids = {
                "this process": os.getpid(),
                "MCP server": next(p for cmd, p in children.items() if " mcp " in f"{cmd} "),
                "floor server": next(p for cmd, p in children.items() if "noop" in cmd),
                "registry server": server_pid,
            }

            async def rpc_run() -> None:
                result = await client.run("true", cwd=rpc_cwd, task_id="bench-rpc")
                assert result.exit_code == 0, result

            async def mcp_run() -> None:
                result = await session.call_tool("run_command", {"command": "true", "cwd": mcp_cwd})
                assert not result.is_error, result
                assert result.structured_content is not None
                assert result.structured_content["exit_code"] == 0, result

            async def rpc_echo() -> None:
                result = await client.run("echo hi", cwd=rpc_cwd, task_id="bench-rpc")
                assert result.output == "hi\n", result

            async def mcp_echo() -> None:
                result = await session.call_tool(
                    "run_command", {"command": "echo hi", "cwd": mcp_cwd}
                )
                assert result.structured_content is not None
                assert result.structured_content["output"] == "hi", result

            async def rpc_list() -> None:
                await client.list()

            async def mcp_list() -> None:
                await session.call_tool("list_terminals", {})

            async def sdk_floor() -> None:
                result = await floor.call_tool("noop", {})
                assert not result.is_error, result

            cases = {
                "(a) terminal/run true, Python client": rpc_run,
                "(b) run_command true, MCP": mcp_run,
                "(a2) terminal/run echo hi, Python client": rpc_echo,
                "(b2) run_command echo hi, MCP": mcp_echo,
                "(c) terminal/list, Python client": rpc_list,
                "(d) list_terminals, MCP": mcp_list,
                "(e) a no-op tool, same SDK and stdio": sdk_floor,
            }
            for call in cases.values():  # warm: shells started, code paths loaded
                for _ in range(5):
                    await call()
            times: dict[str, list[float]] = {name: [] for name in cases}
            cpu = {name: dict.fromkeys(pids, 0.0) for name in cases}
            for round_ in range(n):
                order = list(cases.items())
                if round_ % 2:
                    order.reverse()
                for name, call in order:
                    # This process read last before and first after: the other
                    # readings are not counted as its work.
                    before = {who: cpu_seconds(pid) for who, pid in reversed(pids.items())}
                    times[name].append(await timed(call))
                    for who, pid in pids.items():
                        cpu[name][who] += cpu_seconds(pid) - before[who]
    finally:
        await client.close()
    medians = {name: statistics.median(values) for name, values in times.items()}
    print(f"{'case':<44} {'median':>10} {'p90':>10}")
    for name, values in times.items():
        print(f"{name:<44} {medians[name] * 1000:7.2f} ms {p90(values) * 1000:7.2f} ms")
    run_ratio = (
        medians["(b) run_command true, MCP"] / medians["(a) terminal/run true, Python client"]
    )
    list_ratio = medians["(d) list_terminals, MCP"] / medians["(c) terminal/list, Python client"]
    echo_ratio = (
        medians["(b2) run_command echo hi, MCP"]
        / medians["(a2) terminal/run echo hi, Python client"]
    )
    print(f"run_command / terminal/run, true: {run_ratio:.2f}x (target <= 1.5x)")
    print(f"run_command / terminal/run, echo hi: {echo_ratio:.2f}x")
    print(f"list_terminals / terminal/list: {list_ratio:.2f}x (the MCP hop alone)")
    face = (
        medians["(b) run_command true, MCP"]
        - medians["(a) terminal/run true, Python client"]
        - medians["(e) a no-op tool, same SDK and stdio"]
    )
    print(f"the face's own cost per run_command, (b) - (a) - (e): {face * 1000:.2f} ms")
    print(f"\nCPU per call, ms: {' / '.join(pids)}")
    for name, spent in cpu.items():
        parts = " / ".join(f"{seconds / n * 1000:.2f}" for seconds in spent.values())
        print(f"{name:<44} {sum(spent.values()) / n * 1000:6.2f} total: {parts}")
    run_cpu = sum(cpu["(b) run_command true, MCP"].values()) / sum(
        cpu["(a) terminal/run true, Python client"].values()
    )
    print(f"CPU, run_command / terminal/run, true: {run_cpu:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="rounds (default 200)")
    args = parser.parse_args()
    runtime = tempfile.mkdtemp(prefix="tr-bench-mcp-")
    os.chmod(runtime, 0o700)
    home = tempfile.mkdtemp(prefix="tr-bench-home-")
    socket_path = os.path.join(runtime, "server.sock")
    unset = ("TERMINAL_REGISTRY_SOCKET", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update({"HOME": home, "SHELL": shutil.which("bash") or "", "XDG_RUNTIME_DIR": runtime})
    # The server's shells get the same empty HOME (no user rc files in the figures).
    os.environ.update({"HOME": home, "SHELL": env["SHELL"]})
    daemon.start_background_server(socket_path)
    with open(daemon.pid_file(socket_path)) as f:
        server_pid = int(f.read().split()[0])
    try:
        asyncio.run(bench(args.n, socket_path, home, env, server_pid))
    finally:
        daemon.stop_server(socket_path)
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
