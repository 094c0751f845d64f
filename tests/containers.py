"""A running podman container for the container provider's tests: the host's root
file system as the container's (an overlay, ``--rootfs /:O``, so no image is pulled).
The fixture skips, saying why, only where no engine can run a container.

On these machines podman needs runc and cgroupfs (crun fails: "cgroups in hybrid
mode") and ulimits it may set (``--ulimit``); ``.ci/run`` installs podman and runc.
Setting the container up takes about 0.4 s.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator

import pytest

__all__ = ["PODMAN", "container"]

PODMAN = shutil.which("podman")
#: Global options podman needs here to create a container (not to exec into one).
CREATE_OPTIONS = ["--runtime", "runc", "--cgroup-manager", "cgroupfs"]


@pytest.fixture(scope="session")
def container() -> Iterator[str]:
    """A running container (its name) whose processes run ``sleep infinity``."""
    if PODMAN is None:
        pytest.skip("no container engine: podman is not installed (.ci/run installs it)")
    if os.geteuid() != 0:
        pytest.skip("podman runs containers of the host's root file system as root only")
    name = "trtest-" + secrets.token_hex(4)
    created = subprocess.run(
        [
            PODMAN,
            *CREATE_OPTIONS,
            "run",
            "--detach",
            "--name",
            name,
            # Limits it may set (its defaults are above this machine's hard limits).
            "--ulimit",
            "nofile=1024:1024",
            "--ulimit",
            "nproc=4096:4096",
            # Not root's rc (the host's, in the overlay): a plain home of its own.
            "--env",
            "HOME=/tmp",
            "--stop-signal",
            "KILL",
            # The image is a root file system: the host's, as an overlay. Last of the
            # options: what follows it is the container's command.
            "--rootfs",
            "/:O",
            "sleep",
            "infinity",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if created.returncode != 0:
        subprocess.run([PODMAN, "rm", "--force", name], capture_output=True, check=False)
        pytest.skip(f"podman cannot run a container here: {created.stderr.strip()[-300:]}")
    yield name
    subprocess.run([PODMAN, "rm", "--force", "--time", "0", name], capture_output=True, check=False)
