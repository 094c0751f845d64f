"""The watchdog: a small process that outlives the server and reaps what it owned.

The server starts it (:func:`start`) with one end of a pipe as its stdin; only the
server holds the other end (close-on-exec, so no terminal inherits it).  However the
server ends -- ``exit``, SIGTERM, SIGKILL, the OOM killer -- the kernel closes that
end, the watchdog's read returns end-of-file at once, and it reaps the server's
record (:func:`registry.ownership.reap`).  A server that ended cleanly has already
discarded its record, so then there is nothing to do.

The watchdog runs in a session of its own and ignores SIGINT and SIGHUP, so what
ends the server's session or process group (a closed terminal window, Ctrl-C) does
not end it too.  It imports nothing heavy until it is needed.

    python -m registry.watchdog RECORD_PATH      (stdin: the server's pipe)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

__all__ = ["Watchdog", "main", "start"]


class Watchdog:
    """The server's side: the process and the pipe end whose closing wakes it."""

    def __init__(self, process: subprocess.Popen[bytes], pipe: int) -> None:
        self.process = process
        self._pipe = pipe

    @property
    def pid(self) -> int:
        return self.process.pid

    def stand_down(self) -> None:
        """The server ended cleanly (its record discarded): let the watchdog exit."""
        if self._pipe >= 0:
            os.close(self._pipe)
            self._pipe = -1
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start(record_path: str) -> Watchdog:
    """Start the watchdog for the record at ``record_path``; it reports on our stderr."""
    read_end, write_end = os.pipe()
    # Only the server holds the write end: a terminal inheriting it would keep the
    # watchdog asleep after the server died.
    os.set_inheritable(write_end, False)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "registry.watchdog", record_path],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    finally:
        os.close(read_end)
    return Watchdog(process, write_end)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m registry.watchdog RECORD_PATH", file=sys.stderr)
        return 2
    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    # Sleep until the server's end of the pipe closes (EOF: the server is gone).
    while True:
        try:
            if not os.read(0, 4096):
                break
        except InterruptedError:
            continue
        except OSError:
            break
    from .ownership import OwnershipRecord, reap

    record = OwnershipRecord.load(argv[0])
    if record is None:
        return 0  # discarded: the server ended cleanly
    result = reap(record)
    print(f"terminal-registry watchdog: {result.describe()}", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
