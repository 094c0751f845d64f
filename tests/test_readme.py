"""README.md's examples run as written, from the repository root."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCKS = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_python_examples_run_from_the_repository_root(code: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TERMINAL_REGISTRY_SOCKET"}
    env.update({"HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(tmp_path)})
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert "No such file or directory" not in result.stdout + result.stderr
    # Each example prints the exit code, the live cwd and the output of `cd docs && ls`.
    assert f"0 {ROOT}/docs" in result.stdout
    assert "architecture.md" in result.stdout
