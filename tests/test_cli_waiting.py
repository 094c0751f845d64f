"""The CLI meets a command that waits: a person at a terminal answers it, a script
gets exit status 75 and the terminal's id, and ``attach`` takes over a terminal.

The CLI runs as a user runs it: a real process, on a real PTY where a person's
terminal is meant (ptyprocess), against the real background server.
"""

from __future__ import annotations

import json
import os
import select
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ptyprocess import PtyProcess

from protocol.cli_run import EXIT_WAITING

from .test_cli import CLI, cli, runtime_dir

__all__ = ["runtime_dir"]  # the fixture, used by name

TIMEOUT = 30.0


class Person:
    """The CLI on a PTY of its own: what a person at a terminal sees and types."""

    def __init__(self, args: list[str], env: dict[str, str], cwd: str, size: tuple[int, int]):
        rows, cols = size
        self.process = PtyProcess.spawn([*CLI, *args], env=env, cwd=cwd, dimensions=(rows, cols))
        self.seen = b""

    def sees(self, text: str) -> str:
        """Read until ``text`` has appeared (bounded); everything seen so far."""
        deadline = time.monotonic() + TIMEOUT
        while text.encode() not in self.seen:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.process.fd], [], [], max(left, 0))
            if not ready:
                raise AssertionError(f"never saw {text!r}; saw {self.seen!r}")
            try:
                self.seen += os.read(self.process.fd, 65536)
            except OSError:  # EIO: the CLI has exited
                raise AssertionError(f"never saw {text!r}; saw {self.seen!r}") from None
        return self.seen.decode("utf-8", "replace")

    def types(self, data: str) -> None:
        self.process.write(data.encode())

    def exit_status(self) -> int | None:
        deadline = time.monotonic() + TIMEOUT
        while self.process.isalive() and time.monotonic() < deadline:
            ready, _, _ = select.select([self.process.fd], [], [], 0.5)
            if ready:
                try:
                    self.seen += os.read(self.process.fd, 65536)
                except OSError:
                    break
        self.process.wait()
        return self.process.exitstatus

    def close(self) -> None:
        if self.process.isalive():
            self.process.terminate(force=True)


@pytest.fixture
def person(runtime_dir: dict[str, str], tmp_path: Path) -> Iterator[list[Person]]:
    people: list[Person] = []
    yield people
    for one in people:
        one.close()


def at_terminal(
    people: list[Person],
    env: dict[str, str],
    cwd: Path,
    *args: str,
    size: tuple[int, int] = (24, 80),
) -> Person:
    one = Person(list(args), env, str(cwd), size)
    people.append(one)
    return one


def test_a_person_at_a_terminal_answers_the_question(
    person: list[Person], runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    me = at_terminal(
        person, runtime_dir, tmp_path, "run", "--", "read -p 'continue? ' x; echo \"got $x\""
    )
    me.sees("[terminal-registry] waiting for input: 'continue? '")
    me.types("yes\r")
    screen = me.sees("exit code: 0")
    assert "got yes" in screen
    assert me.exit_status() == 0
    # Said once, not again while the answer was typed.
    assert screen.count("waiting for input") == 1


def test_a_script_gets_status_75_and_a_person_takes_over_with_attach(
    person: list[Person], runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    script = cli(
        "run",
        "--json",
        "--cwd",
        str(tmp_path),
        "--",
        "read -p 'name? ' n; echo \"hello $n\"",
        env=runtime_dir,
    )
    assert script.returncode == EXIT_WAITING
    left = json.loads(script.stdout)
    assert left["state"] == "running"
    assert left["waitingFor"]["prompt"] == "name? "
    terminal_id = left["terminalId"]
    assert "[terminal-registry] waiting for input: 'name? '" in script.stderr
    plain = cli("list", env=runtime_dir)
    assert "waitingForInput" in plain.stdout  # the command went on waiting
    me = at_terminal(person, runtime_dir, tmp_path, "attach", str(terminal_id), size=(33, 101))
    me.sees("name? ")  # the replay: what the screen showed before we came
    me.types("ada\r")
    me.sees("hello ada")
    # The terminal took the person's size, and follows it.
    me.types("stty size\r")
    me.sees("33 101")
    me.process.setwinsize(20, 70)
    me.types("stty size\r")
    me.sees("20 70")
    me.types("\x1d")  # Ctrl-]
    me.sees("detached from terminal")
    assert me.exit_status() == 0
    (terminal,) = [t for t in json.loads(cli("list", "--json", env=runtime_dir).stdout)]
    assert terminal["id"] == terminal_id  # still there
    assert terminal["state"] == "idle"


def test_full_screen_without_a_person_and_attach_to_what_cannot_be(
    runtime_dir: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "long.txt").write_text("\n".join(f"line {n}" for n in range(300)))
    script = cli("run", "--cwd", str(tmp_path), "--", "less long.txt", env=runtime_dir)
    assert script.returncode == EXIT_WAITING
    assert "[terminal-registry] less is open full screen: press q" in script.stderr
    listed = json.loads(cli("list", "--json", env=runtime_dir).stdout)
    assert listed[0]["waitingFor"]["keys"] == ["q"]
    assert cli("kill", str(listed[0]["id"]), env=runtime_dir).returncode == 0
    sub = cli(
        "run",
        "--provider",
        "subprocess",
        "--json",
        "--cwd",
        str(tmp_path),
        "--",
        "true",
        env=runtime_dir,
    )
    sub_id = json.loads(sub.stdout)["terminalId"]
    refused = cli("attach", str(sub_id), env=runtime_dir)
    assert refused.returncode == 2
    assert "no screen to attach to" in refused.stderr
    missing = cli("attach", "999", env=runtime_dir)
    assert (missing.returncode, "unknown terminal 999" in missing.stderr) == (2, True)
    bad_key = cli("attach", "--detach-key", "q", str(listed[0]["id"]), env=runtime_dir)
    assert bad_key.returncode == 2
    assert "--detach-key must be C-<letter>" in bad_key.stderr
