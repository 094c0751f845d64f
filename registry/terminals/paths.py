"""Where a terminal stands: a directory checked and compared the way the registry
keys terminals -- on this machine (:func:`existing_directory`,
:func:`normalise_path`) and on a remote target (:func:`remote_path_key`).
"""

from __future__ import annotations

import os
import posixpath

from ..errors import InvalidCwdError

__all__ = ["existing_directory", "normalise_path", "remote_path_key"]


def existing_directory(cwd: str) -> str:
    """``cwd`` made absolute, or :class:`InvalidCwdError` saying what is wrong with it."""
    path = os.path.abspath(os.path.expanduser(cwd))
    if not os.path.isdir(path):
        reason = "does not exist" if not os.path.exists(path) else "is not a directory"
        raise InvalidCwdError(cwd, reason)
    return path


def normalise_path(path: str) -> str:
    """A key under which equal directories of this machine compare equal.

    Absolute, ``..`` and trailing slashes resolved, symlinks followed; case folded
    only where the file system ignores case (Windows).
    """
    return os.path.normcase(os.path.realpath(os.path.abspath(os.path.expanduser(path))))


def remote_path_key(cwd: str, home: str | None) -> str:
    """A target's path as the registry compares it: ``~`` and relative paths against
    the target's ``home``, ``..`` and repeated slashes resolved.  Symlinks are not
    followed (that would take a round trip): paths compare as the shell reports
    them (``$PWD``)."""
    if home:
        if cwd == "~":
            cwd = home
        elif cwd.startswith("~/"):
            cwd = posixpath.join(home, cwd[2:])
        elif not cwd.startswith(("/", "~")):
            cwd = posixpath.join(home, cwd)
    return posixpath.normpath(cwd) if cwd.startswith("/") else cwd
