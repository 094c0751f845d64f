"""Benchmark: where the server's spawn-to-``initialize`` time goes (issue 10, item 3).

Round by round, interleaved so machine noise falls on all alike, the wall time of:

* ``python -c pass`` -- the interpreter's own start-up (the target's unit), to its
  exit; each of the others to its first line out (an interpreter's exit after big
  imports is tens of ms of tearing down, which the server's answer does not wait for);
* ``import lsprotocol.types`` -- LSP's ~570 attrs classes, which pygls imports from
  every module (``pygls.exceptions`` included), so no pygls server avoids them; a
  second figure, from inside the same kind of process, is how much of that import
  is ``compile()`` of the methods attrs generates for each class;
* ``import pygls.lsp.server`` plus building lsprotocol's converter (what pygls's
  own default converter factory does at a server's start): the floor of any server
  built on pygls and lsprotocol;
* ``import protocol.serve``: that floor plus our own modules;
* spawning ``terminal-registry serve --stdio`` and reading its ``initialize``
  answer (with the look for shells it reports in that answer).

Medians of ``--rounds``; ratios against the target (2x Python start-up plus the
look for shells) are printed, nothing is asserted.

    python3 bench/bench_spawn.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import StdioClient, look_for_shells, process_time

perf = time.perf_counter

_PYGLS_FLOOR = (
    "import pygls.lsp.server, cattrs\n"
    "from lsprotocol.converters import get_converter\n"
    "get_converter(cattrs.Converter())\n"
)

# attrs compiles the source of each class's generated methods through the name
# ``compile`` in its own module: timed there, nothing else changes.
_COMPILE_SHARE = """
import builtins, time
import attr._make
spent = 0.0
def timed(*args, **kwargs):
    global spent
    start = time.perf_counter()
    try:
        return builtins.compile(*args, **kwargs)
    finally:
        spent += time.perf_counter() - start
attr._make.compile = timed
start = time.perf_counter()
import lsprotocol.types
print(spent, time.perf_counter() - start)
"""


async def until_said(code: str) -> float:
    """Spawn to the first line of ``python -c code; print()``: its interpreter's
    exit (tearing down what it imported, tens of ms for lsprotocol) is not counted,
    as the server's is not counted in its spawn-to-answer time."""
    start = perf()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        f"{code}\nprint(flush=True)",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
    )
    assert process.stdout is not None
    await process.stdout.readline()
    elapsed = perf() - start
    await process.wait()
    return elapsed


async def process_output(argv: list[str]) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL
    )
    out, _ = await process.communicate()
    return out.decode()


async def main(rounds: int) -> None:
    py = sys.executable
    figures: dict[str, list[float]] = {
        name: [] for name in ("python", "lsprotocol", "pygls", "ours", "spawn")
    }
    compiled: list[float] = []
    imported: list[float] = []
    for _ in range(rounds):
        figures["python"].append(await process_time([py, "-c", "pass"]))
        figures["lsprotocol"].append(await until_said("import lsprotocol.types"))
        figures["pygls"].append(await until_said(_PYGLS_FLOOR))
        figures["ours"].append(await until_said("import protocol.serve"))
        client, spawned = await StdioClient.start()
        figures["spawn"].append(spawned)
        await client.close()
        spent, whole = (await process_output([py, "-c", _COMPILE_SHARE])).split()
        compiled.append(float(spent))
        imported.append(float(whole))
    look = look_for_shells()
    median = {name: statistics.median(values) for name, values in figures.items()}
    target = 2 * (median["python"] + look)

    def row(label: str, value: float, note: str = "") -> None:
        print(f"  {label:<44} {value * 1000:7.1f} ms  {value / target:5.2f}x target {note}")

    print(f"spawn to initialize, medians of {rounds} interleaved rounds")
    print(
        f"  target: 2 x (python -c pass {median['python'] * 1000:.1f} ms"
        f" + the look for shells {look * 1000:.2f} ms) = {target * 1000:.1f} ms"
    )
    row("python -c pass", median["python"])
    row("+ import lsprotocol.types", median["lsprotocol"])
    print(
        f"    of which attrs compiling generated methods"
        f" {statistics.median(compiled) * 1000:7.1f} ms"
        f" of {statistics.median(imported) * 1000:.1f} ms measured inside"
    )
    row(
        "+ the rest of pygls, lsprotocol's converter",
        median["pygls"],
        "<- the floor of any pygls server",
    )
    row("+ our modules (import protocol.serve)", median["ours"])
    row(
        "spawn to initialize answer",
        median["spawn"],
        f"= {median['spawn'] / (median['python'] + look):.1f}x python (target <= 2x)",
    )
    print("  split of the answer's time:")
    parts = (
        ("python's start-up", median["python"]),
        ("lsprotocol.types", median["lsprotocol"] - median["python"]),
        ("the rest of pygls + converter", median["pygls"] - median["lsprotocol"]),
        ("our modules", median["ours"] - median["pygls"]),
        ("starting to serve, answering", median["spawn"] - median["ours"]),
    )
    for label, value in parts:
        print(f"    {label:<32} {value * 1000:7.1f} ms  {value / median['spawn'] * 100:5.1f} %")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    asyncio.run(main(parser.parse_args().rounds))
