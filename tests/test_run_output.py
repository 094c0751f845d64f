"""What ``terminal/run`` answers a model, from a real server over stdio: output as the
terminal showed it, long lines clamped, what was cut counted and kept in a file, a
timeout said in the text."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from .rpc import StdioServer, serving

OPTIONS = {
    "runOutputCapBytes": 256 * 1024,
    "outputCharacterLimit": 20_000,
    "outputLineCharacterLimit": 1_000,
    "fullOutputCapBytes": 600_000,
    "killGraceMs": 500,
}


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server() -> AsyncIterator[StdioServer]:
    async with serving(OPTIONS) as peer:
        yield peer


async def run(server: StdioServer, cwd: Path, command: str, **extra: object) -> dict[str, object]:
    params = {"command": command, "cwd": str(cwd), "taskId": cwd.name, **extra}
    return dict(await server.call("terminal/run", params))


async def test_erase_in_line_comes_out_as_the_terminal_shows_it(
    server: StdioServer, tmp_path: Path
) -> None:
    result = await run(server, tmp_path, r"printf '3/3 working\r\033[Kdone\n'")
    assert result["output"] == "done\n"


async def test_a_progress_display_redrawn_with_cursor_up(
    server: StdioServer, tmp_path: Path
) -> None:
    script = Path(__file__).parent / "fixtures" / "progress" / "docker-pull-like.sh"
    result = await run(server, tmp_path, f"bash {script}")
    assert result["output"] == (
        "a1b2c3: Pull complete\nd4e5f6: Pull complete\n0718ab: Pull complete\n"
        "Digest: sha256:0123abcd\nStatus: Downloaded newer image\n"
    )


async def test_the_omitted_count_grows_with_the_output(server: StdioServer, tmp_path: Path) -> None:
    """Above the raw cap (256 KiB here, 8 MiB by default) the count was a constant."""
    counts = []
    for size in (600_000, 1_200_000):
        # Lines of 99 characters and CR LF: 101 characters each.
        result = await run(
            server, tmp_path, f"yes 0123456789 | tr -d '\\n' | head -c {size} | fold -w 99"
        )
        assert result["truncated"] is True
        text = str(result["output"])
        omitted = int(text.split("[...")[1].split(" characters omitted")[0])
        shown = len(text) - len(f"\n[...{omitted} characters omitted...]\n")
        line_ends = (size - 1) // 99
        assert omitted == size + 2 * line_ends - shown
        counts.append(omitted)
    assert counts[1] - counts[0] > 600_000


async def test_a_cut_output_is_kept_whole_in_a_file(server: StdioServer, tmp_path: Path) -> None:
    result = await run(
        server, tmp_path, "python3 -c \"print('start'); print('a' * 100000); print('the end')\""
    )
    text = str(result["output"])
    assert text.startswith("start\n" + "a" * 500 + " [...99000 characters omitted...] ")
    assert text.endswith("a" * 500 + "\nthe end\n")
    assert result["truncated"] is True
    path = str(result["fullOutputPath"])
    assert Path(path).read_text() == "start\n" + "a" * 100_000 + "\nthe end\n"
    assert os.stat(path).st_mode & 0o777 == 0o600
    # Not cut: no file.
    small = await run(server, tmp_path, "echo small")
    assert "fullOutputPath" not in small
    assert small["truncated"] is False


async def test_full_output_files_are_bounded_and_go_with_the_terminal(
    server: StdioServer, tmp_path: Path
) -> None:
    command = "python3 -c \"print('b' * 250000)\""
    paths = [str((await run(server, tmp_path, command))["fullOutputPath"]) for _ in range(3)]
    # 3 x 250 KB against a 600 KB bound: the oldest went.
    assert [os.path.exists(p) for p in paths] == [False, True, True]
    terminal = (await run(server, tmp_path, "true"))["terminalId"]
    await server.call("terminal/close", {"terminalId": terminal})
    assert not any(os.path.exists(p) for p in paths)


async def test_a_timeout_is_said_in_the_text(server: StdioServer, tmp_path: Path) -> None:
    result = await run(server, tmp_path, "echo started; sleep 30", timeoutMs=500)
    assert result["state"] == "timedOut"
    text = str(result["output"])
    assert text.startswith("started\n")
    assert "[timed out after " in text
    assert text.endswith("s: the command was interrupted]")


async def test_output_that_looks_like_a_marker_is_not_truncated(
    server: StdioServer, tmp_path: Path
) -> None:
    result = await run(server, tmp_path, "echo '[...5 characters omitted...]'")
    assert result["truncated"] is False
