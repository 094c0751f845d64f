"""Settings and their defaults.

Names are snake_case here; the protocol layer maps the camelCase names clients send
(``shellIntegrationTimeoutMs`` ...) onto these fields.  Durations are in seconds.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field

from .limits import DEFAULT_LIMITS, Limits


def default_shell() -> str:
    """The user's shell: ``$SHELL`` when it exists, else bash, else ``/bin/sh``."""
    candidates = [os.environ.get("SHELL", ""), "bash", "zsh", "sh"]
    for candidate in candidates:
        if candidate:
            found = shutil.which(candidate)
            if found:
                return found
    return "/bin/sh"


@dataclass
class Settings:
    default_shell: str = field(default_factory=default_shell)
    #: Shell integration: idle window (no output at all) before giving up on it.
    integration_idle_timeout: float = 3.0
    #: Shell integration: absolute window from spawn before giving up on it.
    integration_absolute_timeout: float = 10.0
    #: After submitting a command, how long to wait for its C marker (or the prompt)
    #: before building the run from what the screen showed.
    command_start_timeout: float = 3.0
    #: Strategy "none": a command is over after this much quiet and a prompt-like line.
    none_quiet_timeout: float = 0.5
    #: Interrupting a command: the grace period between SIGINT, SIGTERM and SIGKILL.
    kill_grace: float = 1.0
    #: Raw output kept per run (head and tail beyond this; the rest is counted).
    run_output_cap: int = 8 * 1024 * 1024
    #: Raw output kept per terminal for mirrors to repaint from.
    replay_cap: int = 256 * 1024
    cols: int = 120
    rows: int = 40
    #: Start shells as login shells (profile files instead of rc files).
    login_shell: bool = False
    #: Default timeout for a command, None for none.
    command_timeout: float | None = None
    #: Fall back to the subprocess provider when integration is not up by then.
    shell_integration_timeout: float = 5.0
    #: Whether the registry falls back to the subprocess provider at all.
    fallback_to_subprocess: bool = True
    #: Which terminals of other tasks a task may be handed (tier 2): "idle" ones
    #: (any idle terminal in that cwd), only "released" ones, or "never".
    reuse_across_tasks: str = "idle"
    #: Subprocess provider: after the command exits, how long to read its pipes to
    #: end-of-file (a background child may hold them open for ever).
    output_drain_timeout: float = 0.25
    #: Text for models: at most this many lines and characters (head and tail kept).
    output_line_limit: int = 500
    output_character_limit: int = 50_000
    #: A longer line keeps its head and tail (half each) with the count between.
    output_line_character_limit: int = 5_000
    #: Full outputs of runs whose text was cut, kept as files per terminal (bytes).
    full_output_cap: int = 64 * 1024 * 1024
    #: Collapse carriage-return and backspace overwrites (progress bars).
    compress_progress_bar: bool = True
    #: Hot processes: output within this long keeps a terminal hot ...
    hot_timeout: float = 2.0
    #: ... or this long while its output looks like a build in progress.
    hot_compiling_timeout: float = 15.0
    #: Environment details wait at most this long for hot terminals to cool down.
    cooldown_timeout: float = 5.0
    #: Every command's limits unless its terminal or run sets its own: only output
    #: is limited by default (a runaway ``yes`` ends after 1 GiB).
    limits: Limits = DEFAULT_LIMITS
