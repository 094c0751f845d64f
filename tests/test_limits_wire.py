"""Limits and the audit log over the real transport: ``limits`` on terminal/acquire,
terminal/run and in initializationOptions, checked strictly; the run's ``limit`` in
its result and in didEndRun; the Terminal saying how each limit is enforced; the
CLI's flags; one audit line per command, private, rotated, and ``terminal-registry
log`` printing it."""

from __future__ import annotations

import asyncio
import json
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from protocol.audit import AuditFile, read_entries
from protocol.client import RegistryClient
from protocol.types import Limits
from registry.cgroups import detect
from registry.processes import wait_gone

from .rpc import StdioServer, connect_socket, serve_socket, serving, tokened_sleeps

CLI = [sys.executable, "-m", "protocol.cli"]
SUPPORT = detect()


async def test_a_run_over_its_output_limit_fails_naming_it_and_the_terminal_goes_on(
    tmp_path: Path,
) -> None:
    peer = await StdioServer.start()
    try:
        await peer.initialize()
        result = await peer.call(
            "terminal/run",
            {"command": "yes", "cwd": str(tmp_path), "limits": {"outputMb": 2}},
        )
        assert (result["state"], result["limit"]) == ("failed", "outputMb")
        assert "outputMb limit hit: it wrote more than 2 MB" in result["note"]
        end = await peer.notification("terminal/didEndRun", runId=result["runId"])
        assert end["limit"] == "outputMb"
        info = await peer.call("terminal/get", {"terminalId": result["terminalId"]})
        assert info["limitsBy"]["outputMb"] == "server"
        assert set(info["limitsBy"]) == {
            "memoryMb",
            "pids",
            "cpuSeconds",
            "outputMb",
            "wallSeconds",
        }
        after = await peer.call(
            "terminal/run", {"command": "echo fine", "terminalId": result["terminalId"]}
        )
        assert (after["state"], after["exitCode"]) == ("completed", 0)
        assert "limit" not in after
    finally:
        await peer.stop()


@pytest.mark.skipif(
    SUPPORT is None or "pids" not in SUPPORT.limits(),
    reason="no cgroup with a pids limit on this machine",
)
async def test_a_shell_loop_over_its_process_limit_fails_naming_it_and_the_terminal_goes_on(
    tmp_path: Path,
) -> None:
    # Digits only: the token is the fraction of each sleep's seconds.
    token = f"{secrets.randbelow(10**12):012d}"
    command = f"for i in $(seq 20); do sleep 60.{token} & done; wait; echo finished"
    async with serving() as peer:
        result = await peer.call(
            "terminal/run", {"command": command, "cwd": str(tmp_path), "limits": {"pids": 5}}
        )
        assert (result["state"], result["limit"]) == ("failed", "pids")
        assert "did not return" not in result["note"]
        after = await peer.call(
            "terminal/run", {"command": "echo ok", "terminalId": result["terminalId"]}
        )
        assert (after["state"], after["exitCode"], after["terminalId"]) == (
            "completed",
            0,
            result["terminalId"],
        )
        assert "ok" in after["output"]
        listed = await peer.call("terminal/list", {})
        assert [t["id"] for t in listed] == [result["terminalId"]]
        assert not [n for n in peer.notifications if n["method"] == "terminal/didClose"]
        # Everything the run started has ended (SIGKILLed: the exits are awaited).
        await wait_gone(tokened_sleeps(token), 10)
        assert tokened_sleeps(token) == []


async def test_acquire_sets_the_terminals_limits_and_settings_set_everyones(
    tmp_path: Path,
) -> None:
    peer = await StdioServer.start()
    try:
        await peer.initialize({"limits": {"wallSeconds": 30}})
        info = await peer.call(
            "terminal/acquire",
            {"cwd": str(tmp_path), "provider": "subprocess", "limits": {"pids": 100}},
        )
        assert info["limits"] == {"pids": 100}
        result = await peer.call(
            "terminal/run",
            {"command": "sleep 20", "terminalId": info["id"], "limits": {"wallSeconds": 0.3}},
        )
        assert (result["state"], result["limit"]) == ("failed", "wallSeconds")
        # The settings' wallSeconds (30 s) applies where the run sets none.
        quick = await peer.call("terminal/run", {"command": "true", "terminalId": info["id"]})
        assert quick["state"] == "completed"
    finally:
        await peer.stop()


@pytest.mark.parametrize(
    ("limits", "message"),
    [
        ({"memoryMb": -1}, "limits.memoryMb must be not negative"),
        ({"pids": "50"}, "limits.pids must be an integer, got a string"),
        ({"cpuSeconds": True}, "limits.cpuSeconds must be a number, got a boolean"),
        ([1], "limits must be an object, got an array"),
    ],
)
async def test_bad_limits_are_refused_naming_the_field(
    tmp_path: Path, limits: object, message: str
) -> None:
    peer = await StdioServer.start()
    try:
        await peer.initialize()
        error = await peer.error(
            "terminal/run", {"command": "true", "cwd": str(tmp_path), "limits": limits}
        )
        assert error["code"] == -32602
        assert message in error["message"]
        # Nothing broke: the next request is served.
        ok = await peer.call("terminal/run", {"command": "true", "cwd": str(tmp_path)})
        assert ok["state"] == "completed"
    finally:
        await peer.stop()


async def test_the_python_client_sends_limits(tmp_path: Path) -> None:
    async with await RegistryClient.spawn() as client:
        result = await client.run(
            "head -c 3000000 /dev/zero", cwd=str(tmp_path), limits=Limits(output_mb=1)
        )
        assert (result.state, result.limit) == ("failed", "outputMb")
        terminal = await client.acquire(str(tmp_path), "t", limits=Limits(memory_mb=300))
        assert terminal.limits == Limits(memory_mb=300)
        assert terminal.limits_by is not None


def test_the_cli_takes_limit_flags_and_says_which_limit_ended_the_command(
    tmp_path: Path,
) -> None:
    runtime = tmp_path / "xdg"
    runtime.mkdir(mode=0o700)
    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_REGISTRY_SOCKET"}
    env["XDG_RUNTIME_DIR"] = str(runtime)
    try:
        done = subprocess.run(
            [*CLI, "run", "--json", "--output-mb", "1", "--cwd", str(tmp_path), "--", "yes"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        summary = json.loads(done.stdout)
        assert (summary["state"], summary["limit"]) == ("failed", "outputMb")
        assert done.returncode != 0
        plain = subprocess.run(
            [*CLI, "run", "--wall-seconds", "0.3", "--cwd", str(tmp_path), "--", "sleep 9"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert "limit: the command hit its wallSeconds limit" in plain.stderr
    finally:
        subprocess.run([*CLI, "stop"], env=env, capture_output=True, timeout=60)


# -- the audit log ---------------------------------------------------------------------


async def test_every_command_gets_one_private_audit_line_with_who_where_and_how(
    tmp_path: Path,
) -> None:
    log_path = tmp_path / "audit" / "audit.jsonl"
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    socket_path = directory / "s.sock"
    server = await serve_socket(socket_path, "--audit-log", str(log_path))
    try:
        peer = await connect_socket(str(socket_path))
        await peer.initialize()
        (tmp_path / "sub").mkdir()
        first = await peer.call(
            "terminal/run",
            {"command": "cd sub; echo hello", "cwd": str(tmp_path), "taskId": "audited"},
        )
        second = await peer.call(
            "terminal/run",
            {
                "command": "yes",
                "terminalId": first["terminalId"],
                "limits": {"outputMb": 1},
            },
        )
        await peer.call("terminal/close", {"terminalId": first["terminalId"]})
    finally:
        server.terminate()
        await server.wait()
    assert stat.S_IMODE(log_path.stat().st_mode) == 0o600
    entries = list(read_entries(str(log_path)))
    assert [e["runId"] for e in entries] == [first["runId"], second["runId"]]
    one, two = entries
    assert one["client"] == {"pid": os.getpid(), "uid": os.getuid(), "transport": "socket"}
    assert (one["task"], one["provider"], one["command"]) == (
        "audited",
        "shell",
        "cd sub; echo hello",
    )
    assert (one["cwdBefore"], one["cwdAfter"]) == (str(tmp_path), str(tmp_path / "sub"))
    assert (one["exitCode"], one["signal"], one["state"], one["limit"]) == (
        0,
        None,
        "completed",
        None,
    )
    assert one["outputBytes"] > 0
    assert one["durationMs"] >= 0
    assert one["time"] <= one["ended"]
    assert (two["state"], two["limit"], two["limits"]["outputMb"]) == ("failed", "outputMb", 1)
    assert two["signal"] == "SIGKILL"
    assert two["outputBytes"] > 2**20
    # Read back by the CLI, for people and as JSON.
    shown = await _cli("log", "--path", str(log_path))
    assert "$ cd sub; echo hello" in shown
    assert "task audited" in shown
    assert "limit outputMb" in shown
    as_json = await _cli("log", "--json", "--last", "1", "--path", str(log_path))
    assert [e["runId"] for e in json.loads(as_json)] == [second["runId"]]


async def _cli(*args: str) -> str:
    process = await asyncio.create_subprocess_exec(*CLI, *args, stdout=asyncio.subprocess.PIPE)
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0
    return out.decode()


def test_the_audit_file_appends_rotates_by_size_and_stays_private(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    path.write_text("")
    path.chmod(0o644)  # made open to others: it is made private again
    audit = AuditFile(str(path), max_bytes=200, keep=2)
    for n in range(10):
        audit.write({"n": n, "pad": "x" * 40})
    audit.close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(f"{path}.1").stat().st_mode) == 0o600
    assert all(os.path.getsize(p) <= 200 for p in (path, f"{path}.1", f"{path}.2"))
    assert not Path(f"{path}.3").exists()
    kept = [e["n"] for e in read_entries(str(path))]
    assert kept == sorted(kept)
    assert kept[-1] == 9
    assert len(kept) < 10  # the oldest went with the oldest file
    flags = AuditFile(str(path))
    try:
        import fcntl

        assert fcntl.fcntl(flags._fd, fcntl.F_GETFL) & os.O_APPEND
    finally:
        flags.close()
