"""Our own shell integration: the scripts in ``scripts/`` and how shells load them.

See :mod:`registry.shell.launch` for the launcher and ``docs/shell-integration.md``
for what the scripts emit and how to add a shell.
"""

from .launch import SHELL_KINDS, ShellLaunch, prepare_launch, shell_kind, write_private

__all__ = ["SHELL_KINDS", "ShellLaunch", "prepare_launch", "shell_kind", "write_private"]
