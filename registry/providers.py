"""Every provider by name: the terminal class whose ``create`` starts one.

A new provider is a :class:`~registry.terminals.base.Terminal` subclass and one
entry here; the registry looks providers up in this table only.
"""

from __future__ import annotations

from collections.abc import Mapping

from .terminals.base import Terminal
from .terminals.container import ContainerTerminal
from .terminals.shell import ShellTerminal
from .terminals.ssh import SshTerminal
from .terminals.subprocess import SubprocessTerminal

__all__ = ["PROVIDERS"]

PROVIDERS: Mapping[str, type[Terminal]] = {
    ShellTerminal.provider: ShellTerminal,
    SubprocessTerminal.provider: SubprocessTerminal,
    SshTerminal.provider: SshTerminal,
    ContainerTerminal.provider: ContainerTerminal,
}
