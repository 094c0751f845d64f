"""The PTY: a failure between fork and exec never returns into a second copy of us."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: The cwd vanishes between the check and the spawn: the child's chdir fails.
_SCRIPT = """
import os, sys
from registry.terminals.pty import spawn_child
log = sys.argv[1]
try:
    spawn_child(["true"], env=dict(os.environ), cwd=sys.argv[2], rows=40, cols=80,
                preexec_fn=lambda: None)
except Exception:
    pass
with open(log, "a") as f:  # the child's stdout would be the PTY: a file tells
    f.write(f"{os.getpid()}\\n")
"""


def test_a_failure_between_fork_and_exec_never_returns_in_the_child(tmp_path: Path) -> None:
    log = tmp_path / "returned"
    subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(log), str(tmp_path / "gone")],
        cwd=ROOT,
        timeout=30,
        check=False,
    )
    # One process came back, not two: the child _exit()ed instead of running on.
    assert len(log.read_text().splitlines()) == 1, log.read_text()
