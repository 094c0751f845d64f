"""Decoding /proc's syscall lines and the structures read from a process's memory.

The lines and fdinfo texts are as recorded on this project's machines.
"""

from __future__ import annotations

import struct

import pytest

from registry.waiting.syscalls import (
    BlockedCall,
    CallKind,
    SyscallLine,
    epoll_targets,
    fd_set_members,
    parse_syscall_line,
    poll_readers,
    signed32,
    table_for_machine,
    timespec_seconds,
    timeval_seconds,
)


def test_parse_a_blocked_pselect6() -> None:
    line = "270 0x1 0x7ffc6772fbb0 0x0 0x0 0x0 0x7ffc6772fae0 0x7ffc6772faa0 0x7f0518e3faec\n"
    call = parse_syscall_line(line)
    assert call == BlockedCall(270, (1, 0x7FFC6772FBB0, 0, 0, 0, 0x7FFC6772FAE0))


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("running\n", SyscallLine.RUNNING),
        ("-1 0x7ffd 0x7f11\n", SyscallLine.NOT_IN_CALL),
        ("", None),
        ("garbage here", None),
        ("0 0x1 0x2", None),
    ],
)
def test_parse_lines_without_a_call(line: str, expected: object) -> None:
    assert parse_syscall_line(line) == expected


def test_tables() -> None:
    x86 = table_for_machine("x86_64")
    arm = table_for_machine("aarch64")
    assert x86 is not None
    assert arm is not None
    assert x86.kind(0) is CallKind.READ
    assert x86.kind(270) is CallKind.PSELECT
    assert x86.kind(281) is CallKind.EPOLL
    assert x86.kind(61) is None  # wait4: not a read
    assert arm.kind(63) is CallKind.READ
    assert arm.kind(72) is CallKind.PSELECT
    assert arm.kind(22) is CallKind.EPOLL
    assert arm.kind(0) is None  # io_setup on arm64
    assert table_for_machine("sparc64") is None
    assert table_for_machine() is not None  # this machine is one we know


def test_signed32() -> None:
    assert signed32(0xFFFFFFFF) == -1
    assert signed32(0xDEADBEEF_000003E8) == 1000


def test_fd_set_members() -> None:
    data = struct.pack("@QQ", (1 << 0) | (1 << 5) | (1 << 63), 1 << 2)
    assert fd_set_members(data, 128) == [0, 5, 63, 66]
    assert fd_set_members(data, 6) == [0, 5]


def test_poll_readers() -> None:
    data = struct.pack("@ihh", 0, 0x1, 0) + struct.pack("@ihh", 3, 0x4, 0)
    data += struct.pack("@ihh", -1, 0x1, 0) + struct.pack("@ihh", 5, 0x2, 0)
    assert poll_readers(data) == [0, 5]


def test_time_structures() -> None:
    assert timeval_seconds(struct.pack("@qq", 1, 500_000)) == pytest.approx(1.5)
    assert timespec_seconds(struct.pack("@qq", 0, 250_000_000)) == pytest.approx(0.25)
    assert timespec_seconds(b"\x00") is None
    assert timeval_seconds(struct.pack("@qq", -1, 0)) is None


def test_epoll_targets_from_fdinfo() -> None:
    info = (
        "pos:\t0\nflags:\t02000002\nmnt_id:\t17\nino:\t1038\n"
        "tfd:       14 events:       19 data:                e  pos:0 ino:174f6 sdev:f\n"
        "tfd:       17 events:       19 data:               11  pos:0 ino:6 sdev:1a\n"
        "tfd:       16 events:        4 data:               10  pos:0 ino:40e sdev:10\n"
    )
    assert epoll_targets(info) == [(14, 0x19), (17, 0x19), (16, 0x4)]
