"""How each shell is started so that it loads our integration.

Nothing of the user's is touched: bash gets ``--init-file`` pointing at our script,
which sources what an interactive bash would have sourced; zsh gets a private,
temporary ``ZDOTDIR`` whose stubs chain to the user's own startup files; fish gets
``--init-command``.  Each terminal has its own temporary directory (mode 0700),
removed by :meth:`ShellLaunch.cleanup` when the terminal closes.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

__all__ = ["SHELL_KINDS", "ShellLaunch", "prepare_launch", "shell_kind", "write_private"]

#: Shells we have integration scripts for.
SHELL_KINDS = ("bash", "zsh", "fish")

_ZSH_STUBS = (".zshenv", ".zprofile", ".zshrc", ".zlogin")


def _script(name: str) -> Path:
    return Path(str(resources.files("registry.shell") / "scripts" / name))


def _scratch_root() -> str | None:
    """A memory-backed directory for the per-terminal files when there is one.

    bash touches a file there on every command (the command line for ``E``); on a
    tmpfs that costs a fraction of what it does on a disk.
    """
    for candidate in (os.environ.get("XDG_RUNTIME_DIR"), "/dev/shm"):
        if candidate and os.path.isdir(candidate) and os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    return None  # the system's temp dir


def write_private(path: str, text: str) -> None:
    """A new file only we can read (never through a symlink, never an existing one)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.write(text + "\n")


def shell_kind(shell: str) -> str | None:
    """``bash``, ``zsh`` or ``fish`` from a shell path; None for any other shell."""
    name = os.path.basename(shell)
    for kind in SHELL_KINDS:
        if name == kind or name.startswith(kind + "-") or name.startswith(kind + "5"):
            return kind
    return None


@dataclass
class ShellLaunch:
    """Everything needed to spawn one shell with (or without) our integration."""

    shell: str
    argv: list[str]
    env: dict[str, str]
    kind: str | None
    integrated: bool
    temp_dir: str | None = None
    _cleaned: bool = field(default=False, repr=False)
    _ours_fd: int | None = field(default=None, repr=False)

    def next_line_is_ours(self) -> None:
        """Tell bash's integration that the next command line comes from the server.

        It then sends no E for it (the server knows what it typed): looking the line
        up in history is half of what our hooks cost per command.  One ``pwrite`` on
        a file kept open; the shell empties it when it has seen it.
        """
        if self.kind != "bash" or not self.temp_dir or self._cleaned:
            return
        with contextlib.suppress(OSError):
            if self._ours_fd is None:
                path = os.path.join(self.temp_dir, "ours")
                flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
                self._ours_fd = os.open(path, flags, 0o600)
            os.pwrite(self._ours_fd, b"1", 0)

    def cleanup(self) -> None:
        """Remove the terminal's temporary files. Safe to call more than once."""
        if self._cleaned:
            return
        self._cleaned = True
        if self._ours_fd is not None:
            os.close(self._ours_fd)
            self._ours_fd = None
        if self.temp_dir:
            shutil.rmtree(self.temp_dir, ignore_errors=True)


def prepare_launch(
    shell: str,
    env: dict[str, str],
    nonce: str,
    *,
    integration: bool = True,
    login: bool = False,
) -> ShellLaunch:
    """Arguments and environment to start ``shell`` interactively.

    ``env`` is the environment the shell should see; the integration's own variables
    are added to a copy.  With ``integration=False`` (or a shell we have no script
    for) the shell starts plain, and the terminal falls back to prompt heuristics.
    """
    kind = shell_kind(shell)
    env = dict(env)
    if not integration or kind is None:
        argv = [shell, "-i"] if kind in ("bash", "zsh", None) else [shell]
        if kind == "bash":
            argv = [shell, "--noprofile", "--norc", "-i"]
        elif kind == "zsh":
            argv = [shell, "-f", "-i"]
        elif kind == "fish":
            argv = [shell, "--no-config", "-i"]
        return ShellLaunch(shell, argv, env, kind, integrated=False)

    temp_dir = tempfile.mkdtemp(prefix="terminal-registry-", dir=_scratch_root())
    os.chmod(temp_dir, 0o700)
    # The nonce goes through a file the integration reads and deletes, never through
    # the environment or argv: the kernel keeps a process's initial environment
    # readable in /proc/<pid>/environ for its whole life, `unset` or not.
    write_private(os.path.join(temp_dir, "nonce"), nonce)
    env["TERMINAL_REGISTRY_DIR"] = temp_dir
    if kind == "bash":
        if login:
            env["TERMINAL_REGISTRY_LOGIN"] = "1"
        argv = [shell, "--init-file", str(_script("bash-integration.bash")), "-i"]
    elif kind == "zsh":
        stub = _script("zsh-stub.zsh").read_bytes()
        for name in _ZSH_STUBS:
            Path(temp_dir, name).write_bytes(stub)
        shutil.copyfile(_script("zsh-integration.zsh"), Path(temp_dir, "integration.zsh"))
        if "ZDOTDIR" in env:
            env["TERMINAL_REGISTRY_USER_ZDOTDIR"] = env["ZDOTDIR"]
        env["ZDOTDIR"] = temp_dir
        argv = [shell, "-i"] + (["-l"] if login else [])
    else:  # fish
        script = str(_script("fish-integration.fish")).replace("'", "\\'")
        argv = [shell, "--init-command", f"source '{script}'", "-i"]
        if login:
            argv.append("-l")
    return ShellLaunch(shell, argv, env, kind, integrated=True, temp_dir=temp_dir)
