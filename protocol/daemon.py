"""The per-user background server: where its socket is, starting it, stopping it.

The CLI (and any face that wants terminals to persist between calls) talks to the
server named by ``--socket`` or ``$TERMINAL_REGISTRY_SOCKET``, else to a per-user
background server on a default socket, started on first use.  Its pid file sits
next to the socket so that ``stop`` can find it; its log next to both.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile

from .listen import socket_accepts

__all__ = [
    "SOCKET_VARIABLE",
    "BackgroundServerError",
    "default_socket_path",
    "log_path",
    "pid_file",
    "resolve_socket",
    "start_background_server",
    "stop_server",
    "write_pid_file",
]

SOCKET_VARIABLE = "TERMINAL_REGISTRY_SOCKET"


class BackgroundServerError(Exception):
    """The background server could not be started or stopped; the message says why."""


def default_socket_path() -> str:
    """``$XDG_RUNTIME_DIR/terminal-registry/server.sock``, else one in the temp dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        base = os.path.join(runtime, "terminal-registry")
    else:
        uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
        base = os.path.join(tempfile.gettempdir(), f"terminal-registry-{uid}")
    return os.path.join(base, "server.sock")


def pid_file(socket_path: str) -> str:
    return os.path.abspath(socket_path) + ".pid"


def log_path(socket_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(socket_path)), "server.log")


def write_pid_file(socket_path: str) -> None:
    """Next to the socket, so that ``stop`` can find the server."""
    with open(pid_file(socket_path), "w") as f:
        f.write(str(os.getpid()))


def resolve_socket(explicit: str | None, *, start: bool) -> tuple[str, bool]:
    """The socket to talk to, and whether a background server was just started for it.

    ``explicit`` (``--socket``), else ``$TERMINAL_REGISTRY_SOCKET``, else the default
    socket, whose server is started when ``start`` is set and none listens.
    """
    path = explicit or os.environ.get(SOCKET_VARIABLE)
    if path:
        return path, False
    path = default_socket_path()
    if start and not socket_accepts(path):
        start_background_server(path)
        return path, True
    return path, False


def start_background_server(path: str) -> None:
    """Start ``terminal-registry serve --socket PATH`` in its own session; wait until ready."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    read_end, write_end = os.pipe()
    log = open(log_path(path), "ab")  # noqa: SIM115 - handed to the child
    try:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "protocol.cli",
                "serve",
                "--socket",
                path,
                "--ready-fd",
                str(write_end),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            pass_fds=(write_end,),
            start_new_session=True,
        )
    finally:
        os.close(write_end)
        log.close()
    # The server says "ready" once it listens; EOF without it means it failed.
    with os.fdopen(read_end, "rb") as ready:
        if not ready.readline().startswith(b"ready"):
            raise BackgroundServerError(
                f"the background server did not start; see {log_path(path)}"
            )


def stop_server(path: str) -> int | None:
    """SIGTERM the server of ``path`` (from its pid file) and wait; its pid, or None."""
    import psutil

    try:
        with open(pid_file(path)) as f:
            pid = int(f.read().strip())
        proc = psutil.Process(pid)
    except (OSError, ValueError, psutil.Error):
        return None
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except psutil.TimeoutExpired:
        proc.kill()
    return pid
