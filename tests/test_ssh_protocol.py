"""Remote terminals over the wire and from the command line: a real server, a real
client, the private sshd of tests/sshd.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio

from protocol.client import InvalidParamsError, RegistryClient, SpawnFailedError

from .sshd import PrivateSshd, sshd

__all__ = ["sshd"]

CLI = [sys.executable, "-m", "protocol.cli"]


def options(sshd: PrivateSshd) -> dict[str, object]:
    return {"sshConfigFile": sshd.config, "killGraceMs": 500, "hotTimeoutMs": 300}


@pytest_asyncio.fixture
async def client(sshd: PrivateSshd) -> AsyncIterator[RegistryClient]:
    c = await RegistryClient.spawn(options(sshd))
    yield c
    await c.close()


async def test_run_acquire_list_and_details_over_the_wire(
    client: RegistryClient, sshd: PrivateSshd
) -> None:
    where = f"{sshd.user}@127.0.0.1:{sshd.port}"
    assert "ssh" in client.capabilities["terminalRegistry"]["providers"]
    result = await client.run("cd /tmp && echo remote", host=sshd.alias, task_id="w")
    assert (result.exit_code, result.output, result.cwd) == (0, "remote\n", "/tmp")
    [terminal] = await client.list(task_id="w")
    assert (terminal.provider, terminal.host, terminal.container) == ("ssh", where, None)
    assert terminal.cwd == "/tmp"
    # acquire by (host, cwd) finds it; the same cwd on this machine is another terminal.
    again = await client.acquire("/tmp", task_id="w", host=sshd.destination)
    assert again.id == terminal.id
    local = await client.acquire("/tmp", task_id="w")
    assert (local.id != terminal.id, local.host) == (True, None)
    await client.run("echo later", terminal_id=terminal.id, background=True)
    details = await client.environment_details("w", cooldown_timeout=5)
    assert f"### Working Directory: `ssh://{where}/tmp`" in details.markdown
    assert "later" in details.markdown


async def test_bad_remote_requests_are_clear_errors(
    client: RegistryClient, sshd: PrivateSshd
) -> None:
    with pytest.raises(InvalidParamsError, match="host or container, not both"):
        await client.acquire("~", host=sshd.alias, container="box")
    with pytest.raises(InvalidParamsError, match="runs on this machine"):
        await client.run("true", host=sshd.alias, provider="subprocess")
    with pytest.raises(InvalidParamsError, match="invalid ssh host"):
        await client.acquire("~", host="-oProxyCommand=x")
    with pytest.raises(InvalidParamsError, match=f"does not exist on {sshd.user}@"):
        await client.acquire("/no/such/dir", host=sshd.alias)
    with pytest.raises(SpawnFailedError, match="Host key verification failed"):
        await client.run("true", host=sshd.wrong_key_alias)
    # The server keeps serving.
    assert (await client.run("echo fine", host=sshd.alias)).output == "fine\n"


@pytest.fixture
def socket_server(sshd: PrivateSshd, tmp_path: Path) -> Iterator[str]:
    """A socket server whose own settings name the private ssh config: the CLI's
    connections send none (settings are per connection)."""
    path = str(tmp_path / "s.sock")
    read_fd, write_fd = os.pipe()
    server = subprocess.Popen(
        [
            *CLI,
            "serve",
            "--socket",
            path,
            "--options",
            json.dumps(options(sshd)),
            "--ready-fd",
            str(write_fd),
        ],
        pass_fds=(write_fd,),
    )
    os.close(write_fd)
    with os.fdopen(read_fd) as ready:
        assert ready.readline() == "ready\n"
    yield path
    server.terminate()
    server.wait(30)


def test_the_cli_runs_on_a_host_and_lists_it(socket_server: str, sshd: PrivateSshd) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*CLI, *args[:1], "--socket", socket_server, *args[1:]],
            capture_output=True,
            text=True,
            timeout=60,
        )

    where = f"{sshd.user}@127.0.0.1:{sshd.port}"
    ran = cli("run", "--host", sshd.alias, "--task", "c", "--", "pwd; (exit 3)")
    assert ran.returncode == 3, ran.stderr
    assert ran.stdout == f"{sshd.home}\n"
    assert f"cwd: ssh://{where}{sshd.home}" in ran.stderr
    ran = cli("run", "--host", sshd.alias, "--cwd", "/tmp", "--json", "--", "true")
    summary = json.loads(ran.stdout)
    assert (summary["host"], summary["cwd"], summary["provider"]) == (where, "/tmp", "ssh")
    listed = cli("list")
    assert f"ssh://{where}{sshd.home}" in listed.stdout
    assert f"ssh://{where}/tmp" in listed.stdout
    both = cli("run", "--host", "a", "--container", "b", "--", "true")
    assert both.returncode == 2
    assert "not allowed with argument" in both.stderr
