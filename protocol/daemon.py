"""The per-user background server: where its socket is, starting it, stopping it.

The CLI (and any face that wants terminals to persist between calls) talks to the
server named by ``--socket``; else to the one at ``$TERMINAL_REGISTRY_SOCKET``, else
to a per-user background server on a default socket -- in those two cases started on
first use.  Its pid file and log sit next to the socket.

The default directory may be in the shared temp dir (no ``XDG_RUNTIME_DIR``), where
another user could have planted something first, so nothing here trusts what it
finds: the directory must be ours and 0700 (:func:`~protocol.listen.check_socket_directory`),
files are opened without following symbolic links, and a pid file's process is
signalled only once it is verified to be our server for that socket (same user,
same start time, a ``serve --socket PATH`` command line) -- also after the kernel
has reused the pid.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psutil

__all__ = [
    "MAX_SOCKET_PATH",
    "SOCKET_VARIABLE",
    "BackgroundServerError",
    "NoServerError",
    "default_socket_path",
    "log_path",
    "pid_file",
    "resolve_socket",
    "socket_path",
    "start_background_server",
    "stop_server",
    "write_pid_file",
]

SOCKET_VARIABLE = "TERMINAL_REGISTRY_SOCKET"
#: sockaddr_un's sun_path holds 108 bytes on Linux, the last one a NUL.
MAX_SOCKET_PATH = 107


class BackgroundServerError(Exception):
    """The background server could not be started or stopped; the message says why."""


class NoServerError(BackgroundServerError):
    """No server of ours runs for that socket."""


def default_socket_path() -> str:
    """``$XDG_RUNTIME_DIR/terminal-registry/server.sock``, else one in the temp dir."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isdir(runtime) and os.access(runtime, os.W_OK):
        base = os.path.join(runtime, "terminal-registry")
    else:
        import tempfile

        uid = os.getuid() if hasattr(os, "getuid") else os.getpid()
        base = os.path.join(tempfile.gettempdir(), f"terminal-registry-{uid}")
    return os.path.join(base, "server.sock")


def pid_file(socket_path: str) -> str:
    return os.path.abspath(socket_path) + ".pid"


def log_path(socket_path: str) -> str:
    return os.path.join(os.path.dirname(os.path.abspath(socket_path)), "server.log")


def _open_private(path: str, flags: int) -> int:
    """Open (creating 0600) without following a symbolic link at ``path``."""
    try:
        return os.open(path, flags | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if os.path.islink(path):
            raise BackgroundServerError(
                f"{path} is a symbolic link: refusing to follow it"
            ) from None
        raise BackgroundServerError(f"cannot open {path}: {error.strerror}") from None


def write_pid_file(socket_path: str) -> None:
    """``pid start-time`` next to the socket, so that ``stop`` can find -- and verify --
    the server."""
    import psutil

    me = psutil.Process()
    fd = _open_private(pid_file(socket_path), os.O_WRONLY | os.O_TRUNC)
    with os.fdopen(fd, "w") as f:
        f.write(f"{me.pid} {me.create_time()!r}\n")


def check_socket_path(path: str) -> None:
    """A path a Unix socket can have, or BackgroundServerError saying why not."""
    if len(os.fsencode(os.path.abspath(path))) > MAX_SOCKET_PATH:
        raise BackgroundServerError(
            f"the socket path is too long for a Unix socket "
            f"({len(os.fsencode(path))} bytes; at most {MAX_SOCKET_PATH}): {path}"
        )


def socket_path(explicit: str | None) -> tuple[str, bool]:
    """The socket to talk to, and whether the user's background server may be started there.

    ``explicit`` (``--socket``) is taken as it is: a server must listen there.  Else
    ``$TERMINAL_REGISTRY_SOCKET``, else the default socket -- where a client starts the
    user's own background server (:func:`start_background_server`) if none listens.
    """
    if explicit:
        check_socket_path(explicit)
        return explicit, False
    path = os.environ.get(SOCKET_VARIABLE) or default_socket_path()
    check_socket_path(path)
    return path, True


def resolve_socket(explicit: str | None, *, start: bool) -> tuple[str, bool]:
    """:func:`socket_path`, and whether a background server was just started for it
    (when ``start`` is set and none listened: a connect probe says)."""
    path, may_start = socket_path(explicit)
    if start and may_start:
        from .listen import socket_accepts  # imports socket, which the CLI does without

        if not socket_accepts(path):
            return path, start_background_server(path)
    return path, False


def start_background_server(path: str) -> bool:
    """Start ``terminal-registry serve --socket PATH`` in its own session; wait until ready.

    Returns False when another client started one first: callers that found nothing
    listening at the same moment (an agent's parallel tool calls) take turns on a
    lock beside the socket, and those after the first find its server listening.
    """
    import fcntl

    from .listen import check_socket_directory, socket_accepts

    try:
        check_socket_directory(os.path.dirname(os.path.abspath(path)))
    except PermissionError as error:
        raise BackgroundServerError(str(error)) from None
    lock = _open_private(os.path.abspath(path) + ".lock", os.O_RDWR)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held until ours is ready, or theirs is seen
        if socket_accepts(path):
            return False
        _start_and_wait(path)
        return True
    finally:
        os.close(lock)  # releases the lock


def _start_and_wait(path: str) -> None:
    import subprocess

    log = _open_private(log_path(path), os.O_WRONLY | os.O_APPEND)
    read_end, write_end = os.pipe()
    try:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "protocol.cli",
                "serve",
                "--socket",
                os.path.abspath(path),
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
        os.close(log)
    # The server says "ready" once it listens; EOF without it means it failed.
    with os.fdopen(read_end, "rb") as ready:
        if not ready.readline().startswith(b"ready"):
            raise BackgroundServerError(
                f"the background server did not start; see {log_path(path)}"
            )


def stop_server(path: str) -> int:
    """SIGTERM our server of ``path`` (found by its pid file, verified) and wait.

    Returns its pid.  Raises :class:`NoServerError` when none runs, and
    :class:`BackgroundServerError` when the pid file names a process that is not
    our server (it is left alone, and the stale file removed).
    """
    import psutil

    file = pid_file(path)
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd) as f:
            fields = f.read().split()
        pid = int(fields[0])
        started = float(fields[1]) if len(fields) > 1 else None
    except (OSError, ValueError, IndexError):
        raise NoServerError(f"no server running on {path}") from None
    try:
        proc = psutil.Process(pid)
        ours = _is_our_server(proc, path, started)
    except psutil.Error:
        ours = None
    if ours is None:
        _remove_stale(file)
        raise NoServerError(f"no server running on {path}")
    if not ours:
        _remove_stale(file)
        raise BackgroundServerError(
            f"{file} names process {pid}, which is not a terminal-registry server "
            "for this socket: not signalling it"
        )
    import signal

    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except psutil.TimeoutExpired:
        proc.kill()
    return pid


def _is_our_server(proc: psutil.Process, path: str, started: float | None) -> bool:
    if hasattr(os, "getuid") and proc.uids().real != os.getuid():
        return False
    if started is not None and abs(proc.create_time() - started) > 0.01:
        return False  # the pid was reused by the kernel
    argv = proc.cmdline()
    if "serve" not in argv or "--socket" not in argv:
        return False
    # A start time was recorded: it already told this process from any other.
    return started is not None or os.path.abspath(path) in argv


def _remove_stale(file: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(file)
