"""A client started inside one of our terminals acts for that terminal's task only.

A real server on its socket; the probe (tests/fixtures/socket_probe.py) runs in a
task's real terminal and tries to reach another task's terminal through the socket.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from protocol import methods
from protocol.scope import Scope
from registry.cgroups import detect
from registry.errors import UnknownTerminalError

from .rpc import RawPeer, connect_socket

ROOT = Path(__file__).resolve().parent.parent
PROBE = Path(__file__).parent / "fixtures" / "socket_probe.py"


async def _two_tasks(socket_path: Path, tmp_path: Path) -> tuple[RawPeer, int, int]:
    outside = await connect_socket(str(socket_path))
    await outside.initialize()
    alpha = await outside.call(methods.ACQUIRE, {"cwd": str(tmp_path), "taskId": "alpha"})
    beta = await outside.call(methods.ACQUIRE, {"cwd": str(tmp_path), "taskId": "beta"})
    return outside, alpha["id"], beta["id"]


def _probe_result(output: str) -> dict[str, Any]:
    line = next(line for line in output.splitlines() if line.startswith("PROBE"))
    result: dict[str, Any] = json.loads(line[len("PROBE") :])
    return result


async def test_a_client_inside_a_terminal_acts_for_its_task_only(
    socket_path: Path, tmp_path: Path
) -> None:
    outside, alpha, beta = await _two_tasks(socket_path, tmp_path)
    secret = await outside.call(methods.RUN, {"command": "echo secret-alpha", "terminalId": alpha})
    assert secret["exitCode"] == 0
    # Alpha prints all the while the probe runs: none of it may reach the probe.
    ticker = await connect_socket(str(socket_path))
    await ticker.initialize()
    ticking = ticker.request(
        methods.RUN,
        {"command": "for i in $(seq 30); do echo tick; sleep 0.1; done", "terminalId": alpha},
    )
    probe = f"{sys.executable} {PROBE} {socket_path} {alpha} alpha {ROOT} {secret['runId']}"
    result = await outside.call(methods.RUN, {"command": probe, "terminalId": beta})
    assert result["exitCode"] == 0, result["output"]
    got = _probe_result(result["output"])
    assert f"run {secret['runId']} is not this connection's" in got["wait_other_run"]["error"]
    assert "secret-alpha" not in json.dumps(got["wait_other_run"])
    for attempt in ("replay", "write", "run_other_terminal", "keys_other"):
        assert "error" in got[attempt], (attempt, got[attempt])
        assert f"terminal {alpha} is not this connection's" in got[attempt]["error"]
        assert f"inside terminal {beta}" in got[attempt]["error"]
    for attempt in ("run_other_task", "details"):
        assert "taskId 'alpha' is not this connection's" in got[attempt]["error"]
    assert got["scope"] == {"taskId": "beta", "terminalId": beta}  # said in initialize
    listed = got["list"]["result"]
    assert alpha not in [t["id"] for t in listed]
    assert {t["taskId"] for t in listed} == {"beta"}
    assert "secret-alpha" not in json.dumps(got["details_mine"])
    assert (await ticker.response(ticking))["result"]["exitCode"] == 0
    nested = got["run_mine"]["result"]
    assert nested["output"].strip() == "nested-ok"
    assert nested["terminalId"] not in (alpha, beta)  # beta is busy running the probe
    assert nested["terminalId"] in got["heard"]
    assert alpha not in got["heard"]
    owner = await outside.call(methods.GET, {"terminalId": nested["terminalId"]})
    assert owner["taskId"] == "beta"
    # Nothing reached alpha's shell.
    replay = await outside.call(methods.REPLAY, {"terminalId": alpha})
    assert "typed-in" not in replay["data"]


async def test_a_client_outside_every_terminal_is_not_scoped(
    socket_path: Path, tmp_path: Path
) -> None:
    _outside, alpha, _beta = await _two_tasks(socket_path, tmp_path)
    other = await connect_socket(str(socket_path))
    initialized = await other.initialize()
    assert "scope" not in initialized["capabilities"]["experimental"]["terminalRegistry"]
    replay = await other.call(methods.REPLAY, {"terminalId": alpha})
    assert "data" in replay


@pytest.mark.skipif(detect() is None, reason="no cgroup we may use on this machine")
async def test_a_process_that_shed_its_tags_and_parents_is_still_scoped(
    socket_path: Path, tmp_path: Path
) -> None:
    """``setsid -f env -u ...``: no tag, no parent chain; the terminal's cgroup says."""
    outside, alpha, beta = await _two_tasks(socket_path, tmp_path)
    out = tmp_path / "escaped.out"
    fifo = tmp_path / "escaped.done"
    command = (
        f"mkfifo {fifo}; setsid -f env -u TERMINAL_REGISTRY_TERMINAL "
        f"-u TERMINAL_REGISTRY_SERVER sh -c "
        f"'{sys.executable} {PROBE} {socket_path} {alpha} alpha {ROOT} > {out} 2>&1; "
        f"echo done > {fifo}'; cat {fifo}"
    )
    result = await outside.call(methods.RUN, {"command": command, "terminalId": beta})
    assert result["exitCode"] == 0, result["output"]
    got = _probe_result(out.read_text())
    assert f"terminal {alpha} is not this connection's" in got["replay"]["error"]


def test_scope_rules() -> None:
    """The pure rules: task filled in, other tasks refused, notifications filtered."""
    tasks = {1: "beta", 2: "alpha"}

    def task_of(terminal_id: int) -> str | None:
        if terminal_id not in tasks:
            raise UnknownTerminalError(f"no terminal {terminal_id}")
        return tasks[terminal_id]

    scope = Scope(1, "beta")
    filled = scope.admit({"id": 1, "method": methods.LIST, "params": {}}, task_of)
    assert isinstance(filled, dict)
    assert filled["params"]["taskId"] == "beta"
    unknown = scope.admit({"id": 2, "method": methods.GET, "params": {"terminalId": 9}}, task_of)
    assert isinstance(unknown, dict)  # the handler says it does not exist
    assert scope.hears(methods.DID_WRITE, {"terminalId": 1, "data": "x"}, task_of)
    assert not scope.hears(methods.DID_WRITE, {"terminalId": 2, "data": "x"}, task_of)
    assert not scope.hears(methods.DID_CHANGE, {"id": 2, "taskId": "alpha"}, task_of)
    del tasks[1]  # closed: the registry no longer knows it, its didClose is still ours
    assert scope.hears(methods.DID_CLOSE, {"terminalId": 1}, task_of)
    assert not scope.hears(methods.DID_CLOSE, {"terminalId": 2}, task_of)
    assert scope.hears(methods.LOG_MESSAGE, {"type": 3, "message": "hi"}, task_of)
