"""Benchmark: how fast and how cheaply a waiting command is told.

What it measures (printed, never asserted)
------------------------------------------
(a) Detection latency across a matrix of real programs in a real PTY: from the
    last byte of output before the change (the prompt's) to the watcher's
    state-change callback; median and p90 over ``--rounds`` runs of each.
    Target (issue 8): median <= 250 ms.
(b) False reports: negatives (``sleep``, ``sleep | cat``, ``yes > /dev/null``, a
    loop printing every 0.2 s) run to their end; any waiting state is counted.
    Target: zero.
(c) CPU of the detector: this process's CPU time with N terminals watched against
    the same terminals read but not watched, in alternating windows, as a share of
    one core.  Idle shells at their prompt (10 and 100), 10 shells each running a
    loop that prints every 0.2 s (a look after each quiet spell), and 10 shells each
    running a silent ``sleep`` (safety polls and backoff only).
    Target: < 1 % of a core for 100 idle terminals.
(d) The read path: a bulk ``seq`` read with the screen model and watcher fed on
    every chunk against reading alone (throughput ratio), and the screen model's
    own costs: ``feed`` per MB of coloured output, ``prompt_line`` for a short
    prompt and for a full window of escape-dense output.
(e) One look (``TerminalProbe.sample``) at a shell at its prompt, at ``read``, at
    node (seven threads) and at vim: median µs.

The terminals are ``bash --norc --noprofile`` in ptyprocess PTYs (the test
harness, tests/waitpty.py), each with a ScreenModel and a WaitWatcher with the
default settings.

Run: ``python3 bench/bench_waiting.py [--rounds 5] [--window 4] [--quick]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from registry.screen import ScreenModel
from registry.waiting import TerminalProbe, TerminalState
from tests.waitpty import PtyShell

T = TerminalState
PY = sys.executable


@dataclass
class Case:
    name: str
    command: str
    expect: TerminalState
    leave: Callable[[PtyShell], None]
    needs: str | None = None


def keys(*names: str) -> Callable[[PtyShell], None]:
    return lambda sh: sh.send_keys(list(names))


def typed(data: bytes) -> Callable[[PtyShell], None]:
    return lambda sh: sh.write(data)


NODE_RL = (
    "const rl=require('readline').createInterface({input:process.stdin,output:process.stdout});"
    "rl.question('name? ',a=>rl.close())"
)
APT = (
    "import sys; print('The following NEW packages will be installed:'); print('  foo');"
    " sys.stdout.write('Do you want to continue? [Y/n] '); sys.stdout.flush();"
    " sys.stdin.readline()"
)

CASES = [
    Case("read -p", "read -p 'continue? ' x", T.WAITING_FOR_INPUT, typed(b"\r")),
    Case("read -e -p", "read -e -p 'continue? ' x", T.WAITING_FOR_INPUT, typed(b"\r")),
    Case("python input()", f"{PY} -c 'input(\"name? \")'", T.WAITING_FOR_INPUT, typed(b"\r")),
    Case("python REPL", f"{PY} -q", T.WAITING_FOR_INPUT, typed(b"exit()\r")),
    Case("cat", "cat", T.WAITING_FOR_INPUT, keys("C-d")),
    Case("( read x )", "( read x )", T.WAITING_FOR_INPUT, typed(b"\r")),
    Case("read x | cat", "read x | cat", T.WAITING_FOR_INPUT, typed(b"\r")),
    Case(
        "getpass",
        f"{PY} -c 'import getpass; getpass.getpass()'",
        T.WAITING_FOR_PASSWORD,
        typed(b"x\r"),
    ),
    Case("apt-style [Y/n]", f'{PY} -c "{APT}"', T.WAITING_FOR_INPUT, typed(b"y\r")),
    Case("less (alt screen)", "LESS= less long.txt", T.FULL_SCREEN, keys("q")),
    Case("vim -u NONE", "vim -u NONE -N x.txt", T.FULL_SCREEN, keys("Escape", ":qa!", "Enter")),
    Case("git log (LESS=FRX)", "git -C repo log", T.FULL_SCREEN, keys("q")),
    Case("top", "top", T.FULL_SCREEN, keys("q"), needs="top"),
    Case("node readline", f'node -e "{NODE_RL}"', T.WAITING_FOR_INPUT, typed(b"\r"), "node"),
    Case("node REPL", "node", T.WAITING_FOR_INPUT, typed(b".exit\r"), "node"),
    Case(
        "script -qc read",
        "script -qc 'read -p \"inner? \" x' /dev/null",
        T.WAITING_FOR_INPUT,
        typed(b"\r"),
        "script",
    ),
    Case("cat & (stopped job)", "cat &", T.STOPPED_JOB, lambda sh: sh.submit("kill -9 $!")),
]

NEGATIVES = [
    ("sleep 2", None),
    ("sleep 2 | cat", None),
    ("yes > /dev/null", 2.0),
    ("for i in $(seq 10); do echo $i; sleep 0.2; done", None),
]


def prepare(directory: Path) -> None:
    (directory / "long.txt").write_text("\n".join(f"line {n}" for n in range(300)))
    repo = directory / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.name=b", "-c", "user.email=b@b"]
    subprocess.run([*git, "init", "-q"], check=True)
    body = "\n".join(f"body line {n}" for n in range(80))
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", f"subject\n\n{body}"], check=True)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def latency(directory: Path, rounds: int) -> None:
    print("\n(a) detection latency, last output byte -> state change (ms)")
    print(f"{'case':24} {'state':20} {'median':>7} {'p90':>7} {'min':>7} {'max':>7}  n")
    sh = PtyShell(str(directory), env={"LESS": "FRX", "PAGER": "less"})
    everything: list[float] = []
    try:
        await sh.ready()
        for case in CASES:
            if case.needs and shutil.which(case.needs) is None:
                print(f"{case.name:24} (skipped: no {case.needs})")
                continue
            samples: list[float] = []
            wrong: list[str] = []
            for _ in range(rounds):
                mark = len(sh.timeline)
                sh.submit(case.command)
                found = await sh.until(lambda s: s.state not in (T.RUNNING, T.IDLE), 15)
                state, last = next(
                    (s, at) for s, at in sh.timeline[mark:] if s.state is found.state
                )
                if state.state is not case.expect:
                    wrong.append(state.state.value)
                samples.append((state.since - last) * 1000)
                case.leave(sh)
                await sh.until_prompt(15)
                await sh.until(lambda s: s.state is T.IDLE, 15)
            everything += samples
            note = f"  WRONG: {wrong}" if wrong else ""
            print(
                f"{case.name:24} {case.expect.value:20} {statistics.median(samples):7.0f} "
                f"{pct(samples, 0.9):7.0f} {min(samples):7.0f} {max(samples):7.0f}  "
                f"{len(samples)}{note}"
            )
        print(
            f"{'all cases':45} {statistics.median(everything):7.0f} {pct(everything, 0.9):7.0f}"
            f" {min(everything):7.0f} {max(everything):7.0f}  {len(everything)}"
        )
    finally:
        sh.close()


async def negatives(directory: Path) -> None:
    print("\n(b) negatives: waiting states reported while they ran")
    for command, limit in NEGATIVES:
        sh = PtyShell(str(directory))
        try:
            await sh.ready()
            sh.submit(command)
            if limit is None:
                await sh.until_prompt(30)
            else:
                await sh.until_checks(lambda c, limit=limit: c.deep and c.quiet >= limit)
                sh.send_keys(["C-c"])
                await sh.until_prompt(10)
            false = [s for s in sh.states if s.waiting]
            deep = sum(1 for c in sh.checks if c.deep)
            print(f"  {command:52} looks {deep:3}  false reports {len(false)}")
        finally:
            sh.close()


async def cpu(directory: Path, count: int, command: str | None, window: float, label: str) -> None:
    shells = [PtyShell(str(directory)) for _ in range(count)]
    try:
        for sh in shells:
            await sh.ready()
        if command:
            for sh in shells:
                sh.submit(command)
        await asyncio.sleep(1.0)  # let every command reach its steady state
        on: list[float] = []
        off: list[float] = []
        rate: list[float] = []
        for round_ in range(4):
            watched = round_ % 2 == 0
            for sh in shells:
                if watched:
                    sh.start_detecting()
                else:
                    sh.stop_detecting()
            # Untimed: a new watcher's first looks (start-up, backoff) are not the
            # steady state being measured.
            await asyncio.sleep(2.0)
            first_look = sum(len(sh.checks) for sh in shells)
            begin_cpu, begin = time.process_time(), time.monotonic()
            await asyncio.sleep(window)  # the measurement window itself
            elapsed = time.monotonic() - begin
            share = (time.process_time() - begin_cpu) / elapsed
            (on if watched else off).append(share)
            if watched:
                rate.append((sum(len(sh.checks) for sh in shells) - first_look) / elapsed / count)
        detector = statistics.median(on) - statistics.median(off)
        print(
            f"  {label:34} watched {statistics.median(on) * 100:6.2f} %  "
            f"read only {statistics.median(off) * 100:6.2f} %  "
            f"detector {detector * 100:6.2f} % of a core  "
            f"({statistics.median(rate):.1f} looks/s per terminal)"
        )
    finally:
        for sh in shells:
            sh.close()


async def read_path(directory: Path) -> None:
    print("\n(d) the read path")
    sizes = []
    for detecting in (False, True, False, True, False, True):
        sh = PtyShell(str(directory))
        try:
            await sh.ready()
            if not detecting:
                sh.stop_detecting()
            start = time.monotonic()
            sh.submit("seq 1 2000000")
            await sh.until_prompt(60)
            elapsed = time.monotonic() - start
            sizes.append((detecting, 14_888_896 / elapsed / 1e6))
        finally:
            sh.close()
    sh = PtyShell(str(directory))
    try:
        await sh.ready()
        chunk = b"1234567\r\n" * 455  # a 4 KiB read, as the PTY hands out bulk output
        start = time.perf_counter()
        for _ in range(20000):
            sh.screen.feed(chunk)
            sh.watcher.note_output()
        per_chunk = (time.perf_counter() - start) / 20000
    finally:
        sh.close()
    print(f"  per 4 KiB read: ScreenModel.feed + WaitWatcher.note_output {per_chunk * 1e6:.2f} µs")
    on = statistics.median(v for d, v in sizes if d)
    off = statistics.median(v for d, v in sizes if not d)
    print(f"  seq 1 2000000 (14.9 MB): read only {off:.1f} MB/s, with screen + watcher {on:.1f}")
    print(f"  ratio {on / off:.2f}")
    chunk = (b"\x1b[01;34mdirectory\x1b[0m  file.txt  \x1b[01;32mrun.sh\x1b[0m  notes\r\n") * 900
    screen = ScreenModel()
    start = time.perf_counter()
    for _ in range(200):
        screen.feed(chunk)
    per_mb = (time.perf_counter() - start) / (200 * len(chunk) / 1e6)
    plain = b"1234567\r\n" * 7000
    start = time.perf_counter()
    for _ in range(200):
        screen.feed(plain)
    plain_mb = (time.perf_counter() - start) / (200 * len(plain) / 1e6)
    print(
        f"  ScreenModel.feed: coloured {per_mb * 1000:.2f} ms/MB, plain {plain_mb * 1000:.2f} ms/MB"
    )
    short = ScreenModel()
    short.feed(b"lots of output\r\n" * 100 + b"Do you want to continue? [Y/n] ")
    dense = ScreenModel()
    dense.feed(b"\x1b[2;5H\x1b[1m\x1b[34m~\x1b[0m" * 400)
    for label, model in (("a prompt", short), ("a full window, escape-dense", dense)):
        times = []
        for _ in range(30):
            model.resize(80, 24)  # drops the cached line: measure the drawing
            start = time.perf_counter()
            model.prompt_line()
            times.append(time.perf_counter() - start)
        print(f"  prompt_line for {label}: {statistics.median(times) * 1000:.2f} ms")


async def probe_costs(directory: Path) -> None:
    print("\n(e) one look (TerminalProbe.sample), median of 200")
    sh = PtyShell(str(directory))
    try:
        await sh.ready()
        probe = TerminalProbe(sh.fd, sh.process.pid)

        def measure(label: str) -> None:
            times = []
            for _ in range(200):
                start = time.perf_counter()
                probe.sample()
                times.append(time.perf_counter() - start)
            start = time.perf_counter()
            for _ in range(1000):
                probe.foreground()
            each = (time.perf_counter() - start) / 1000
            print(
                f"  {label:30} {statistics.median(times) * 1e6:7.0f} µs"
                f"   (tcgetpgrp {each * 1e6:.1f} µs)"
            )

        measure("shell at its prompt")
        programs = [
            ("read builtin", "read x", ["Enter"]),
            ("vim (2 threads)", "vim -u NONE -N y.txt", ["Escape", ":qa!", "Enter"]),
        ]
        if shutil.which("node"):
            programs.append(("node REPL (7 threads)", "node", [".exit", "Enter"]))
        for label, command, leave in programs:
            sh.submit(command)
            await sh.until(lambda s: s.waiting, 15)
            measure(label)
            sh.send_keys(leave)
            await sh.until_prompt(15)
    finally:
        sh.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each latency case")
    parser.add_argument("--window", type=float, default=4.0, help="CPU window, seconds")
    parser.add_argument("--quick", action="store_true", help="2 rounds, 2 s windows")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.window = 2, 2.0
    with tempfile.TemporaryDirectory() as name:
        directory = Path(name)
        prepare(directory)
        print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
        await latency(directory, args.rounds)
        await negatives(directory)
        print("\n(c) CPU of the detector (this process; median of alternating windows)")
        await cpu(directory, 10, None, args.window, "10 idle terminals")
        await cpu(directory, 100, None, args.window, "100 idle terminals")
        loop = "while :; do echo tick; sleep 0.2; done"
        await cpu(directory, 10, loop, args.window, "10 printing every 0.2 s")
        await cpu(directory, 10, "sleep 1000", args.window, "10 running a silent sleep")
        await read_path(directory)
        await probe_costs(directory)


if __name__ == "__main__":
    asyncio.run(main())
