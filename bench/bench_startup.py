"""Benchmark: many shells starting at once -- how long to rich, and does any fall back?

Opens N shell terminals at once (an empty $HOME, or the user's own with --user-rc)
and runs ``true`` in each through the registry, as a burst of agents would.  Prints
the time from the request to the run's end (median, p90, max) and how many runs fell
back to the subprocess provider (target: none on a machine that is merely busy;
see registry/fallback.py for the shell's "own clock" the window is measured on).

    python3 bench/bench_startup.py [--n 50] [--user-rc]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time

from registry.config import Settings
from registry.registry import TerminalRegistry


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=50)
    parser.add_argument("--user-rc", action="store_true", help="keep the real $HOME")
    args = parser.parse_args()
    home = None if args.user_rc else tempfile.mkdtemp(prefix="tr-bench-home-")
    env = {"HOME": home} if home else None
    reg = TerminalRegistry(Settings())
    try:
        started = time.monotonic()
        shells = await asyncio.gather(
            *(reg.get_or_create("/tmp", f"t{i}", env=env) for i in range(args.n))
        )

        async def one(terminal_id: int) -> tuple[float, bool]:
            run = await reg.run("true", terminal_id=terminal_id)
            return time.monotonic() - started, bool(run.note)

        results = await asyncio.gather(*(one(t.id) for t in shells))
        times = sorted(r[0] for r in results)
        fell_back = sum(1 for r in results if r[1])
        print(f"{args.n} shells at once ({'user rc' if args.user_rc else 'empty HOME'}):")
        print(
            f"  request to end of `true`: median {statistics.median(times):.2f} s, "
            f"p90 {statistics.quantiles(times, n=10)[-1]:.2f} s, max {times[-1]:.2f} s"
        )
        print(f"  fell back to the subprocess provider: {fell_back} of {args.n}")
    finally:
        await reg.close()


if __name__ == "__main__":
    asyncio.run(main())
