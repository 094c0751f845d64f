"""Our integration scripts against users' own startup files, and strategy detection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from registry.output import strip_escape_sequences
from registry.run import RunState, TerminalRun
from registry.terminals.base import IntegrationState
from registry.terminals.shell import ShellTerminal

from .conftest import SpawnTerminal, fast_settings

FIXTURES = Path(__file__).parent / "fixtures"


def lines(run: TerminalRun) -> list[str]:
    return run.text().replace("\r\n", "\n").splitlines()


def clean_lines(run: TerminalRun) -> list[str]:
    """Lines of text as a model would read them (escape sequences and CRs applied)."""
    text = strip_escape_sequences(run.text()).replace("\r\n", "\n")
    return [line.split("\r")[-1] for line in text.split("\n") if line.split("\r")[-1]]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


# -- bash ---------------------------------------------------------------------------


async def test_bash_user_rc_hooks_survive(spawn_terminal: SpawnTerminal, tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = tmp_path / "hooks.log"
    write(
        home / ".bashrc",
        f"""
echo "hello from the user's rc"
set -u
HISTFILE={tmp_path}/user_history
HISTCONTROL=ignorespace
PROMPT_COMMAND='echo "pc:$?" >> {log}'
trap 'echo "dbg:$BASH_COMMAND" >> {log}' DEBUG
PS1='custom> '
""",
    )
    terminal = await spawn_terminal("bash", home=home)
    assert terminal.integration is IntegrationState.RICH
    run = await terminal.run("false")
    assert run.exit_code == 1
    run = await terminal.run("echo $((1+1)); (exit 7)")
    assert lines(run) == ["2"]
    assert run.exit_code == 7
    run = await terminal.run("mkdir -p $HOME/x && echo $_")
    assert lines(run) == [f"{home}/x"]
    run = await terminal.run(" echo hidden from history")
    assert lines(run) == ["hidden from history"]
    text = log.read_text()
    assert "pc:1" in text  # the user's PROMPT_COMMAND saw the command's $?
    assert "pc:7" in text
    assert "dbg:false" in text  # the user's DEBUG trap still runs
    await terminal.close()
    assert not (tmp_path / "user_history").exists()  # agent commands stay out of it
    assert "custom> " in terminal.replay().decode()


async def test_bash_prompt_command_array(spawn_terminal: SpawnTerminal, tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = tmp_path / "pc.log"
    write(home / ".bashrc", f"PROMPT_COMMAND=('echo \"one:$?\" >> {log}' 'echo two >> {log}')\n")
    terminal = await spawn_terminal("bash", home=home)
    run = await terminal.run("(exit 5)")
    assert run.exit_code == 5
    await terminal.run("true")  # starts only at the next prompt: the hooks have run
    assert "one:5\ntwo\n" in log.read_text()


async def test_bash_preexec_style_framework(spawn_terminal: SpawnTerminal, tmp_path: Path) -> None:
    home = tmp_path / "home"
    log = tmp_path / "bp.log"
    write(
        home / ".bashrc",
        f"""
source {FIXTURES / "mini-preexec.bash"}
user_precmd() {{ echo "precmd:$?" >> {log}; }}
user_preexec() {{ echo "preexec:$1" >> {log}; }}
precmd_functions+=(user_precmd)
preexec_functions+=(user_preexec)
""",
    )
    terminal = await spawn_terminal("bash", home=home)
    assert terminal.integration is IntegrationState.RICH
    run = await terminal.run("echo hi; (exit 9)")
    assert lines(run) == ["hi"]
    assert run.exit_code == 9
    await terminal.run("true")  # starts only at the next prompt: the hooks have run
    text = log.read_text()
    assert "preexec:echo hi; (exit 9)" in text
    assert "precmd:9" in text


async def test_bash_login_shell_reads_profile(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / ".bash_profile", "export FROM_PROFILE=yes\n")
    write(home / ".bashrc", "export FROM_RC=yes\n")
    settings = fast_settings()
    settings.login_shell = True
    terminal = await ShellTerminal.spawn(
        1, str(tmp_path), settings, shell="bash", env={"HOME": str(home)}
    )
    try:
        await terminal.ready()
        run = await terminal.run('echo "${FROM_PROFILE-no} ${FROM_RC-no}"')
        assert lines(run) == ["yes no"]
    finally:
        await terminal.close()


@pytest.mark.parametrize("shell", ["bash", "zsh"])
async def test_slow_rc_is_waited_for(
    spawn_terminal: SpawnTerminal, tmp_path: Path, shell: str
) -> None:
    home = tmp_path / "home"
    rc = ".bashrc" if shell == "bash" else ".zshrc"
    # Quieter for longer than the idle window: only our early marker says "wait".
    write(home / rc, "sleep 2\n")
    settings = fast_settings()
    settings.integration_idle_timeout = 1.0
    terminal = await spawn_terminal(shell, home=home, settings=settings)
    assert terminal.integration is IntegrationState.RICH
    assert (await terminal.run("false")).exit_code == 1


async def test_readonly_ps0_falls_back_to_the_screen(
    spawn_terminal: SpawnTerminal, tmp_path: Path
) -> None:
    # A broken rc: our C can never be printed. D and P still come.
    home = tmp_path / "home"
    write(home / ".bashrc", "readonly PS0=''\n")
    terminal = await spawn_terminal("bash", home=home)
    run = await terminal.run("echo visible; (exit 2)")
    assert run.state is RunState.COMPLETED
    assert run.exit_code == 2
    assert "visible" in run.text()
    assert "echo visible" not in run.text()  # the echoed command line is cut
    assert run.note


async def test_swallowed_command_falls_back_after_a_bounded_wait(
    spawn_terminal: SpawnTerminal, tmp_path: Path
) -> None:
    # A line editor that never accepts the line: no C, no prompt, nothing runs.
    home = tmp_path / "home"
    write(home / ".bashrc", "bind '\"\\r\": self-insert'\nbind '\"\\n\": self-insert'\n")
    settings = fast_settings()
    settings.command_start_timeout = 1.0
    terminal = await spawn_terminal("bash", home=home, settings=settings)
    run = await terminal.run("echo never")
    assert run.state is RunState.COMPLETED
    assert run.exit_code is None
    assert "did not start" in (run.note or "")
    assert "never\r\n" not in run.text()


# -- zsh ----------------------------------------------------------------------------


async def test_zsh_user_files_and_hooks(spawn_terminal: SpawnTerminal, tmp_path: Path) -> None:
    home = tmp_path / "home"
    zdotdir = tmp_path / "zdot"
    log = tmp_path / "zhooks.log"
    write(zdotdir / ".zshenv", "export FROM_ZSHENV=yes\n")
    write(
        zdotdir / ".zshrc",
        f"""
echo "hello from the user's zshrc"
setopt nounset
HISTFILE={tmp_path}/zsh_history
SAVEHIST=100
setopt INC_APPEND_HISTORY
theme_precmd() {{ local s=$?; PS1="theme:$s %# "; echo "precmd:$s" >> {log}; }}
user_preexec() {{ echo "preexec:$1" >> {log}; }}
autoload -Uz add-zsh-hook
add-zsh-hook precmd theme_precmd
add-zsh-hook preexec user_preexec
""",
    )
    terminal = await spawn_terminal("zsh", home=home, env={"ZDOTDIR": str(zdotdir)})
    assert terminal.integration is IntegrationState.RICH
    run = await terminal.run("echo $FROM_ZSHENV; (exit 4)")
    assert lines(run) == ["yes"]
    assert run.exit_code == 4
    # Child shells see the user's ZDOTDIR, not our temporary one.
    run = await terminal.run('echo "$ZDOTDIR"; zsh -c \'echo "$ZDOTDIR"\'')
    assert lines(run) == [str(zdotdir), str(zdotdir)]
    await terminal.run("true")  # starts only at the next prompt: the hooks have run
    text = log.read_text()
    assert "preexec:echo $FROM_ZSHENV; (exit 4)" in text
    assert "precmd:4" in text
    assert "theme:4 " in terminal.replay().decode()
    await terminal.close()
    assert not (tmp_path / "zsh_history").exists()


async def test_zsh_without_user_zdotdir(spawn_terminal: SpawnTerminal, tmp_path: Path) -> None:
    home = tmp_path / "home"
    write(home / ".zshrc", "export FROM_HOME_ZSHRC=yes\n")
    env = {k: v for k, v in os.environ.items() if k != "ZDOTDIR"}
    terminal = await ShellTerminal.spawn(
        1, str(tmp_path), fast_settings(), shell="zsh", env={**env, "HOME": str(home)}
    )
    try:
        await terminal.ready()
        run = await terminal.run('echo "${FROM_HOME_ZSHRC-no} ${ZDOTDIR-unset}"')
        assert lines(run) == ["yes unset"]
    finally:
        await terminal.close()


# -- strategy none --------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "sh"])
async def test_none_strategy_runs_on_heuristics(spawn_terminal: SpawnTerminal, shell: str) -> None:
    terminal = await spawn_terminal(shell, integration=False)
    assert terminal.integration is IntegrationState.NONE
    run = await terminal.run("echo hi; echo there")
    assert run.state is RunState.COMPLETED
    assert run.exit_code is None
    assert clean_lines(run) == ["hi", "there"]
    assert "guessed" in (run.note or "")


@pytest.mark.parametrize("shell", ["bash", "sh"])
async def test_none_strategy_with_an_exported_prompt_of_any_shape(
    spawn_terminal: SpawnTerminal, shell: str
) -> None:
    # An activated virtualenv exports PS1="(venv) ": no $ # % > at its end.
    terminal = await spawn_terminal(shell, integration=False, env={"PS1": "(venv) "})
    run = await terminal.run("echo hi; echo there")
    assert run.state is RunState.COMPLETED
    assert clean_lines(run) == ["hi", "there"]
    second = await terminal.run("echo again")
    assert clean_lines(second) == ["again"]


async def test_integration_that_never_comes_is_none(
    spawn_terminal: SpawnTerminal, tmp_path: Path
) -> None:
    # The user's rc replaces the shell before our hooks load: no B ever comes.
    home = tmp_path / "home"
    write(home / ".bashrc", "exec bash --norc --noprofile -i\n")
    settings = fast_settings()
    settings.integration_idle_timeout = 1.0
    settings.integration_absolute_timeout = 3.0
    terminal = await spawn_terminal("bash", home=home, settings=settings)
    assert terminal.integration is IntegrationState.NONE
    run = await terminal.run("echo plain")
    assert clean_lines(run) == ["plain"]
    assert run.exit_code is None


async def test_temporary_files_removed_on_close(spawn_terminal: SpawnTerminal) -> None:
    for shell in ("bash", "zsh"):
        terminal = await spawn_terminal(shell)
        temp_dir = terminal._launch.temp_dir
        assert temp_dir is not None
        assert os.stat(temp_dir).st_mode & 0o777 == 0o700
        await terminal.close()
        assert not os.path.exists(temp_dir)


async def test_multi_line_without_bracketed_paste_goes_line_by_line(
    spawn_terminal: SpawnTerminal, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    write(home / ".inputrc", "set enable-bracketed-paste off\n")
    terminal = await spawn_terminal("bash", home=home, env={"INPUTRC": str(home / ".inputrc")})
    assert terminal._bracketed_paste is False
    run = await terminal.run(
        "echo one\nfor i in 1 2; do\n  echo loop $i\ndone\ncat <<EOF\nhere doc\nEOF\n(exit 6)"
    )
    assert lines(run) == ["one", "loop 1", "loop 2", "here doc"]
    assert run.exit_code == 6
    assert (await terminal.run("echo after")).text().strip() == "after"


async def test_cwd_from_a_shells_own_osc7(spawn_terminal: SpawnTerminal, tmp_path: Path) -> None:
    # A shell with integration of its own (here: OSC 7 from PROMPT_COMMAND) and not
    # ours: the live cwd still follows it.
    target = tmp_path / "elsewhere"
    target.mkdir()
    osc7 = 'printf "\\033]7;file://%s%s\\007" "$HOSTNAME" "$PWD"'
    terminal = await spawn_terminal("bash", integration=False, env={"PROMPT_COMMAND": osc7})
    assert terminal.integration is IntegrationState.NONE
    await terminal.run(f"cd {target}")
    assert terminal.cwd == str(target)
