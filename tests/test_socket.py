"""The Unix-socket transport: several clients, one registry, one user."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

import pytest

from .rpc import SERVER, StdioServer, connect_socket, serve_socket


async def test_socket_and_directory_are_private(socket_path: Path) -> None:
    assert stat.S_IMODE(os.stat(socket_path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(socket_path.parent).st_mode) == 0o700


async def test_two_clients_share_one_registry(socket_path: Path, tmp_path: Path) -> None:
    a = await connect_socket(str(socket_path))
    b = await connect_socket(str(socket_path))
    await a.initialize({"hotTimeoutMs": 200})
    await b.initialize()
    terminal = await a.call("terminal/acquire", {"cwd": str(tmp_path), "taskId": "shared"})
    # Both hear about it; B sees A's terminal.
    assert (await a.notification("terminal/didOpen", id=terminal["id"]))["taskId"] == "shared"
    assert (await b.notification("terminal/didOpen", id=terminal["id"]))["taskId"] == "shared"
    assert [t["id"] for t in await b.call("terminal/list", {})] == [terminal["id"]]
    # A runs; B's notifications show it; each gets only its own replies.
    result = await a.call("terminal/run", {"command": "echo from-a", "terminalId": terminal["id"]})
    assert result["output"] == "from-a\n"
    end = await b.notification("terminal/didEndRun", runId=result["runId"])
    assert end["exitCode"] == 0
    written = [
        n["params"]["data"]
        for n in b.notifications
        if n["method"] == "terminal/didWrite" and n["params"].get("runId") == result["runId"]
    ]
    assert "".join(written) == "from-a\r\n"
    # A leaves (shutdown + exit): its connection ends, the terminals stay for B.
    assert (await a.response(a.request("shutdown")))["result"] is None
    a.notify("exit")
    assert [t["id"] for t in await b.call("terminal/list", {})] == [terminal["id"]]
    c = await connect_socket(str(socket_path))
    await c.initialize()
    got = await c.call("terminal/get", {"terminalId": terminal["id"]})
    assert got["lastCommand"] == "echo from-a"


async def test_client_vanishing_does_not_disturb_the_others(socket_path: Path) -> None:
    a = await connect_socket(str(socket_path))
    await a.initialize()
    a._writer.close()
    b = await connect_socket(str(socket_path))
    await b.initialize()
    assert isinstance(await b.call("terminal/list", {}), list)


async def test_open_directory_is_refused(tmp_path: Path) -> None:
    # Others may write to it (group-writable): what is in it may be theirs. (One that
    # others may only read is closed to 0700 and used: tests/test_cli_faults.py.)
    directory = tmp_path / "open"
    directory.mkdir(mode=0o775)
    directory.chmod(0o775)
    process = await asyncio.create_subprocess_exec(
        *SERVER, "--socket", str(directory / "s.sock"), stderr=asyncio.subprocess.PIPE
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), 30)
    finally:
        if process.returncode is None:  # it served there: end it, and fail below
            process.kill()
            await process.wait()
    assert process.returncode == 2
    assert b"0700" in stderr


_PEER_PROBE = """
use IO::Socket::UNIX;
$SIG{PIPE} = 'IGNORE';  # the server may close before our request is written: EPIPE, not death
my $s = IO::Socket::UNIX->new(Type => SOCK_STREAM(), Peer => $ARGV[0]) or die "connect: $!";
my $body = '{"jsonrpc":"2.0","id":1,"method":"terminal/list"}';
print $s "Content-Length: " . length($body) . "\\r\\n\\r\\n" . $body;
my $got = '';
my $n = sysread($s, $got, 100);
print defined($n) ? "read $n bytes\\n" : "error: $!\\n";
"""


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
@pytest.mark.skipif(shutil.which("perl") is None, reason="the probe is a perl one-liner")
async def test_connection_from_another_uid_is_refused() -> None:
    # A directory another user can reach (pytest's tmp dirs are closed to them).
    directory = Path(tempfile.mkdtemp(prefix="tr-peer-", dir="/tmp"))
    path = directory / "s.sock"
    process = await serve_socket(path)
    try:
        # Open the way (as a careless admin might) so that only the peer check stands.
        # (The probe is perl: the test's own Python may live where nobody can run it.)
        directory.chmod(0o711)
        path.chmod(0o666)
        probe = await asyncio.create_subprocess_exec(
            "perl",
            "-e",
            _PEER_PROBE,
            str(path),
            user=65534,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        stdout, stderr = await asyncio.wait_for(probe.communicate(), 30)
        # Connected, then closed (or reset) without a byte of answer.
        answer = stdout.strip()
        assert answer == b"read 0 bytes" or answer.startswith(b"error: Connection reset"), (
            answer,
            stderr,
        )
    finally:
        process.terminate()
        await asyncio.wait_for(process.wait(), 30)
        shutil.rmtree(directory, ignore_errors=True)


async def test_stdio_server_shares_its_registry_on_a_socket(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    path = directory / "ide.sock"
    ide = await StdioServer.start("--socket", str(path), "--export-socket")
    try:
        await ide.initialize()
        result = await ide.call(
            "terminal/run",
            {
                "command": 'echo "$TERMINAL_REGISTRY_SOCKET"; '
                f"{sys.executable} -m protocol.cli list --json",
                "cwd": str(tmp_path),
                "taskId": "agent",
            },
        )
        lines = result["output"].split("\n", 1)
        assert lines[0] == str(path)
        # An agent inside the terminal reached the same registry and saw it.
        listed = json.loads(lines[1])
        assert [t["id"] for t in listed] == [result["terminalId"]]
        assert listed[0]["busy"] is True
    finally:
        await ide.stop()
    assert not path.exists()


async def test_the_socket_is_not_exported_unless_asked(tmp_path: Path) -> None:
    directory = tmp_path / "run"
    directory.mkdir(mode=0o700)
    path = directory / "ide.sock"
    ide = await StdioServer.start("--socket", str(path))
    try:
        await ide.initialize()
        result = await ide.call(
            "terminal/run",
            {"command": 'echo "[${TERMINAL_REGISTRY_SOCKET-unset}]"', "cwd": str(tmp_path)},
        )
        assert result["output"] == "[unset]\n"
    finally:
        await ide.stop()


async def test_settings_are_per_connection(socket_path: Path, tmp_path: Path) -> None:
    hasty = await connect_socket(str(socket_path))
    await hasty.initialize({"commandTimeoutMs": 300})
    patient = await connect_socket(str(socket_path))
    await patient.initialize({})
    timed = await hasty.call("terminal/run", {"command": "sleep 5", "cwd": str(tmp_path)})
    assert timed["state"] == "timedOut"
    # The other client's default (no timeout) is its own: hasty's did not become it.
    done = await patient.call("terminal/run", {"command": "sleep 1; echo slept", "cwd": "/"})
    assert (done["state"], done["output"]) == ("completed", "slept\n")


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"cols": 70000}, "initializationOptions.cols"),
        ({"rows": 0}, "initializationOptions.rows"),
        ({"killGraceMs": -1}, "initializationOptions.killGraceMs"),
        ({"hotTimeoutMs": "x"}, "hotTimeoutMs"),
        ({"outputLineLimit": 2.5}, "initializationOptions.outputLineLimit"),
    ],
)
async def test_options_out_of_bounds_are_refused(
    socket_path: Path, options: dict[str, object], words: str
) -> None:
    peer = await connect_socket(str(socket_path))
    error = await peer.error("initialize", {"capabilities": {}, "initializationOptions": options})
    assert error["code"] == -32602
    assert words in error["message"]
    # The connection still initializes with good options, and works.
    await peer.initialize({"cols": 100})
    assert isinstance(await peer.call("terminal/list", {}), list)
