"""Benchmark: the PTY shell terminal against a floor measured in the same run.

What it measures
----------------
(a) Per-command round trip of ``true`` and ``echo hi`` in a warm rich terminal:
    median and p90 over ``--n`` runs each.
(b) Throughput of ``seq 1 N`` (two sizes, to show the cost is linear in size), MB/s.
(c) Memory: this process's RSS before, at its peak (sampled every 100 ms) and after
    our terminal ran a command producing 200 MB (1 GB with ``--big``) of output,
    with the default ``run_output_cap``.
(d) The marker parser alone: ``MarkerParser.feed`` over a recorded-style stream in
    4 KiB chunks, and one long unterminated OSC fed a byte at a time (10 vs 60 KiB).
Then, untimed, diagnostics from a separate instrumented terminal: PTY read sizes,
the cost of our read callback, and this process's CPU per command on each side.

Why the floor is what it is
---------------------------
Most of a command's round trip is the shell's own work (readline, PS0, DEBUG trap,
PROMPT_COMMAND, fork/exec) and the kernel's PTY, none of which we can make faster.
So the floor is the *same* bash with the *same* integration script (started through
``prepare_launch``), in a PTY made the same way (``spawn_child``: same size, same
environment, same signal reset, ``echo=True``), driven by the tightest loop Python
allows: a blocking ``os.write`` of the command and blocking ``os.read`` calls (the
same 256 KiB read size as ours) until the nonce-verified D marker arrives.  That is
the least any Python driver of this shell can pay; the ratio ours/floor is then what
the event loop, the marker parser, the phase machine and the run bookkeeping add.
For throughput it is "the simplest reader" rather than a strict minimum: the kernel
hands a PTY's output over in small pieces (its line discipline buffers 4 KiB), and a
blocking reader wakes for every piece, so a reader that does more per wake-up gets
bigger reads and can match or beat it.  The PTY, not Python, sets the pace there.

The floor's round trip stops at D; it then reads on to the prompt's B so the next
command is typed into the same state as ours, where ``run()`` returns at P;Cwd
(sent right after D) and the benchmark waits for the prompt (outside the timing)
before the next run.  Floor and ours alternate in rounds (who goes first alternates
too) so that machine noise falls on both alike.  The floor is plain blocking code
called from inside the event loop: nothing else runs on it meanwhile.

By default both shells get an empty temporary ``$HOME`` so the user's startup files
(pyenv hooks and the like) add no noise; ``--user-rc`` keeps the real one.

Run: ``python3 bench/bench_shell.py [--n 300] [--big] [--profile]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import cProfile
import gc
import io
import os
import pstats
import secrets
import shutil
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import FrameType

import psutil

from registry.config import Settings
from registry.markers import MAX_SEQUENCE_BYTES, Marker, MarkerParser
from registry.run import TerminalRun
from registry.shell import ShellLaunch, prepare_launch
from registry.terminals.base import IntegrationState
from registry.terminals.children import (
    TERMINAL_TAG_VARIABLE,
    agent_environment,
    reset_signals,
)
from registry.terminals.pty import READ_SIZE, spawn_child
from registry.terminals.shell import Phase, ShellTerminal

LATENCY_COMMANDS = ("true", "echo hi")
LATENCY_TARGET = 1.5  # ours/floor, at most
THROUGHPUT_TARGET = 0.8  # ours/floor, at least
MB = 1_000_000
MiB = 1024 * 1024

perf = time.perf_counter


def log(message: str) -> None:
    """Progress goes to stderr; the report goes to stdout."""
    print(message, file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values)


def p90(values: Sequence[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[8]


def seq_bytes(n: int) -> int:
    """Bytes ``seq 1 n`` puts through the PTY (ONLCR makes each newline CR LF)."""
    total = 0
    digits = 1
    low = 1
    while low <= n:
        high = min(n, low * 10 - 1)
        total += (high - low + 1) * (digits + 2)
        digits += 1
        low *= 10
    return total


@contextlib.contextmanager
def deadline(seconds: float, what: str) -> Iterator[None]:
    """Interrupt blocking floor reads that hang (SIGALRM raises out of os.read)."""

    def expired(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"{what}: nothing after {seconds:.0f} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


# -- the floor ------------------------------------------------------------------------


@dataclass
class FloorRun:
    to_end: float  # seconds from writing the command to its D marker: the floor
    to_cwd: float  # ... to the P;Cwd right after D (where our run() completes)
    to_prompt: float  # ... to the prompt's B
    read: int  # bytes read up to D


class FloorShell:
    """The same integrated bash in a PTY made as ours is, driven by blocking I/O."""

    def __init__(self, shell: str, cwd: str, settings: Settings, env: Mapping[str, str]) -> None:
        nonce = secrets.token_hex(16)
        base = agent_environment({**os.environ, **env}, term="xterm-256color")
        base[TERMINAL_TAG_VARIABLE] = f"{os.getpid()}.floor.{secrets.token_hex(8)}"
        self.launch: ShellLaunch = prepare_launch(
            shell, base, nonce, integration=True, login=settings.login_shell
        )
        try:
            self.child = spawn_child(
                self.launch.argv,
                env=self.launch.env,
                cwd=cwd,
                rows=settings.rows,
                cols=settings.cols,
                preexec_fn=reset_signals,
            )
        except BaseException:
            self.launch.cleanup()
            raise
        self.fd: int = self.child.child_fd
        os.set_blocking(self.fd, True)
        raw = nonce.encode()
        self.end_marker = b"\x1b]633;D;0;" + raw + b"\x07"
        # The cwd has no character that needs escaping: a plain temporary path.
        self.cwd_marker = b"\x1b]633;P;Cwd=" + cwd.encode() + b";" + raw + b"\x07"
        self.prompt_marker = b"\x1b]633;B;" + raw + b"\x07"
        with deadline(15, "floor shell start-up"):
            self._read_until(self.prompt_marker, b"", None)

    def _read_until(
        self, marker: bytes, pending: bytes, sizes: list[int] | None
    ) -> tuple[float, int, bytes]:
        """Read until ``marker``; return (perf_counter then, bytes read, bytes after it).

        Each chunk is searched on its own (plus the few bytes a marker split across
        two reads needs), so nothing is copied per read.
        """
        found = pending.find(marker)
        if found >= 0:
            return perf(), 0, pending[found + len(marker) :]
        keep = len(marker) - 1
        carry = pending[-keep:]
        total = 0
        fd = self.fd
        read = os.read
        while True:
            chunk = read(fd, READ_SIZE)
            if not chunk:
                raise EOFError("the floor shell closed its PTY")
            total += len(chunk)
            if sizes is not None:
                sizes.append(len(chunk))
            if carry:
                found = (carry + chunk[:keep]).find(marker)
                if found >= 0:
                    return perf(), total, chunk[found + len(marker) - len(carry) :]
            found = chunk.find(marker)
            if found >= 0:
                return perf(), total, chunk[found + len(marker) :]
            carry = chunk[-keep:] if len(chunk) >= keep else (carry + chunk)[-keep:]

    def run(self, command: str, sizes: list[int] | None = None) -> FloorRun:
        """Type ``command``; time D (the floor), then P;Cwd and B (the prompt)."""
        data = command.encode() + b"\r"
        start = perf()
        os.write(self.fd, data)
        at_end, count, rest = self._read_until(self.end_marker, b"", sizes)
        at_cwd, _, rest = self._read_until(self.cwd_marker, rest, None)
        at_prompt, _, _ = self._read_until(self.prompt_marker, rest, None)
        return FloorRun(at_end - start, at_cwd - start, at_prompt - start, count)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.child.close(force=True)
        if self.child.isalive():
            with contextlib.suppress(OSError):
                os.kill(self.child.pid, signal.SIGKILL)
        self.launch.cleanup()


# -- ours -----------------------------------------------------------------------------


async def until_prompt(terminal: ShellTerminal) -> None:
    """Wait (untimed) until the prompt's B has been seen, as the floor does.

    Polls the public ``phase``: the terminal offers no public prompt event, and this
    wait is outside every timed span.
    """
    while terminal.phase is not Phase.PROMPT:  # noqa: ASYNC110
        await asyncio.sleep(0.001)


async def timed_run(terminal: ShellTerminal, command: str) -> tuple[float, TerminalRun]:
    await until_prompt(terminal)
    start = perf()
    run = await terminal.run(command)
    elapsed = perf() - start
    if run.exit_code != 0:
        raise RuntimeError(f"ours: {command!r} ended with {run.exit_code}: {run.note}")
    return elapsed, run


class TimedParser:
    """Wraps a terminal's parser to record read sizes and time spent parsing."""

    def __init__(self, inner: MarkerParser) -> None:
        self.inner = inner
        self.sizes: list[int] = []
        self.seconds = 0.0

    def feed(self, data: bytes) -> list[bytes | Marker]:
        self.sizes.append(len(data))
        start = perf()
        events = self.inner.feed(data)
        self.seconds += perf() - start
        return events

    def flush(self) -> list[bytes | Marker]:
        return self.inner.flush()


class InstrumentedTerminal(ShellTerminal):
    """Ours with its read callback and writes timed (diagnostics only, never timed)."""

    callback_seconds = 0.0
    first_write_at = 0.0  # perf_counter at the first write since reset()
    last_read_end = 0.0  # perf_counter when the last read callback returned

    def reset(self) -> None:
        self.callback_seconds = 0.0
        self.first_write_at = 0.0

    def _on_data(self, data: bytes) -> None:
        # What the PTY's read callback hands each chunk to (the os.read itself is not
        # counted: it is the same for the floor).
        start = perf()
        super()._on_data(data)
        self.last_read_end = perf()
        self.callback_seconds += self.last_read_end - start

    def _write(self, data: bytes) -> None:
        if not self.first_write_at:
            self.first_write_at = perf()
        super()._write(data)


# -- results --------------------------------------------------------------------------


@dataclass
class LatencySamples:
    floor_end: list[float] = field(default_factory=list)
    floor_cwd: list[float] = field(default_factory=list)
    floor_prompt: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)


@dataclass
class ThroughputSamples:
    payload: int
    floor: list[float] = field(default_factory=list)
    ours: list[float] = field(default_factory=list)


@dataclass
class MemoryResult:
    produced: int
    counted: int
    held: int
    seconds: float
    before: int
    peak: int
    after: int
    samples: int
    #: Peak RSS while each quarter of the output went through.
    quarter_peaks: list[int] = field(default_factory=list)


@dataclass
class ParserResult:
    stream_bytes: int
    markers: int
    seconds: list[float]
    reference_seconds: list[float]
    plain_bytes: int
    plain_seconds: list[float]
    long_osc: dict[int, float]


@dataclass
class Diagnostics:
    lines: list[str] = field(default_factory=list)


# -- (a) latency ----------------------------------------------------------------------


async def bench_latency(
    ours: ShellTerminal, floor: FloorShell, n: int, round_size: int, warmup: int
) -> dict[str, LatencySamples]:
    for command in LATENCY_COMMANDS:
        for _ in range(warmup):
            with deadline(30, "floor warm-up"):
                floor.run(command)
            await timed_run(ours, command)
    results = {command: LatencySamples() for command in LATENCY_COMMANDS}
    round_index = 0
    while any(len(r.ours) < n for r in results.values()):
        for command in LATENCY_COMMANDS:
            samples = results[command]
            count = min(round_size, n - len(samples.ours))
            if count <= 0:
                continue
            sides = ("floor", "ours") if round_index % 2 == 0 else ("ours", "floor")
            for side in sides:
                if side == "floor":
                    with deadline(60, f"floor {command!r}"):
                        for _ in range(count):
                            timing = floor.run(command)
                            samples.floor_end.append(timing.to_end)
                            samples.floor_cwd.append(timing.to_cwd)
                            samples.floor_prompt.append(timing.to_prompt)
                else:
                    async with asyncio.timeout(60):
                        for _ in range(count):
                            elapsed, run = await timed_run(ours, command)
                            if command == "echo hi" and run.output != b"hi\r\n":
                                raise RuntimeError(f"ours: echo hi gave {run.output!r}")
                            samples.ours.append(elapsed)
        round_index += 1
        done = sum(len(r.ours) for r in results.values())
        if round_index % 5 == 0:
            log(f"  latency: {done}/{n * len(results)}")
    return results


# -- (b) throughput -------------------------------------------------------------------


async def bench_throughput(
    ours: ShellTerminal, floor: FloorShell, sizes: Sequence[int], rounds: int
) -> dict[int, ThroughputSamples]:
    results: dict[int, ThroughputSamples] = {}
    for size in sizes:
        command = f"seq 1 {size}"
        payload = seq_bytes(size)
        samples = ThroughputSamples(payload)
        results[size] = samples
        # One untimed pass each: page cache, allocator and PTY warm.
        with deadline(120, "floor warm-up"):
            floor.run(command)
        await timed_run(ours, command)
        for round_index in range(rounds):
            sides = ("floor", "ours") if round_index % 2 == 0 else ("ours", "floor")
            for side in sides:
                if side == "floor":
                    with deadline(120, f"floor {command!r}"):
                        timing = floor.run(command)
                    if timing.read < payload:
                        raise RuntimeError(f"floor: read {timing.read} B, expected {payload}")
                    samples.floor.append(timing.to_end)
                else:
                    async with asyncio.timeout(120):
                        elapsed, run = await timed_run(ours, command)
                    if run.output_bytes != payload:
                        raise RuntimeError(f"ours: {run.output_bytes} bytes, expected {payload}")
                    samples.ours.append(elapsed)
            log(f"  throughput {command}: round {round_index + 1}/{rounds}")
    return results


# -- (c) memory -----------------------------------------------------------------------


async def bench_memory(ours: ShellTerminal, produce: int) -> MemoryResult:
    process = psutil.Process()
    gc.collect()
    before = process.memory_info().rss
    peak = before
    quarter_peaks = [before] * 4
    samples = 0
    stop = asyncio.Event()

    async def sample() -> None:
        nonlocal peak, samples
        while not stop.is_set():
            rss = process.memory_info().rss
            peak = max(peak, rss)
            current = ours.current_run
            if current is not None:
                quarter = min(3, current.output_bytes * 4 // produce)
                quarter_peaks[quarter] = max(quarter_peaks[quarter], rss)
            samples += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 0.1)

    sampler = asyncio.ensure_future(sample())
    try:
        async with asyncio.timeout(600):
            elapsed, run = await timed_run(ours, f"head -c {produce} /dev/zero | tr '\\0' x")
    finally:
        stop.set()
        await sampler
    peak = max(peak, process.memory_info().rss)
    gc.collect()
    # The terminal keeps its last run (capped buffers and all): "after" includes it.
    after = process.memory_info().rss
    counted = run.output_bytes
    held = len(run.output)  # a copy of head + tail: measured after "after"
    return MemoryResult(
        produce, counted, held, elapsed, before, peak, after, samples, quarter_peaks
    )


# -- (d) the parser alone -------------------------------------------------------------


def recorded_stream(nonce: str, total: int, markers: bool = True) -> tuple[bytes, int]:
    """Plain output with colour, and (unless ``markers`` is false) a command's markers
    every few KB: D, P;Cwd, A, prompt, B, echo, C, E.  Returns it and its marker count.
    """
    raw = nonce.encode()

    def osc(payload: bytes) -> bytes:
        return b"\x1b]633;" + payload + b";" + raw + b"\x07"

    text = b"".join(
        b"drwxr-xr-x  2 user user  4096 Jan  1 12:00 \x1b[01;34mdirectory-%04d\x1b[0m\r\n" % i
        for i in range(50)
    )  # ~3.9 KB of `ls -l`-like output
    between = b"".join(
        [
            osc(b"D;0"),
            osc(b"P;Cwd=/home/user/project"),
            osc(b"A"),
            b"user@host:~/project$ ",
            osc(b"B"),
            b"ls -l\r\n",
            osc(b"C"),
            osc(b"E;ls -l"),
        ]
    )
    unit = text + between if markers else text
    repeat = max(1, total // len(unit))
    return unit * repeat, repeat * 6 if markers else 0


def feed_all(parser: MarkerParser, chunks: Sequence[bytes]) -> tuple[int, int]:
    """Feed every chunk; return (output bytes, markers) that came out."""
    out = 0
    markers = 0
    for piece in chunks:
        for event in parser.feed(piece):
            if isinstance(event, bytes):
                out += len(event)
            else:
                markers += 1
    return out, markers


def chunked(data: bytes, size: int) -> list[bytes]:
    return [data[i : i + size] for i in range(0, len(data), size)]


def bench_parser(total: int, rounds: int) -> ParserResult:
    nonce = secrets.token_hex(16)
    stream, expected_markers = recorded_stream(nonce, total)
    plain, _ = recorded_stream(nonce, total, markers=False)
    chunks = chunked(stream, 4096)
    plain_chunks = chunked(plain, 4096)
    seconds: list[float] = []
    plain_seconds: list[float] = []
    reference: list[float] = []
    for _ in range(rounds):
        start = perf()
        for piece in chunks:
            piece.find(b"\x1b]")
        reference.append(perf() - start)
        start = perf()
        out, markers = feed_all(MarkerParser(nonce), chunks)
        seconds.append(perf() - start)
        if markers != expected_markers:
            raise RuntimeError(f"parser: {markers} markers, expected {expected_markers}")
        start = perf()
        out, _ = feed_all(MarkerParser(nonce), plain_chunks)
        plain_seconds.append(perf() - start)
        if out != len(plain):
            raise RuntimeError(f"parser: {out} plain bytes out of {len(plain)}")

    long_osc: dict[int, float] = {}
    for size in (10 * 1024, 60 * 1024):
        assert size < MAX_SEQUENCE_BYTES
        payload = [b"a"] * size
        times = []
        for _ in range(7):
            parser = MarkerParser(nonce)
            start = perf()
            parser.feed(b"\x1b]633;E;")
            for byte in payload:
                parser.feed(byte)
            times.append(perf() - start)
            events = parser.feed(b";" + nonce.encode() + b"\x07")
            marker = events[0] if events else None
            if not isinstance(marker, Marker) or len(marker.args[0]) != size:
                raise RuntimeError(f"parser: long OSC of {size} bytes not parsed: {events!r}")
        long_osc[size] = median(times)
    return ParserResult(
        len(stream), expected_markers, seconds, reference, len(plain), plain_seconds, long_osc
    )


# -- diagnostics and profiling --------------------------------------------------------


async def diagnose(
    shell: str, cwd: str, settings: Settings, env: Mapping[str, str], floor: FloorShell, size: int
) -> Diagnostics:
    """Untimed: read sizes, what one read costs us, and our process's CPU per command.

    CPU is ``time.process_time`` (this process only: not bash, not the kernel's PTY
    work queue), so it shows what the Python side spends per command on each side.
    """
    diag = Diagnostics()
    terminal = await InstrumentedTerminal.spawn(99, cwd, settings, shell=shell, env=env)
    try:
        await terminal.ready()
        timed = TimedParser(terminal._parser)
        terminal._parser = timed  # type: ignore[assignment]
        for command in LATENCY_COMMANDS:
            floor_reads: list[int] = []
            floor_cpu = 0.0
            ours_reads: list[int] = []
            ours_sizes: list[int] = []
            ours_cpu = 0.0
            callbacks = 0.0
            parser_seconds = 0.0
            before_write: list[float] = []
            after_read: list[float] = []
            runs = 50
            for _ in range(5):  # warm
                with deadline(30, "floor diagnostics"):
                    floor.run(command)
                await timed_run(terminal, command)
            for _ in range(runs):
                floor_sizes: list[int] = []
                with deadline(30, "floor diagnostics"):
                    cpu = time.process_time()
                    floor.run(command, floor_sizes)
                    floor_cpu += time.process_time() - cpu
                floor_reads.append(len(floor_sizes))
                await until_prompt(terminal)
                timed.sizes.clear()
                timed.seconds = 0.0
                terminal.reset()
                cpu = time.process_time()
                started = perf()
                await terminal.run(command)
                ended = perf()
                ours_cpu += time.process_time() - cpu
                before_write.append(terminal.first_write_at - started)
                after_read.append(ended - terminal.last_read_end)
                ours_reads.append(len(timed.sizes))
                ours_sizes += timed.sizes
                callbacks += terminal.callback_seconds
                parser_seconds += timed.seconds
            reads = sum(ours_reads)
            diag.lines += [
                f"`{command}` ({runs} runs): reads per command: floor {median(floor_reads):.0f} "
                f"(to D), ours {median(ours_reads):.0f} (to P;Cwd); ours' "
                f"read sizes median {median(ours_sizes):.0f} B, max {max(ours_sizes)} B",
                f"  this process's CPU per command: floor {floor_cpu / runs * 1e6:.0f} us, "
                f"ours {ours_cpu / runs * 1e6:.0f} us; ours per read callback "
                f"{callbacks / reads * 1e6:.0f} us (parser {parser_seconds / reads * 1e6:.0f} us)",
                f"  ours: run() call -> command written {median(before_write) * 1e6:.0f} us; "
                f"last read callback done -> run() returned {median(after_read) * 1e6:.0f} us "
                "(medians)",
            ]

        command = f"seq 1 {size}"
        await timed_run(terminal, command)  # warm
        floor_sizes = []
        with deadline(120, "floor diagnostics"):
            cpu = time.process_time()
            floor_seconds = floor.run(command, floor_sizes).to_end
            floor_cpu = time.process_time() - cpu
        await until_prompt(terminal)
        timed.sizes.clear()
        timed.seconds = 0.0
        terminal.reset()
        cpu = time.process_time()
        elapsed, _ = await timed_run(terminal, command)
        ours_cpu = time.process_time() - cpu
        sizes = list(timed.sizes)
        reads = len(sizes)
        diag.lines += [
            f"`{command}`, PTY reads (read size asked: {READ_SIZE // 1024} KiB):",
            f"  floor: {len(floor_sizes)} reads, median {median(floor_sizes):.0f} B, "
            f"max {max(floor_sizes)} B, {floor_seconds / len(floor_sizes) * 1e6:.1f} us "
            f"wall per read; CPU {floor_cpu:.2f} s of {floor_seconds:.2f} s wall",
            f"  ours:  {reads} reads, median {median(sizes):.0f} B, max {max(sizes)} B, "
            f"{elapsed / reads * 1e6:.1f} us wall per read, of which the read callback "
            f"{terminal.callback_seconds / reads * 1e6:.1f} us "
            f"(parser {timed.seconds / reads * 1e6:.1f} us); CPU {ours_cpu:.2f} s of "
            f"{elapsed:.2f} s wall",
        ]
    finally:
        await terminal.close()
    return diag


async def profile_ours(ours: ShellTerminal, size: int, count: int) -> list[tuple[str, str]]:
    """cProfile our side: ``count`` runs of ``true``, then one ``seq 1 size``."""
    results: list[tuple[str, str]] = []
    for title, commands in (
        (f"{count} x `true`", ["true"] * count),
        (f"`seq 1 {size}`", [f"seq 1 {size}"]),
    ):
        profiler = cProfile.Profile()
        for command in commands:
            await until_prompt(ours)
            profiler.enable()
            await ours.run(command)
            profiler.disable()
        out = io.StringIO()
        stats = pstats.Stats(profiler, stream=out)
        stats.sort_stats("tottime").print_stats(18)
        results.append((title, out.getvalue()))
    return results


# -- report ---------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "yes" if ok else "NO"


def report(
    args: argparse.Namespace,
    settings: Settings,
    latency: dict[str, LatencySamples],
    throughput: dict[int, ThroughputSamples],
    memory: MemoryResult,
    parser: ParserResult,
    diagnostics: Diagnostics,
    profile: list[tuple[str, str]] | None,
) -> None:
    width = 44
    print()
    print(f"shell: {args.shell}   N={args.n}   rc: {'user' if args.user_rc else 'empty HOME'}")
    print(f"run_output_cap: {settings.run_output_cap} B (default)   cpus: {os.cpu_count()}")
    print()
    header = f"{'figure':<{width}} {'floor':>11} {'ours':>11} {'ours/floor':>11} {'target':>8}  met"
    print(header)
    print("-" * len(header))
    latency_ok = True
    worst_latency = 0.0
    for command, samples in latency.items():
        for label, stat in (("median", median), ("p90", p90)):
            floor_value = stat(samples.floor_end)
            ours_value = stat(samples.ours)
            ratio = ours_value / floor_value
            ok = ratio <= LATENCY_TARGET
            latency_ok &= ok
            worst_latency = max(worst_latency, ratio)
            name = f"(a) `{command}` round trip, {label}"
            print(
                f"{name:<{width}} {floor_value * 1e3:>8.3f} ms {ours_value * 1e3:>8.3f} ms "
                f"{ratio:>10.2f}x {'<=' + str(LATENCY_TARGET) + 'x':>8}  {verdict(ok)}"
            )
        floor_cwd = median(samples.floor_cwd)
        name = "    median, floor to P;Cwd (where run() ends)"
        print(
            f"{name:<{width}} {floor_cwd * 1e3:>8.3f} ms {median(samples.ours) * 1e3:>8.3f} ms "
            f"{median(samples.ours) / floor_cwd:>10.2f}x {'(info)':>8}"
        )
        name = "    median, floor to the prompt's B"
        print(f"{name:<{width}} {median(samples.floor_prompt) * 1e3:>8.3f} ms")
    throughput_ok = True
    worst_throughput = float("inf")
    for size, tp in throughput.items():
        floor_rate = tp.payload / median(tp.floor) / MB
        ours_rate = tp.payload / median(tp.ours) / MB
        ratio = ours_rate / floor_rate
        ok = ratio >= THROUGHPUT_TARGET
        throughput_ok &= ok
        worst_throughput = min(worst_throughput, ratio)
        name = f"(b) seq 1 {size} ({tp.payload / MB:.1f} MB), median"
        print(
            f"{name:<{width}} {floor_rate:>6.1f} MB/s {ours_rate:>6.1f} MB/s "
            f"{ratio:>10.2f}x {'>=' + str(THROUGHPUT_TARGET) + 'x':>8}  {verdict(ok)}"
        )
        name = "    seconds: median (min-max)"
        print(
            f"{name:<{width}} {median(tp.floor):>9.3f} s {median(tp.ours):>9.3f} s"
            f"   floor {min(tp.floor):.2f}-{max(tp.floor):.2f}, "
            f"ours {min(tp.ours):.2f}-{max(tp.ours):.2f}"
        )
    print()
    print(
        f"latency target (ours/floor <= {LATENCY_TARGET}x on median and p90): "
        f"{'MET' if latency_ok else 'MISSED'} (worst {worst_latency:.2f}x)"
    )
    print(
        f"throughput target (ours/floor >= {THROUGHPUT_TARGET}x at each size): "
        f"{'MET' if throughput_ok else 'MISSED'} (worst {worst_throughput:.2f}x)"
    )
    rates = [tp.payload / median(tp.ours) / MB for tp in throughput.values()]
    floor_rates = [tp.payload / median(tp.floor) / MB for tp in throughput.values()]
    if len(rates) > 1:
        # A cost growing faster than the size shows as MB/s falling at the larger size.
        linear = rates[-1] >= 0.8 * rates[0]
        print(
            "linearity: ours MB/s by size "
            + ", ".join(f"{r:.1f}" for r in rates)
            + " (floor "
            + ", ".join(f"{r:.1f}" for r in floor_rates)
            + "): "
            + (
                "within 20% at the larger size: linear"
                if linear
                else "MB/s falls by more than 20% at the larger size"
            )
        )

    print()
    print(f"(c) memory, {memory.produced / MB:.0f} MB of output (one line of 'x'):")
    print(
        f"    produced {memory.counted} B in {memory.seconds:.2f} s "
        f"({memory.counted / memory.seconds / MB:.1f} MB/s); run holds {memory.held} B"
    )
    print(
        f"    RSS before {memory.before / MiB:.1f} MiB, peak {memory.peak / MiB:.1f} MiB "
        f"(+{(memory.peak - memory.before) / MiB:.1f} MiB, {memory.samples} samples), "
        f"after {memory.after / MiB:.1f} MiB (+{(memory.after - memory.before) / MiB:.1f} MiB,"
        " the terminal still holds the run as last_run)"
    )
    cap, replay = settings.run_output_cap, settings.replay_cap
    held = cap * 1.8 + replay * 2
    # Trimming the tail (1.6 cap -> 0.8 cap) makes CPython copy the bytearray into a new
    # buffer before freeing the old one (allocated with 1/8 spare): both exist at once.
    transient = cap * 0.2 + cap * 1.6 * 1.125 + cap * 0.8 + replay * 3
    growth = memory.peak - memory.before
    print(
        f"    bound from the caps: held at most ~{held / MiB:.1f} MiB (run head 0.2 cap + "
        f"tail up to 1.6 cap, replay up to 2x); during a trim ~{transient / MiB:.1f} MiB"
    )
    print(
        f"    peak growth {growth / MiB:.1f} MiB is "
        f"{'within' if growth <= transient + 8 * MiB else 'ABOVE'} the trim bound "
        "+ 8 MiB slack (read buffers, allocator)"
    )
    quarters = [(q - memory.before) / MiB for q in memory.quarter_peaks]
    later = max(quarters[2:]) - max(quarters[:2])
    print(
        "    peak growth by quarter of the output: "
        + ", ".join(f"{q:.1f}" for q in quarters)
        + " MiB: "
        + (
            "flat (bounded: no growth after the first half)"
            if later <= 8
            else f"second half +{later:.1f} MiB above the first (allocator? check with --big)"
        )
    )

    print()
    marked = median(parser.seconds)
    plain = median(parser.plain_seconds)
    rate = parser.stream_bytes / marked / MB
    plain_rate = parser.plain_bytes / plain / MB
    reference = parser.stream_bytes / median(parser.reference_seconds) / MB
    per_marker = (marked - plain * parser.stream_bytes / parser.plain_bytes) / parser.markers
    print(
        f"(d) parser, 4 KiB chunks, median of {len(parser.seconds)}: recorded-style stream "
        f"({parser.stream_bytes / MB:.1f} MB, {parser.markers} markers, 6 per ~4.1 KB) "
        f"{rate:.0f} MB/s"
    )
    print(
        f"    same text without markers {plain_rate:.0f} MB/s; so ~{per_marker * 1e6:.1f} us "
        f"per marker; a bare bytes.find per chunk: {reference:.0f} MB/s"
    )
    small, large = sorted(parser.long_osc)
    t_small, t_large = parser.long_osc[small], parser.long_osc[large]
    growth = t_large / t_small
    print(
        f"    unterminated OSC fed 1 byte at a time: {small // 1024} KiB {t_small * 1e3:.1f} ms "
        f"({t_small / small * 1e6:.2f} us/B), {large // 1024} KiB {t_large * 1e3:.1f} ms "
        f"({t_large / large * 1e6:.2f} us/B): x{growth:.1f} for x{large / small:.0f} the bytes "
        f"-- {'linear' if growth < (large / small) * 1.5 else 'NOT linear'}"
    )

    print()
    print("diagnostics (untimed, separate instrumented terminal):")
    for line in diagnostics.lines:
        print("  " + line)
    for title, text in profile or []:
        print()
        print(f"profile of ours, {title} (cProfile, by own time; epoll.poll is waiting):")
        print(text.strip("\n"))


# -- main -----------------------------------------------------------------------------


async def run_all(args: argparse.Namespace) -> None:
    settings = Settings(default_shell=args.shell)
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory(prefix="bench-shell-") as tmp:
        home = os.path.join(tmp, "home")
        cwd = os.path.join(tmp, "work")
        os.mkdir(home)
        os.mkdir(cwd)
        env: dict[str, str] = {} if args.user_rc else {"HOME": home}
        ours = await ShellTerminal.spawn(1, cwd, settings, shell=args.shell, env=env)
        floor: FloorShell | None = None
        try:
            state = await ours.ready()
            if state is not IntegrationState.RICH:
                raise RuntimeError(f"ours: integration is {state}, not rich")
            floor = FloorShell(args.shell, cwd, settings, env)

            produce = 1_000_000_000 if args.big else 200_000_000
            log(f"(c) memory: {produce / MB:.0f} MB through ours (first: heap not yet grown)")
            memory = await bench_memory(ours, produce)
            log(f"(a) latency: {args.n} runs of each command per side, rounds of {args.round}")
            latency = await bench_latency(ours, floor, args.n, args.round, args.warmup)
            log(f"(b) throughput: {sizes}, {args.rounds} rounds")
            throughput = await bench_throughput(ours, floor, sizes, args.rounds)
            log("diagnostics")
            diagnostics = await diagnose(args.shell, cwd, settings, env, floor, max(sizes))
            profile = None
            if args.profile:
                log("profiling ours")
                profile = await profile_ours(ours, max(sizes), 200)
        finally:
            await ours.close()
            if floor is not None:
                floor.close()
    log("(d) parser")
    parser = bench_parser(args.parser_mb * MB, 5)
    report(args, settings, latency, throughput, memory, parser, diagnostics, profile)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--n", type=int, default=300, help="runs per latency command per side")
    parser.add_argument("--round", type=int, default=10, help="runs per side per round")
    parser.add_argument("--warmup", type=int, default=20, help="untimed runs per side first")
    parser.add_argument(
        "--sizes", default="1000000,3000000", help="seq upper bounds for throughput"
    )
    parser.add_argument("--rounds", type=int, default=7, help="throughput rounds per size")
    parser.add_argument("--big", action="store_true", help="1 GB for the memory figure")
    parser.add_argument("--parser-mb", type=int, default=32, help="parser stream size, MB")
    parser.add_argument(
        "--shell", default=shutil.which("bash") or "/bin/bash", help="bash (the default)"
    )
    parser.add_argument("--user-rc", action="store_true", help="keep the real $HOME")
    parser.add_argument("--profile", action="store_true", help="cProfile our side")
    args = parser.parse_args(argv)
    if args.n < 10:
        parser.error("--n must be at least 10 (for a p90)")
    asyncio.run(run_all(args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
