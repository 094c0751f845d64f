"""Registry benchmark: lookup cost against the number of terminals, and report cost.

(a) ``get_or_create`` that finds an existing terminal, with 10 and with 1,000
    terminals registered (each in its own directory), interleaved; the ratio should
    stay near 1 because lookups go through the (provider, cwd) index, not a scan.
    For contrast, a linear scan over the same terminals is timed too.
(b) ``environment_details`` over 100 terminals, each with a completed run whose
    output has not been retrieved (so every report formats 100 runs); the runs'
    output is refilled between rounds.

Subprocess terminals are used: they hold no process between commands, so a
thousand of them cost only their bookkeeping.  Figures are medians (and p90) over
repeated rounds; nothing here is asserted.

    python3 bench/bench_registry.py [--rounds 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from registry.config import Settings
from registry.registry import TerminalRegistry, normalise_path
from registry.terminals.base import Terminal


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1] if len(values) >= 10 else max(values)


async def _populate(reg: TerminalRegistry, root: Path, count: int) -> list[str]:
    dirs = []
    for i in range(count):
        d = root / f"d{i}"
        d.mkdir(parents=True, exist_ok=True)
        dirs.append(str(d))
        await reg.get_or_create(str(d), f"task{i}", "subprocess")
    return dirs


def _scan(terminals: list[Terminal], key: str) -> Terminal | None:
    for terminal in terminals:
        if not terminal.busy and normalise_path(terminal.cwd) == key:
            return terminal
    return None


async def bench_lookup(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        small = TerminalRegistry(Settings())
        large = TerminalRegistry(Settings())
        small_dirs = await _populate(small, Path(tmp, "small"), 10)
        large_dirs = await _populate(large, Path(tmp, "large"), 1000)
        timings: dict[str, list[float]] = {"10": [], "1000": [], "scan 1000": []}
        large_terminals = large.list()
        for r in range(rounds):
            for name, reg, dirs in (("10", small, small_dirs), ("1000", large, large_dirs)):
                cwd = dirs[(r * 7) % len(dirs)]
                start = time.perf_counter()
                await reg.get_or_create(cwd, f"task{(r * 7) % len(dirs)}", "subprocess")
                timings[name].append(time.perf_counter() - start)
            key = normalise_path(large_dirs[(r * 7) % 1000])
            start = time.perf_counter()
            _scan(large_terminals, key)
            timings["scan 1000"].append(time.perf_counter() - start)
        assert len(small.list()) == 10
        assert len(large.list()) == 1000
        await small.close()
        await large.close()
    print("(a) get_or_create finding an existing terminal")
    for name, values in timings.items():
        print(
            f"    {name:>10} terminals: median {statistics.median(values) * 1e6:8.1f} us"
            f"   p90 {_p90(values) * 1e6:8.1f} us"
        )
    ratio = statistics.median(timings["1000"]) / statistics.median(timings["10"])
    print(f"    ratio 1000 / 10: {ratio:.2f}  (an index keeps this near 1; a scan would not)")


async def bench_report(rounds: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        reg = TerminalRegistry(Settings())
        dirs = await _populate(reg, Path(tmp), 100)
        terminals = [
            await reg.get_or_create(d, f"task{i}", "subprocess") for i, d in enumerate(dirs)
        ]
        command = "seq 1 50; printf 'progress 50%%\\rprogress 100%%\\n'"
        timings = []
        for _ in range(max(3, rounds // 20)):
            await asyncio.gather(*(t.run(command) for t in terminals))
            start = time.perf_counter()
            report = await reg.environment_details(None, cooldown_timeout=0)
            timings.append(time.perf_counter() - start)
            assert len(report.terminals) == 100
        size = len(report.markdown)
        await reg.close()
    print("(b) environment_details over 100 terminals with unread completed runs")
    print(
        f"    median {statistics.median(timings) * 1e3:.2f} ms   p90 {_p90(timings) * 1e3:.2f} ms"
        f"   ({size} characters of markdown)"
    )


async def main(rounds: int) -> None:
    await bench_lookup(rounds)
    await bench_report(rounds)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    asyncio.run(main(parser.parse_args().rounds))
