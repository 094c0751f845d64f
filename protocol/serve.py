"""``terminal-registry serve``: the server process, from start to exit.

Sets up logging, starts the keeper (:mod:`registry.keeper`: it reaps what a dead
predecessor left and starts the watchdog that reaps after us), the hub on stdio
and/or a socket (with its pid file for ``stop``), says "ready" on ``--ready-fd``
once it listens, and serves until it is told to stop.  The CLI imports this module
only for ``serve``: its imports are the server's, not every command's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import sys

from registry.config import Settings
from registry.keeper import Keeper

from . import daemon
from .audit import AUDIT_LOG_VARIABLE, AuditFile
from .connection import QueueLimits
from .errors import InvalidParamsError
from .options import settings_for
from .server import Hub
from .transport import CONGESTED_BYTES

__all__ = ["serve"]

log = logging.getLogger("terminal-registry")


def serve(args: argparse.Namespace) -> int:

    logging.basicConfig(stream=sys.stderr, level=args.log_level.upper())
    if args.log_level.upper() != "DEBUG":
        # pygls logs every answered error with a traceback; the client has the answer.
        logging.getLogger("pygls").setLevel(logging.CRITICAL)
    if not args.stdio and not args.socket:
        print("terminal-registry serve: give --stdio, --socket PATH, or both", file=sys.stderr)
        return 2
    try:
        options = json.loads(args.options) if args.options else None
        settings, warnings = settings_for(Settings(), options)
    except (ValueError, InvalidParamsError) as error:
        print(f"terminal-registry serve: --options: {error}", file=sys.stderr)
        return 2
    for warning in warnings:
        log.warning("--options: %s", warning)

    async def main() -> int:
        limits = QueueLimits(
            congested=min(args.max_queued_mb * 2**20 // 16, CONGESTED_BYTES),
            limit=args.max_queued_mb * 2**20,
        )
        audit_path = args.audit_log or os.environ.get(AUDIT_LOG_VARIABLE) or None
        audit = AuditFile(audit_path) if audit_path else None
        keeper = Keeper.start()
        log.info("processes end with the server: %s", keeper.describe())
        server = Hub(settings, limits=limits, keeper=keeper, audit=audit)
        # What start-up made (lsprotocol's ~570 classes, pygls, ours: ~60,000 objects)
        # lives as long as the server; left to the collector, every full collection
        # walks all of it again -- a 35 ms pause of the loop each, mid-run.
        gc.freeze()
        if args.socket:
            try:
                await server.serve_socket(args.socket, export=args.export_socket)
            except BaseException:
                keeper.close()
                raise
            daemon.write_pid_file(args.socket)
            keeper.add_cleanup(daemon.pid_file(args.socket))
        if args.ready_fd is not None:
            os.write(args.ready_fd, b"ready\n")
            os.close(args.ready_fd)
        try:
            return await server.run(stdio=args.stdio, socket_path=None)
        finally:
            if args.socket:
                with contextlib.suppress(OSError):
                    os.unlink(daemon.pid_file(args.socket))

    try:
        return asyncio.run(main())
    except (OSError, daemon.BackgroundServerError) as error:
        print(f"terminal-registry serve: {error}", file=sys.stderr)
        return 2
