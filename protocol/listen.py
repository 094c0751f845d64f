"""Where clients come from: claiming stdio, the socket's directory, and who connects.

Each function guards one way the transport could be turned against the user:

* :func:`claim_stdio`: the protocol reads and writes private copies of fds 0 and 1;
  the real fd 0 becomes /dev/null and fd 1 points at stderr, so a stray ``print`` or
  a child that inherits them cannot corrupt the stream
  (docs/protocol.md, implementation notes);
* :func:`check_socket_directory`: the socket lives in a directory that is ours, not
  a symbolic link, and closed to everyone else (0700);
* :func:`peer_credentials`: the connecting process's pid and uid, from the kernel
  (``SO_PEERCRED``), so another user is refused;
* :func:`socket_accepts`: whether a server already listens on a path.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import sys
from typing import NamedTuple

from registry.private_dir import make_private_directory, tighten_if_ours

__all__ = [
    "PeerCredentials",
    "check_socket_directory",
    "claim_stdio",
    "peer_credentials",
    "socket_accepts",
]


def claim_stdio() -> tuple[int, int]:
    """Private copies of fds 0 and 1 for the protocol; the real ones made harmless."""
    # Python leaves sys.stdin/stdout None when it started with fd 0/1 closed (``<&-``);
    # the numbers may since name something else the process opened.
    for stream, name in ((sys.stdin, "stdin"), (sys.stdout, "stdout")):
        if stream is None:
            raise OSError(f"--stdio: {name} is not open (started with it closed)")
    sys.stdout.flush()
    in_fd = os.dup(0)
    out_fd = os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    for fd in (in_fd, out_fd):
        os.set_inheritable(fd, False)
    return in_fd, out_fd


def check_socket_directory(directory: str) -> None:
    """The socket's directory must be ours, a real directory, and closed to others (0700).

    Created (0700, and any missing parent too) when missing.  Checked without
    following a symbolic link: another user who planted one (or a directory of their
    own) where ours would be -- the temp dir is shared -- must not get our socket, log
    or pid file.  One of ours that others may read but not write (as a server that
    made its state directory first used to leave it) is closed to 0700, not refused.
    Raises PermissionError naming the directory and what is wrong with it.
    """
    make_private_directory(directory)
    info = os.lstat(directory)
    if tighten_if_ours(directory, info):  # (a symbolic link is not: it is refused below)
        info = os.lstat(directory)
    if stat.S_ISLNK(info.st_mode):
        raise PermissionError(f"socket directory {directory} is a symbolic link: refusing it")
    if not stat.S_ISDIR(info.st_mode):
        raise PermissionError(f"socket directory {directory} is not a directory")
    if hasattr(os, "getuid") and info.st_uid != os.getuid():
        raise PermissionError(
            f"socket directory {directory} belongs to another user (uid {info.st_uid})"
        )
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise PermissionError(
            f"socket directory {directory} is open to other users "
            f"(mode {stat.S_IMODE(info.st_mode):o}); it must be 0700"
        )


class PeerCredentials(NamedTuple):
    pid: int
    uid: int


def peer_credentials(sock: socket.socket | None) -> PeerCredentials | None:
    """The connecting process's pid and uid (Linux ``SO_PEERCRED``); None where unknown."""
    if sock is None or not hasattr(socket, "SO_PEERCRED"):
        return None
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    return PeerCredentials(int(pid), int(uid))


def socket_accepts(path: str) -> bool:
    """Whether a server listens on the Unix socket at ``path`` (a connect probe)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(path)
    except OSError:
        return False
    finally:
        probe.close()
    return True
