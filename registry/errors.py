"""Exceptions the engine raises; the protocol layer maps each to its JSON-RPC error."""

from __future__ import annotations


class TerminalRegistryError(Exception):
    """Base of every error the engine reports to its callers."""


class InvalidCwdError(TerminalRegistryError, ValueError):
    """A working directory that does not exist or is not a directory."""

    def __init__(self, cwd: str, reason: str = "is not a directory") -> None:
        super().__init__(f"cwd {cwd!r} {reason}")
        self.cwd = cwd


class SpawnError(TerminalRegistryError):
    """A shell or process could not be started; the message carries the OS error."""


class TerminalClosedError(TerminalRegistryError):
    """The terminal has been closed (or its shell died) and cannot take input."""


class TerminalBusyError(TerminalRegistryError):
    """The terminal is running a command and cannot start another."""


class UnknownTerminalError(TerminalRegistryError, KeyError):
    """No terminal with that id is known."""

    def __init__(self, terminal_id: int) -> None:
        super().__init__(f"unknown terminal {terminal_id}")
        self.terminal_id = terminal_id

    def __str__(self) -> str:
        return str(self.args[0])
