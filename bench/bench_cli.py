"""Benchmark: a CLI call against Python's own start-up.

In one run, interleaved round by round so machine noise falls on all alike, each a
whole process timed from spawn to exit:

(a) ``python -c pass`` with the interpreter the CLI runs on (the floor);
(b) ``terminal-registry --help`` (what pip's console script runs: import and call
    ``protocol.cli.main``);
(c) ``terminal-registry run -- true`` against a warm background server (started once
    before the rounds, on a private socket, stopped after);
(d) ``terminal-registry list`` against the same server.

Medians and p90; ratios against (a) are printed, nothing is asserted (target for
(b) and (c): <= 1.5x).

    python3 bench/bench_cli.py [--n 30]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

perf = time.perf_counter
#: What the installed ``terminal-registry`` script does (pip's console-script wrapper).
CLI = [sys.executable, "-c", "import sys; from protocol.cli import main; sys.exit(main())"]


def timed(argv: list[str], env: dict[str, str]) -> float:
    start = perf()
    subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return perf() - start


def p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="rounds (default 30)")
    args = parser.parse_args()
    runtime = tempfile.mkdtemp(prefix="tr-bench-cli-")
    os.chmod(runtime, 0o700)
    home = tempfile.mkdtemp(prefix="tr-bench-home-")
    # As a user runs it: bytecode cached (this workplace's shells set
    # PYTHONDONTWRITEBYTECODE, which makes every start compile every module).
    unset = ("TERMINAL_REGISTRY_SOCKET", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update({"XDG_RUNTIME_DIR": runtime, "HOME": home, "SHELL": shutil.which("bash") or ""})
    cases = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "terminal-registry --help": [*CLI, "--help"],
        "terminal-registry run -- true": [*CLI, "run", "--cwd", home, "--", "true"],
        "terminal-registry list": [*CLI, "list"],
    }
    try:
        subprocess.run([*CLI, "run", "--cwd", home, "--", "true"], env=env, check=True)
        times: dict[str, list[float]] = {name: [] for name in cases}
        for round_ in range(args.n):
            order = list(cases.items())
            if round_ % 2:
                order.reverse()
            for name, argv in order:
                times[name].append(timed(argv, env))
        floor = statistics.median(times["python -c pass"])
        print(f"{'case':<32} {'median':>10} {'p90':>10} {'ratio':>7}")
        for name, values in times.items():
            median = statistics.median(values)
            print(
                f"{name:<32} {median * 1000:8.1f} ms {p90(values) * 1000:8.1f} ms "
                f"{median / floor:6.2f}x"
            )
    finally:
        subprocess.run([*CLI, "stop"], env=env, stdout=subprocess.DEVNULL)
        shutil.rmtree(runtime, ignore_errors=True)
        shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    main()
