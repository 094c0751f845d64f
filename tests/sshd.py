"""A private sshd on 127.0.0.1 for the ssh provider's tests; nothing in /etc/ssh touched.

As root: a throwaway user (``useradd -m``, then ``usermod -p '*'``: a locked account
is refused when ``UsePAM no``), host and client keys in a temp dir, an sshd_config of
our own on a free port (``LogLevel DEBUG3``, so its log shows every command it ran),
``sshd -D`` started with ``NOTIFY_SOCKET`` pointing at a datagram socket of ours:
Debian's sshd says ``READY=1`` there once it listens, so we wait for that, not for a
port.  The client side is an ssh_config (given with ``ssh -F``) whose hosts use our
key and a known_hosts file of our own.  Torn down: sshd, every process of the user,
the user and its home.

The fixture skips, saying why, only when it cannot run here (not root, or no sshd):
``.ci/run`` installs openssh-server, so CI runs these tests.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from registry.config import Settings

from .conftest import fast_settings

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
READY_TIMEOUT = 20.0


@dataclass
class PrivateSshd:
    """The running sshd and everything a test needs to reach it."""

    #: Host aliases of the client config: the good one, and one whose known_hosts
    #: holds another key (a man in the middle, as ssh sees it).
    alias: str
    wrong_key_alias: str
    config: str
    user: str
    uid: int
    home: str
    port: int
    log: str
    pid: int

    @property
    def destination(self) -> str:
        """The same target, as ``user@host:port`` (resolved to the same key)."""
        return f"{self.user}@127.0.0.1:{self.port}"

    def settings(self, **changes: object) -> Settings:
        settings = fast_settings()
        settings.ssh_config_file = self.config
        for key, value in changes.items():
            setattr(settings, key, value)
        return settings

    def processes(self) -> list[psutil.Process]:
        """Every live process of the throwaway user (all of them are ours)."""
        found = []
        for proc in psutil.process_iter(["uids", "status"]):
            uids = proc.info["uids"]
            if uids is not None and uids.real == self.uid and proc.info["status"] != "zombie":
                found.append(proc)
        return found

    def tagged(self, tag: str) -> list[psutil.Process]:
        """The user's processes whose environment carries a terminal's tag."""
        found = []
        for proc in self.processes():
            with contextlib.suppress(psutil.Error):
                if proc.environ().get("TERMINAL_REGISTRY_TERMINAL") == tag:
                    found.append(proc)
        return found

    def cmdlines(self) -> list[str]:
        """The command line of every process on the machine (as any user could read)."""
        lines = []
        for proc in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                lines.append("\0".join(proc.cmdline()))
        return lines


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _keygen(path: Path) -> str:
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
    )
    return path.with_suffix(".pub").read_text().strip()


def _start(config: Path, log: Path, directory: Path) -> subprocess.Popen[bytes]:
    """``sshd -D``; returns once it says it listens (sd_notify READY=1)."""
    notify = directory / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as ready:
        ready.bind(str(notify))
        ready.settimeout(READY_TIMEOUT)
        proc = subprocess.Popen(
            [SSHD or "sshd", "-D", "-f", str(config), "-E", str(log)],
            env={**os.environ, "NOTIFY_SOCKET": str(notify)},
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            while b"READY=1" not in ready.recv(4096):
                pass
        except OSError as error:
            proc.kill()
            proc.wait()
            text = log.read_text() if log.exists() else ""
            raise RuntimeError(f"sshd did not come up ({error}): {text[-2000:]}") from None
    return proc


def cannot_run() -> str | None:
    """Why a private sshd cannot run here, or None."""
    if os.geteuid() != 0:
        return "the private sshd needs root (a throwaway user, PTYs for it)"
    if SSHD is None or shutil.which("ssh") is None or shutil.which("ssh-keygen") is None:
        return "openssh-server and openssh-client are not installed (.ci/run installs them)"
    return None


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateSshd]:
    reason = cannot_run()
    if reason is not None:
        pytest.skip(reason)
    with private_sshd(tmp_path_factory.mktemp("sshd")) as server:
        yield server


@contextlib.contextmanager
def private_sshd(directory: Path) -> Iterator[PrivateSshd]:
    """Start a private sshd with its files in ``directory``; all gone afterwards."""
    os.chmod(directory, 0o755)
    user = "trssh" + secrets.token_hex(4)
    subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash", user], check=True)
    proc: subprocess.Popen[bytes] | None = None
    try:
        subprocess.run(["usermod", "-p", "*", user], check=True)
        entry = pwd.getpwnam(user)
        host_key = _keygen(directory / "host_key")
        client_key = _keygen(directory / "client_key")
        ssh_dir = Path(entry.pw_dir, ".ssh")
        ssh_dir.mkdir(mode=0o700)
        (ssh_dir / "authorized_keys").write_text(client_key + "\n")
        os.chmod(ssh_dir / "authorized_keys", 0o600)
        for path in (ssh_dir, ssh_dir / "authorized_keys"):
            os.chown(path, entry.pw_uid, entry.pw_gid)
        port = _free_port()
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        config = directory / "sshd_config"
        config.write_text(
            "\n".join(
                [
                    "ListenAddress 127.0.0.1",
                    f"Port {port}",
                    f"HostKey {directory / 'host_key'}",
                    f"PidFile {directory / 'sshd.pid'}",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    f"AllowUsers {user}",
                    # Ten terminals and a control session on one connection.
                    "MaxSessions 11",
                    "LogLevel DEBUG3",
                    "",
                ]
            )
        )
        known = directory / "known_hosts"
        known.write_text(f"[127.0.0.1]:{port} {host_key}\n")
        wrong = directory / "wrong_known_hosts"
        wrong.write_text(f"[127.0.0.1]:{port} {_keygen(directory / 'other_key')}\n")
        alias = "trtest-" + secrets.token_hex(3)
        common = [
            "  HostName 127.0.0.1",
            f"  Port {port}",
            f"  User {user}",
            f"  IdentityFile {directory / 'client_key'}",
            "  IdentitiesOnly yes",
            "  GlobalKnownHostsFile /dev/null",
            "  StrictHostKeyChecking yes",
        ]
        client = directory / "ssh_config"
        client.write_text(
            "\n".join(
                [
                    f"Host {alias} 127.0.0.1",
                    *common,
                    f"  UserKnownHostsFile {known}",
                    f"Host {alias}-wrongkey",
                    *common,
                    f"  UserKnownHostsFile {wrong}",
                    "",
                ]
            )
        )
        log = directory / "sshd.log"
        proc = _start(config, log, directory)
        yield PrivateSshd(
            alias=alias,
            wrong_key_alias=f"{alias}-wrongkey",
            config=str(client),
            user=user,
            uid=entry.pw_uid,
            home=entry.pw_dir,
            port=port,
            log=str(log),
            pid=proc.pid,
        )
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait()
        # Whatever the tests left of the user's goes with it (they check for leftovers
        # themselves; this is only so that userdel can work).
        leftovers = []
        for leftover in psutil.process_iter(["uids"]):
            uids = leftover.info["uids"]
            with contextlib.suppress(KeyError, psutil.Error):
                if uids is not None and uids.real == pwd.getpwnam(user).pw_uid:
                    leftover.send_signal(signal.SIGKILL)
                    leftovers.append(leftover)
        psutil.wait_procs(leftovers, timeout=5)
        subprocess.run(["userdel", "--remove", user], check=False, capture_output=True)
