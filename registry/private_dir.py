"""Directories only this user may enter: where sockets, records and control sockets live.

``os.makedirs(path, mode=0o700)`` applies the mode to the last component only; the
parents it creates get the default (0755 under the usual umask).  Our directories
nest (``terminal-registry-<uid>/servers``, ``…/ssh``, the socket's directory is
their parent), so whichever was made first used to leave the shared parent 0755,
and the CLI then refused it ("open to other users") for good.  Every level created
here is 0700.
"""

from __future__ import annotations

import os
import stat

__all__ = ["is_private", "make_private_directory", "tighten_if_ours"]


def make_private_directory(path: str) -> None:
    """Create ``path`` and each missing parent, every one 0700 (existing ones untouched)."""
    missing: list[str] = []
    current = os.path.abspath(path)
    while not os.path.lexists(current):
        missing.append(current)
        parent = os.path.dirname(current)
        if parent == current:
            break
        current = parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, 0o700)
        except FileExistsError:
            continue  # made by another process between our look and now: checked by the caller
        os.chmod(directory, 0o700)  # the umask may have taken bits away, never added: exact


def is_private(path: str) -> bool:
    """Whether ``path`` itself (not what a symbolic link there names) is a directory
    of ours that nobody else may enter."""
    info = os.lstat(path)
    return (
        stat.S_ISDIR(info.st_mode)
        and info.st_uid == os.getuid()
        and not stat.S_IMODE(info.st_mode) & 0o077
    )


def tighten_if_ours(path: str, info: os.stat_result) -> bool:
    """Make a directory of ours that others may read but not write 0700; whether it is now.

    Nobody else could have put anything in it (no write bit for them), so closing it
    loses nothing; a directory others may write to could hold what they planted and
    is left for the caller to refuse.
    """
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        return False
    if stat.S_IMODE(info.st_mode) & 0o022:
        return False
    os.chmod(path, 0o700)
    return True
