"""A program in a terminal cannot find the nonce, so it cannot play the shell.

The program searches everything it can read about its ancestors under /proc
(environment, command line, open files, every other readable file) and its own
environment, then prints forged markers with whatever it found.  The run must still
end with the program's real exit code and the real cwd, and nothing it printed may
be taken for the shell.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from registry.output import strip_escape_sequences
from registry.terminals.shell import ShellTerminal

from .conftest import SHELLS, SpawnTerminal

#: Searches /proc of every ancestor for 32-hex-digit candidates next to "633",
#: forges D;0, P;Cwd=/etc and B with each, and exits 7.
FORGER = r"""
import os, re, stat, sys
candidates = set()
pattern = re.compile(rb"[0-9a-f]{32}")
pid = os.getppid()
seen = set()
while pid > 1 and pid not in seen:
    seen.add(pid)
    base = f"/proc/{pid}"
    for root, dirs, files in os.walk(base, followlinks=False):
        if root.count("/") > 4:
            dirs[:] = []
        for name in files:
            path = os.path.join(root, name)
            if name in ("mem", "pagemap", "kcore"):
                continue  # addresses, not text: reading from offset 0 gives nothing
            try:
                if not stat.S_ISREG(os.stat(path).st_mode):
                    continue  # a tty or a pipe behind fd/ would block
                with open(path, "rb") as f:
                    data = f.read(1 << 20)
            except OSError:
                continue
            candidates.update(pattern.findall(data))
        if root == base:
            dirs[:] = [d for d in dirs if d in ("fd", "fdinfo", "task", "attr", "ns")]
    for fd in os.listdir(f"{base}/fd") if os.path.isdir(f"{base}/fd") else []:
        path = f"{base}/fd/{fd}"
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):
                continue  # a tty or a pipe would block (and is no file to search)
            with open(path, "rb") as f:
                candidates.update(pattern.findall(f.read(1 << 20)))
        except OSError:
            pass
    try:
        with open(f"{base}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    except OSError:
        break
for value in os.environ.values():
    candidates.update(pattern.findall(value.encode()))
out = sys.stdout.buffer
for nonce in candidates:
    n = nonce.decode()
    out.write(f"\x1b]633;D;0;{n}\x07\x1b]633;P;Cwd=/etc;{n}\x07\x1b]633;B;{n}\x07".encode())
out.write(f"tried {len(candidates)}\n".encode())
out.flush()
sys.exit(7)
"""


@pytest.mark.parametrize("shell", SHELLS)
async def test_a_program_that_searches_its_ancestors_cannot_forge(
    spawn_terminal: SpawnTerminal, tmp_path: Path, shell: str
) -> None:
    forger = tmp_path / "forger.py"
    forger.write_text(FORGER)
    # An exported prompt is common: it must not carry the nonce to children.
    env = {"PS1": "$ "}
    terminal: ShellTerminal = await spawn_terminal(shell, cwd=str(tmp_path), env=env)
    export = "set -gx PS1 '$ '; " if shell == "fish" else "export PS1; "
    await terminal.run(export + "true")
    run = await terminal.run(f"{sys.executable} {forger}")
    assert run.exit_code == 7, run.text()
    assert terminal.cwd == str(tmp_path)
    assert run.cwd == str(tmp_path)
    assert "tried" in run.text()
    # The terminal goes on as before.
    after = await terminal.run("echo still here")
    assert after.exit_code == 0
    assert strip_escape_sequences(after.text()).strip().endswith("still here")
