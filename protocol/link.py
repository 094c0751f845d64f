"""The Python client's JSON-RPC link to a server: pygls's ``JsonRPCClient`` on a Unix
socket or a spawned server's stdio, sending requests and knowing when the server went.

A request is answered, cancelled by its caller, or failed with
:class:`~protocol.errors.ConnectionLostError` the moment the connection ends (the
server was stopped or died): nothing waits forever on an answer that cannot come.
A cancelled caller sends ``$/cancelRequest`` and waits (bounded) for the server to
confirm, so that the terminal is free again when the caller moves on.

:mod:`protocol.client` puts the protocol's typed methods on top.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from pygls.client import JsonRPCClient
from pygls.exceptions import JsonRpcException
from pygls.io_ import run_async

from . import methods
from .dispatch import ClientProtocol
from .errors import ConnectionLostError, error_for
from .types import converter_factory

__all__ = ["CANCEL_CONFIRM_TIMEOUT", "Link"]

#: After $/cancelRequest, how long to wait for the server's -32800.
CANCEL_CONFIRM_TIMEOUT = 30.0


class Link(JsonRPCClient):
    """One connection; ``on_gone()`` is called once, when it ends."""

    def __init__(self, on_gone: Callable[[], None]) -> None:
        super().__init__(protocol_cls=ClientProtocol, converter_factory=converter_factory)
        self._on_gone = on_gone
        self._ids = itertools.count(1)
        #: Done when the connection has ended: every request waiting fails then.
        self._gone: asyncio.Future[None] | None = None

    async def start_unix(self, path: str) -> None:
        reader, writer = await asyncio.open_unix_connection(path, limit=2**24)
        self.protocol.set_writer(writer)
        task = asyncio.create_task(
            run_async(stop_event=self._stop_event, reader=reader, protocol=self.protocol)
        )
        task.add_done_callback(lambda _: self.lost())  # the read loop ends at EOF
        self._async_tasks.append(task)

    async def server_exit(self, server: asyncio.subprocess.Process) -> None:
        self.lost()

    @property
    def connected(self) -> bool:
        """False once the connection has ended (the server closed it or went away)."""
        return self._gone is None or not self._gone.done()

    def lost(self) -> None:
        if self.connected:
            self._gone_future().set_result(None)
            self._on_gone()

    def _gone_future(self) -> asyncio.Future[None]:
        if self._gone is None:
            self._gone = asyncio.get_running_loop().create_future()
        return self._gone

    async def request(self, method: str, params: Any) -> Any:
        """The server's answer; its error as the exception of its code."""
        if (gone := self._gone_future()).done():
            raise ConnectionLostError(method)
        msg_id = f"c{next(self._ids)}"
        pending = asyncio.wrap_future(self.protocol.send_request(method, params, msg_id=msg_id))
        either = [pending, gone]
        try:
            # Neither future is cancelled with the caller (pygls would then fail to
            # deliver the answer); a server that goes away answers nothing.
            await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
            if not pending.done():
                raise ConnectionLostError(method)
            return pending.result()
        except asyncio.CancelledError:
            if not self.stopped and not pending.done() and not gone.done():
                self.protocol.notify(methods.CANCEL_REQUEST, {"id": msg_id})
                await asyncio.wait(
                    either, timeout=CANCEL_CONFIRM_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
                )
                if pending.done() and not pending.cancelled():
                    pending.exception()  # the expected -32800: taken, not logged as lost
            raise
        except JsonRpcException as error:
            raise error_for(error.code, error.message) from None
