"""The wait-state decision over hand-built samples: every rule, without a process."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from registry.waiting import (
    Certainty,
    ProcessState,
    Rules,
    Sample,
    TerminalState,
    ThreadState,
    Wait,
    decide,
    leave_keys,
)
from registry.waiting.decide import looks_like_password_prompt, looks_like_prompt

SHELL = 100


@dataclass
class Screen:
    """The screen as the decision reads it (a pure input, like the sample)."""

    alternate_screen: bool = False
    application_keypad: bool = False
    prompt: str = ""

    def prompt_line(self) -> str:
        return self.prompt


def thread(wait: Wait, timeout: float | None = None, state: str = "S", **kw: object) -> ThreadState:
    return ThreadState(tid=kw.pop("tid", 1), state=state, wait=wait, timeout=timeout, **kw)  # type: ignore[arg-type]


def group(
    *threads: ThreadState,
    name: str = "prog",
    pid: int = 200,
    echo: bool | None = True,
    canonical: bool | None = True,
    jobs: tuple[ProcessState, ...] = (),
) -> Sample:
    return Sample(
        foreground=pid,
        shell_group=SHELL,
        echo=echo,
        canonical=canonical,
        processes=(ProcessState(pid, name, threads),),
        jobs=jobs,
    )


def at_prompt(*jobs: ProcessState) -> Sample:
    shell = ProcessState(SHELL, "bash", (thread(Wait.TERMINAL),))
    return Sample(SHELL, SHELL, False, False, (shell,), jobs)


def test_shell_at_its_prompt_is_idle() -> None:
    decision = decide(at_prompt(), 5.0, Screen(), command_running=False)
    assert decision.state is TerminalState.IDLE


def test_the_shell_reading_while_a_command_runs_is_a_read_builtin() -> None:
    shell = ProcessState(SHELL, "bash", (thread(Wait.TERMINAL),))
    sample = Sample(SHELL, SHELL, True, True, (shell,))
    decision = decide(sample, 0.2, Screen(prompt="continue? "), command_running=True)
    assert decision.state is TerminalState.WAITING_FOR_INPUT
    assert decision.prompt == "continue? "
    assert decision.program == "bash"


def test_not_quiet_long_enough_is_undecided_with_a_time_to_look_again() -> None:
    decision = decide(group(thread(Wait.TERMINAL)), 0.04, Screen(), command_running=True)
    assert decision.state is None
    assert decision.recheck_in == pytest.approx(0.06)


def test_echo_off_in_canonical_mode_is_a_password() -> None:
    sample = group(thread(Wait.TERMINAL), echo=False, canonical=True)
    decision = decide(sample, 0.2, Screen(prompt="Password: "), command_running=True)
    assert decision.state is TerminalState.WAITING_FOR_PASSWORD
    assert decision.certainty is Certainty.CERTAIN


def test_raw_mode_alone_is_plain_input() -> None:
    sample = group(thread(Wait.TERMINAL), name="python3", echo=False, canonical=False)
    decision = decide(sample, 0.2, Screen(prompt=">>> "), command_running=True)
    assert decision.state is TerminalState.WAITING_FOR_INPUT


def test_alternate_screen_is_full_screen_with_the_keys_that_leave() -> None:
    sample = group(thread(Wait.TERMINAL, timeout=4.0), name="vim", echo=False, canonical=False)
    decision = decide(sample, 0.2, Screen(alternate_screen=True), command_running=True)
    assert decision.state is TerminalState.FULL_SCREEN
    assert decision.keys == ("Escape", ":qa!", "Enter")
    assert decision.prompt is None  # a full screen has no one prompt line


def test_keypad_mode_makes_a_pager_full_screen_without_the_alternate_screen() -> None:
    sample = group(thread(Wait.TERMINAL), name="less", echo=False, canonical=False)
    decision = decide(sample, 0.2, Screen(application_keypad=True), command_running=True)
    assert decision.state is TerminalState.FULL_SCREEN
    assert decision.keys == ("q",)


def test_keypad_mode_from_a_program_that_is_no_pager_is_input() -> None:
    sample = group(thread(Wait.TERMINAL), name="node", echo=False, canonical=False)
    decision = decide(sample, 0.2, Screen(application_keypad=True), command_running=True)
    assert decision.state is TerminalState.WAITING_FOR_INPUT


@pytest.mark.parametrize("wait", [Wait.RUNNING, Wait.OTHER])
def test_no_thread_reading_the_terminal_is_running(wait: Wait) -> None:
    decision = decide(group(thread(wait)), 30.0, Screen(prompt="? "), command_running=True)
    assert decision.state is TerminalState.RUNNING


def test_a_short_poll_timeout_needs_twice_its_length_of_quiet() -> None:
    sample = group(thread(Wait.TERMINAL, timeout=0.25))
    early = decide(sample, 0.3, Screen(), command_running=True)
    assert early.state is None
    assert early.recheck_in == pytest.approx(0.2)
    assert decide(sample, 0.5, Screen(), command_running=True).state is (
        TerminalState.WAITING_FOR_INPUT
    )


def test_a_poll_timeout_under_a_second_needs_at_most_a_second() -> None:
    sample = group(thread(Wait.TERMINAL, timeout=0.9))
    assert decide(sample, 0.99, Screen(), command_running=True).state is None
    assert decide(sample, 1.0, Screen(), command_running=True).state is not None


def test_a_long_timeout_is_a_plain_wait() -> None:
    sample = group(thread(Wait.TERMINAL, timeout=4.0))
    assert decide(sample, 0.11, Screen(), command_running=True).state is (
        TerminalState.WAITING_FOR_INPUT
    )


class TestProxy:
    sample = group(thread(Wait.TERMINAL_AND_SOCKET), name="ssh", echo=False, canonical=False)

    def test_needs_two_seconds_of_quiet(self) -> None:
        decision = decide(self.sample, 1.0, Screen(prompt="$ "), command_running=True)
        assert decision.state is None
        assert decision.recheck_in == pytest.approx(1.0)

    @pytest.mark.parametrize(
        ("prompt", "state"),
        [
            ("user@host:~$ ", TerminalState.WAITING_FOR_INPUT),
            ("[sudo] password for me: ", TerminalState.WAITING_FOR_PASSWORD),
            ("Compiling foo v0.1", TerminalState.RUNNING),
            ("", TerminalState.RUNNING),
        ],
    )
    def test_after_that_only_the_screen_tells(self, prompt: str, state: TerminalState) -> None:
        decision = decide(self.sample, 2.5, Screen(prompt=prompt), command_running=True)
        assert decision.state is state
        if state is not TerminalState.RUNNING:
            assert decision.certainty is Certainty.POSSIBLY

    def test_alternate_screen_is_possibly_full_screen(self) -> None:
        decision = decide(self.sample, 2.5, Screen(alternate_screen=True), command_running=True)
        assert decision.state is TerminalState.FULL_SCREEN
        assert decision.certainty is Certainty.POSSIBLY


class TestBusyThread:
    sample = group(
        thread(Wait.TERMINAL, tid=1), thread(Wait.RUNNING, state="R", tid=2), name="python3"
    )

    def test_is_running_until_two_seconds_of_quiet(self) -> None:
        decision = decide(self.sample, 0.5, Screen(prompt="> "), command_running=True)
        assert decision.state is TerminalState.RUNNING
        assert decision.recheck_in == pytest.approx(1.5)

    def test_then_possibly_waiting(self) -> None:
        decision = decide(self.sample, 2.1, Screen(prompt="> "), command_running=True)
        assert decision.state is TerminalState.WAITING_FOR_INPUT
        assert decision.certainty is Certainty.POSSIBLY


class TestUnreadable:
    """setuid programs (sudo, su): only stat, termios and the screen."""

    def test_echo_off_canonical_after_300_ms_is_possibly_a_password(self) -> None:
        sample = group(thread(Wait.UNKNOWN), name="sudo", echo=False, canonical=True)
        early = decide(sample, 0.2, Screen(prompt="[sudo] password for me: "), True)
        assert early.state is TerminalState.RUNNING
        assert early.recheck_in == pytest.approx(0.1)
        late = decide(sample, 0.35, Screen(prompt="[sudo] password for me: "), True)
        assert late.state is TerminalState.WAITING_FOR_PASSWORD
        assert late.certainty is Certainty.POSSIBLY

    def test_echo_on_needs_a_prompt_shape_and_two_seconds(self) -> None:
        sample = group(thread(Wait.UNKNOWN), name="apt", echo=True, canonical=True)
        question = Screen(prompt="Do you want to continue? [Y/n] ")
        assert decide(sample, 1.0, question, True).state is TerminalState.RUNNING
        assert decide(sample, 2.1, question, True).state is TerminalState.WAITING_FOR_INPUT
        assert decide(sample, 2.1, Screen(prompt="Unpacking"), True).state is (
            TerminalState.RUNNING
        )


class TestStoppedJobs:
    def test_a_job_stopped_reading_the_terminal(self) -> None:
        job = ProcessState(300, "cat", (thread(Wait.STOPPED_ON_TERMINAL, state="T"),))
        decision = decide(at_prompt(job), 0.2, Screen(), command_running=False)
        assert decision.state is TerminalState.STOPPED_JOB
        assert decision.program == "cat"
        assert "reading the terminal" in decision.reason

    def test_a_job_stopped_by_ctrl_z(self) -> None:
        job = ProcessState(300, "vim", (thread(Wait.STOPPED, state="T"),))
        decision = decide(at_prompt(job), 0.2, Screen(), command_running=False)
        assert decision.state is TerminalState.STOPPED_JOB

    def test_a_running_job_leaves_the_shell_idle(self) -> None:
        job = ProcessState(300, "sleep", (thread(Wait.OTHER),))
        assert decide(at_prompt(job), 0.2, Screen(), False).state is TerminalState.IDLE

    def test_the_foreground_command_comes_first(self) -> None:
        job = ProcessState(300, "cat", (thread(Wait.STOPPED_ON_TERMINAL, state="T"),))
        sample = group(thread(Wait.TERMINAL), jobs=(job,))
        assert decide(sample, 0.2, Screen(), True).state is TerminalState.WAITING_FOR_INPUT


def test_a_pty_relay_is_judged_by_the_inner_terminal() -> None:
    inner = Sample(
        foreground=400,
        shell_group=400,
        echo=None,
        canonical=None,
        processes=(ProcessState(400, "sh", (thread(Wait.TERMINAL),)),),
    )
    relay = group(thread(Wait.INNER_TERMINAL, inner=inner), name="script")
    decision = decide(relay, 0.2, Screen(prompt="inner? "), command_running=True)
    assert decision.state is TerminalState.WAITING_FOR_INPUT
    assert decision.program == "sh"
    assert "relays a pty" in decision.reason


def test_a_sample_that_raced_a_call_is_dropped() -> None:
    sample = Sample(200, SHELL, True, True, group(thread(Wait.TERMINAL)).processes, unstable=True)
    decision = decide(sample, 5.0, Screen(), command_running=True)
    assert decision.state is None
    assert decision.recheck_in == Rules().raced_recheck


def test_a_group_we_cannot_see_is_undecided() -> None:
    sample = Sample(200, SHELL, True, True, ())
    assert decide(sample, 5.0, Screen(), command_running=True).state is None


@pytest.mark.parametrize(
    ("program", "keys"),
    [
        ("less", ("q",)),
        ("top", ("q",)),
        ("vim", ("Escape", ":qa!", "Enter")),
        ("vi", ("Escape", ":qa!", "Enter")),
        ("nano", ("C-x",)),
        ("emacs", ("C-x", "C-c")),
        ("unheard-of", None),
        (None, None),
    ],
)
def test_keys_that_leave(program: str | None, keys: tuple[str, ...] | None) -> None:
    assert leave_keys(program) == keys


@pytest.mark.parametrize(
    ("line", "prompt", "password"),
    [
        ("continue? ", True, False),
        ("Password: ", True, True),
        ("Enter passphrase for key '/root/.ssh/id_ed25519': ", True, True),
        ("Do you want to continue? [Y/n] ", True, False),
        ("user@host:~$ ", True, False),
        ("Downloading 45%", False, False),
        ("", False, False),
    ],
)
def test_prompt_shapes(line: str, prompt: bool, password: bool) -> None:
    assert looks_like_prompt(line) is prompt
    assert looks_like_password_prompt(line) is password


_NOT_READING = st.sampled_from([Wait.RUNNING, Wait.OTHER, Wait.STOPPED])
_ANY_WAIT = st.sampled_from(list(Wait))
_WAITING = {
    TerminalState.WAITING_FOR_INPUT,
    TerminalState.WAITING_FOR_PASSWORD,
    TerminalState.FULL_SCREEN,
}


@given(
    waits=st.lists(_NOT_READING, min_size=1, max_size=5),
    quiet=st.floats(0, 100),
    alternate=st.booleans(),
    echo=st.booleans(),
    canonical=st.booleans(),
)
def test_a_group_that_does_not_read_the_terminal_is_never_waiting(
    waits: list[Wait], quiet: float, alternate: bool, echo: bool, canonical: bool
) -> None:
    sample = group(
        *(thread(w, tid=i, state="R" if w is Wait.RUNNING else "S") for i, w in enumerate(waits)),
        echo=echo,
        canonical=canonical,
    )
    screen = Screen(alternate_screen=alternate, application_keypad=True, prompt="? [Y/n] ")
    assert decide(sample, quiet, screen, command_running=True).state not in _WAITING


@given(waits=st.lists(_ANY_WAIT, min_size=1, max_size=5), quiet=st.floats(0, 0.099))
def test_nothing_is_waiting_before_the_quiet_window(waits: list[Wait], quiet: float) -> None:
    sample = group(*(thread(w, tid=i) for i, w in enumerate(waits)))
    screen = Screen(alternate_screen=True, prompt="password: ")
    assert decide(sample, quiet, screen, command_running=True).state not in _WAITING
