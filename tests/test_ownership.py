"""What a server owns ends with it, however it dies: the watchdog and the stale-record
reaper against real escaping processes (setsid, nohup, double forks, ignored signals,
a cleared environment)."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from registry.cgroups import detect
from registry.ownership import OwnershipRecord, reap_stale

from .rpc import tokened_sleeps

ROOT = Path(__file__).resolve().parent.parent

#: A stand-in for a server: a record, a watchdog (unless told not to), a cgroup for
#: its one "terminal", and a bash in it that starts processes of every escaping kind.
FAKE_SERVER = textwrap.dedent(
    """
    import os, sys, json, secrets, subprocess, time
    from registry.cgroups import detect
    from registry.ownership import OwnershipRecord, SERVER_TAG_VARIABLE
    from registry import watchdog

    state, token, scratch, with_watchdog = sys.argv[1:5]
    tag = secrets.token_hex(8)
    record = OwnershipRecord.create(state, tag)
    support = detect()
    group = support.create(f"terminal-registry-test-{tag}", "t1") if support else None
    if group is not None:
        record.cgroup = {k: os.path.dirname(p) for k, p in group.paths.items()}
    terminal_tag = secrets.token_hex(8)
    env = {**os.environ, SERVER_TAG_VARIABLE: tag, "TERMINAL_REGISTRY_TERMINAL": terminal_tag}
    files = group.procs_files() if group else []

    def join():
        for path in files:
            with open(path, "w") as f:
                f.write("0")

    # Each process says so through a FIFO just before it becomes its sleep (an
    # event to await, not a guess); the shell itself becomes the last one.
    fifo = os.path.join(scratch, "ready")
    os.mkfifo(fifo)
    ready = os.fdopen(os.open(fifo, os.O_RDWR), "r")

    def sleeper(n):
        return f"sh -c 'echo {n} > {fifo}; exec sleep 300{n}.{token}'"

    script = f'''
    {sleeper(1)} &
    setsid {sleeper(2)} &
    nohup {sleeper(3)} >/dev/null 2>&1 &
    ( ( {sleeper(4)} & ) & )
    bash -c 'trap "" TERM HUP INT; exec {sleeper(5)}' &
    env -i setsid -f {sleeper(6)}
    env -u TERMINAL_REGISTRY_TERMINAL -u {SERVER_TAG_VARIABLE} setsid -f {sleeper(7)}
    exec {sleeper(0)}
    '''
    shell = subprocess.Popen(["bash", "-c", script], env=env, preexec_fn=join)
    seen = set()
    while len(seen) < 8:
        seen.add(ready.readline().strip())
    record.add_terminal(
        1, tag=terminal_tag, pid=shell.pid, scratch=scratch,
        cgroup=group.paths if group else None,
    )
    record.note_groups(1, [os.getpgid(shell.pid)], [os.getsid(shell.pid)])
    dog = watchdog.start(record.path) if with_watchdog == "1" else None
    print(json.dumps({"watchdog": dog.pid if dog else None, "record": record.path}), flush=True)
    time.sleep(3600)
    """
)

KINDS = 8  # sleeps 3000..3007


def _start_fake_server(
    tmp_path: Path, *, watchdog: bool
) -> tuple[subprocess.Popen[bytes], dict[str, object], str, Path]:
    # Digits only: the token is the fraction of each sleep's seconds.
    token = f"{secrets.randbelow(10**12):012d}"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    state = tmp_path / "state"
    server = subprocess.Popen(
        [sys.executable, "-c", FAKE_SERVER, str(state), token, str(scratch), str(int(watchdog))],
        stdout=subprocess.PIPE,
        cwd=ROOT,
    )
    _STARTED.append(server)
    assert server.stdout is not None
    info = json.loads(server.stdout.readline())
    return server, info, token, scratch


_STARTED: list[subprocess.Popen[bytes]] = []


@pytest.fixture(autouse=True)
def _leave_nothing(tmp_path: Path) -> Iterator[None]:
    """Whatever a failing test leaves: the fake server ends, its record is reaped."""
    yield
    while _STARTED:
        server = _STARTED.pop()
        server.kill()
        server.wait()
    reap_stale(str(tmp_path / "state"))


needs_cgroups = pytest.mark.skipif(
    detect() is None, reason="no writable cgroup hierarchy: a cleared environment escapes"
)


@needs_cgroups
def test_the_watchdog_reaps_everything_when_the_server_is_killed(tmp_path: Path) -> None:
    server, info, token, scratch = _start_fake_server(tmp_path, watchdog=True)
    children = tokened_sleeps(token)
    assert len(children) == KINDS, [p.cmdline() for p in children]
    watchdog = psutil.Process(int(info["watchdog"]))  # type: ignore[arg-type]
    server.send_signal(signal.SIGKILL)
    server.wait()
    _gone, alive = psutil.wait_procs([*children, watchdog], timeout=15)
    assert alive == []
    assert tokened_sleeps(token) == []
    assert not scratch.exists()
    assert not Path(str(info["record"])).exists()


@needs_cgroups
def test_a_new_server_reaps_what_a_dead_one_left(tmp_path: Path) -> None:
    server, info, token, scratch = _start_fake_server(tmp_path, watchdog=False)
    children = tokened_sleeps(token)
    assert len(children) == KINDS
    server.send_signal(signal.SIGKILL)
    server.wait()
    assert len(tokened_sleeps(token)) == KINDS  # nobody reaped them yet
    reaped = reap_stale(str(tmp_path / "state"))
    assert len(reaped) == 1
    assert len(reaped[0].processes) >= KINDS
    assert str(scratch) in reaped[0].removed
    _gone, alive = psutil.wait_procs(children, timeout=15)
    assert alive == []
    assert not Path(str(info["record"])).exists()


def test_a_living_servers_record_is_left_alone(tmp_path: Path) -> None:
    record = OwnershipRecord.create(str(tmp_path / "state"), secrets.token_hex(8))
    assert reap_stale(str(tmp_path / "state")) == []
    assert os.path.exists(record.path)
    record.discard()
