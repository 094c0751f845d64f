"""Benchmark: the kernel's output processing (OPOST) on or off, and what off would break.

Issue 10, item 4. A PTY in cooked mode turns each ``\\n`` a program writes into
``\\r\\n`` (OPOST + ONLCR) one character at a time; with ``stty -opost`` the kernel
copies the bytes through. This prints, in one run:

(a) throughput of ``seq 1 N`` (default 3,000,000: ~26 MB), interleaved round by round,
    median MB/s of the bytes read: the bare PTY read loop of ``bench_shell.py`` (the
    same integrated bash, blocking reads to ``D``), our in-process terminal, and
    ``terminal/run`` over stdio to a client that counts didWrite bytes -- each with
    OPOST on (as shipped) and off for the command (``stty -opost; seq ...; stty
    opost``), with the ratio of each to the bare cooked loop; and the cost per MB of
    putting the CRs back where output is shown (a mirror needs ``\\r\\n``);
(b) whether output would still show right with OPOST off: each program below is run
    in a PTY with OPOST on, and with it off, and its bytes replayed into a terminal
    emulator (pyte, 80x24); rows that differ from the OPOST-on screen are counted as
    shown raw and with every bare ``\\n`` turned into ``\\r\\n`` where it is shown
    (the only place a mirror could put the CRs back).

    python3 bench/bench_opost.py [--n 3000000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import select
import shutil
import statistics
import sys
import tempfile
import termios
import textwrap
import time
from collections.abc import Sequence

import ptyprocess
import pyte

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_server import StdioClient, until_prompt
from bench_shell import FloorShell, deadline

from registry.config import Settings
from registry.terminals.shell import ShellTerminal

perf = time.perf_counter


def put_back_crs(data: bytes) -> bytes:
    """What a mirror of a ``-opost`` terminal would have to do: a bare LF -> CR LF.

    Two passes in C (a regex with a look-behind is ~30x slower per MB)."""
    return data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")


# -- (a) throughput ---------------------------------------------------------------------


async def throughput(n: int, rounds: int) -> None:
    home = tempfile.mkdtemp(prefix="tr-bench-home-")
    cwd = tempfile.mkdtemp(prefix="tr-bench-cwd-")
    env = {"HOME": home}
    settings = Settings()
    bash = shutil.which("bash") or "/bin/bash"
    floor = FloorShell(bash, cwd, settings, env)
    ours = await ShellTerminal.spawn(1, cwd, settings, shell=bash, env=env)
    os.environ["HOME"] = home  # the stdio server's shells: no user rc either
    client, _ = await StdioClient.start()
    terminal_id = (await client.request("terminal/acquire", {"cwd": cwd}))["id"]
    commands = {"on": f"seq 1 {n}", "off": f"stty -opost; seq 1 {n}; stty opost"}
    rates: dict[tuple[str, str], list[float]] = {}
    for round_number in range(rounds + 1):  # round 0 warms up, untimed
        order = list(commands.items())
        if round_number % 2:
            order.reverse()
        for mode, command in order:
            with deadline(120, "floor"):
                timing = floor.run(command)
            floor_rate = timing.read / timing.to_end / 1e6
            await until_prompt(ours)
            start = perf()
            run = await ours.run(command)
            engine_rate = run.output_bytes / (perf() - start) / 1e6
            client.did_write_bytes = 0
            start = perf()
            await client.request("terminal/run", {"command": command, "terminalId": terminal_id})
            # didWrite bodies are JSON-escaped: the same command's byte count is fair.
            wire_rate = run.output_bytes / (perf() - start) / 1e6
            if round_number:
                for side, rate in (
                    ("floor", floor_rate),
                    ("engine", engine_rate),
                    ("stdio", wire_rate),
                ):
                    rates.setdefault((side, mode), []).append(rate)
        print(f"  round {round_number}/{rounds}", file=sys.stderr)
    await client.close()
    await ours.close()
    floor.close()
    shutil.rmtree(home, ignore_errors=True)
    shutil.rmtree(cwd, ignore_errors=True)

    base = statistics.median(rates[("floor", "on")])
    print(f"(a) seq 1 {n}, median MB/s of {rounds} interleaved rounds (x = / bare cooked loop)")
    for side, label in (
        ("floor", "bare PTY read loop"),
        ("engine", "in-process terminal"),
        ("stdio", "terminal/run over stdio"),
    ):
        on = statistics.median(rates[(side, "on")])
        off = statistics.median(rates[(side, "off")])
        print(
            f"  {label:<24} OPOST on {on:6.1f} ({on / base:4.2f}x)   off {off:6.1f}"
            f" ({off / base:4.2f}x)   off/on {off / on:4.2f}x"
        )
    sample = b"".join(b"%d\n" % i for i in range(1, 400_001))
    start = perf()
    for _ in range(5):
        put_back_crs(sample)
    per_mb = (perf() - start) / 5 / (len(sample) / 1e6)
    print(f"  putting the CRs back where shown (bare LF -> CR LF): {per_mb * 1000:.2f} ms/MB")


# -- (b) does it still show right? ---------------------------------------------------------


class Screen(pyte.Screen):
    def select_graphic_rendition(self, *attrs: int, **kwargs: object) -> None:
        # pyte 0.8 passes private=True for vim's CSI > ... m, then fails on it.
        if not kwargs.get("private"):
            super().select_graphic_rendition(*attrs)


def shown(data: bytes) -> list[str]:
    screen = Screen(80, 24)
    pyte.ByteStream(screen).feed(data)
    return list(screen.display)


def capture(argv: Sequence[str], keys: Sequence[bytes], opost: bool) -> bytes:
    """Everything ``argv`` writes to a fresh 80x24 PTY while ``keys`` are typed."""
    env = {**os.environ, "TERM": "xterm-256color", "LESS": "", "HOME": tempfile.gettempdir()}
    child = ptyprocess.PtyProcess.spawn(list(argv), env=env, dimensions=(24, 80))
    if not opost:
        attrs = termios.tcgetattr(child.fd)
        attrs[1] &= ~termios.OPOST
        termios.tcsetattr(child.fd, termios.TCSANOW, attrs)
    out = bytearray()

    def drain(seconds: float) -> None:
        # Reads for a fixed span: a full-screen program announces no "done drawing".
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            ready, _, _ = select.select([child.fd], [], [], 0.05)
            if ready:
                try:
                    out.extend(os.read(child.fd, 65536))
                except OSError:
                    return

    drain(0.8)
    for key in keys:
        child.write(key)
        drain(0.3)
    drain(0.5)
    child.close(force=True)
    return bytes(out)


RAW_DRAWING = textwrap.dedent(
    """
    import os, sys, termios, tty
    saved = termios.tcgetattr(0)
    tty.setraw(0)  # raw output: it places the cursor itself, LF means "one row down"
    os.write(1, b"\\x1b[2J\\x1b[3;10H+\\n|\\n|\\n+\\x1b[8;1Hdrawn\\r\\n")
    termios.tcsetattr(0, termios.TCSADRAIN, saved)
    """
)


def fidelity(workdir: str) -> None:
    text = os.path.join(workdir, "lines.txt")
    with open(text, "w") as handle:
        handle.writelines(f"line {i} {'x' * (i % 50)}\n" for i in range(200))
    bash = ["bash", "--norc", "--noprofile", "-i"]
    cases: dict[str, tuple[list[str], list[bytes]]] = {
        "head -30 (plain output)": (["bash", "--norc", "-c", f"head -30 {text}"], []),
        "bash, typed commands": (bash, [b"echo one\r", b"echo two; echo three\r", b"exit\r"]),
        "less, paging": (["less", text], [b"j" * 30, b" ", b"q"]),
        "vim, edit and quit": (
            ["vim", "-u", "NONE", "-N", text],
            [b"j" * 30, b"ihello\x1b", b":q!\r"],
        ),
        "a raw-mode program (tty.setraw)": ([sys.executable, "-c", RAW_DRAWING], []),
    }
    print("(b) rows of an 80x24 screen differing from OPOST on (pyte), with OPOST off:")
    print(f"  {'program':<34} {'control':>7} {'as is':>6} {'CRs put back':>13}")
    for name, (argv, keys) in cases.items():
        reference = shown(capture(argv, keys, opost=True))
        control = shown(capture(argv, keys, opost=True))
        raw = capture(argv, keys, opost=False)

        def differing(screen: list[str], reference: list[str] = reference) -> int:
            return sum(1 for mine, theirs in zip(screen, reference, strict=True) if mine != theirs)

        print(
            f"  {name:<34} {differing(control):>7} {differing(shown(raw)):>6}"
            f" {differing(shown(put_back_crs(raw))):>13}"
        )
    print("  (control: a second run with OPOST on; non-zero means the program's output varies)")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--n", type=int, default=3_000_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    await throughput(args.n, args.rounds)
    with tempfile.TemporaryDirectory() as workdir:
        fidelity(workdir)


if __name__ == "__main__":
    asyncio.run(main())
