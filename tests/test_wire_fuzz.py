"""Fuzzing the wire: random streams of good and bad frames against the real server.

Each round sends a random mix -- valid requests with ids of every type, malformed and
deeply nested JSON, huge bodies, bodies cut short, headers without bodies, garbage
lines, lone notifications -- then one last request.  The server must still be
serving, and every well-formed request with a valid id must have been answered
exactly once (the cut and garbled ones with a null-id error, never with silence that
swallows the next message).  Seeded, and bounded in time: ``TR_FUZZ_SECONDS``
(default 8) and ``TR_FUZZ_SEED`` (default: a new seed, printed on failure).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections import Counter
from typing import Any

from .rpc import StdioServer, frame

SECONDS = float(os.environ.get("TR_FUZZ_SECONDS", "8"))


def _request(rng: random.Random, msg_id: Any) -> dict[str, Any]:
    method = rng.choice(["terminal/list", "terminal/get", "terminal/output", "no/such"])
    params: Any = rng.choice([{}, {"terminalId": rng.randint(-5, 10**12)}, None, [], "x"])
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if rng.random() < 0.8:
        message["params"] = params
    return message


_KINDS = (
    *("good", "good", "good", "odd-id", "bad-json", "deep", "huge", "cut", "bare-header"),
    *("garbage", "notification", "cancel", "batch", "wrong-version"),
)


class Round:
    """One random stream: the bytes, and the ids that must be answered."""

    def __init__(self, rng: random.Random, first_id: int) -> None:
        self.data = bytearray()
        self.expected: Counter[Any] = Counter()
        self._rng = rng
        self._next_id = first_id
        for _ in range(rng.randint(5, 40)):
            self._one()

    def _valid_id(self) -> Any:
        self._next_id += 1
        return self._next_id if self._rng.random() < 0.5 else f"s{self._next_id}"

    def _one_good(self) -> None:
        msg_id = self._valid_id()
        self.expected[msg_id] += 1
        self.data += frame(json.dumps(_request(self._rng, msg_id)).encode())

    def _one(self) -> None:
        rng = self._rng
        kind = rng.choice(_KINDS)
        if kind == "good":
            self._one_good()
        elif kind == "odd-id":
            odd = rng.choice([None, True, 1.5, [1], {"a": 1}])
            self.data += frame(json.dumps(_request(rng, odd)).encode())
        elif kind == "bad-json":
            self.data += frame(rng.choice([b"{", b"nul", b'{"a":}', b"\xff\xfe", b""]))
        elif kind == "deep":
            depth = rng.randint(1000, 200_000)
            self.data += frame(rng.choice([b"[" * depth, b'{"a":' * depth]))
        elif kind == "huge":
            msg_id = self._valid_id()
            self.expected[msg_id] += 1
            message = _request(rng, msg_id)
            message["params"] = {"taskId": "x" * rng.randint(100_000, 3_000_000)}
            message["method"] = "terminal/list"
            self.data += frame(json.dumps(message).encode())
        elif kind == "cut":
            # Declared too long and followed by the next message: that message's
            # header cuts the body, and both are answered.
            msg_id = self._valid_id()
            self.expected[msg_id] += 1
            body = json.dumps(_request(rng, msg_id)).encode()
            self.data += b"Content-Length: %d\r\n\r\n" % (len(body) + rng.randint(1, 500))
            self.data += body
            self._one_good()
        elif kind == "bare-header":
            self.data += b"Content-Length: %d\r\n\r\n" % rng.randint(1, 10**9)
        elif kind == "garbage":
            self.data += bytes(rng.choice(b"abc xyz{}\t") for _ in range(rng.randint(1, 80)))
            self.data += b"\r\n"
        elif kind == "notification":
            self.data += frame(
                json.dumps({"jsonrpc": "2.0", "method": "x/y", "params": {}}).encode()
            )
        elif kind == "cancel":
            cancel_id = rng.choice([None, 1, "a", [], {}, 2.5, True])
            note = {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": cancel_id}}
            self.data += frame(json.dumps(note).encode())
        elif kind == "batch":
            self.data += frame(json.dumps([_request(rng, 1), _request(rng, 2)]).encode())
        else:
            message = _request(rng, self._valid_id())
            message["jsonrpc"] = rng.choice(["1.0", 2, None])
            self.data += frame(json.dumps(message).encode())  # answered, with its id
            self.expected[message["id"]] += 1


async def _answers_until(server: StdioServer, last_id: int) -> Counter[Any]:
    answered: Counter[Any] = Counter()
    while True:
        message = await asyncio.wait_for(server._next(), 60)
        if "method" in message and "id" not in message:
            continue  # a notification
        answered[message.get("id")] += 1
        if message.get("id") == last_id:
            return answered


async def test_random_streams_never_end_the_server_and_every_request_is_answered() -> None:
    seed = int(os.environ.get("TR_FUZZ_SEED", str(random.randrange(2**32))))
    rng = random.Random(seed)
    server = await StdioServer.start()
    try:
        await server.initialize()
        deadline = time.monotonic() + SECONDS
        next_id = 10_000
        rounds = 0
        while time.monotonic() < deadline:
            stream = Round(rng, next_id)
            next_id += 1000
            # Sent in random pieces, as a real pipe would cut it.
            data = bytes(stream.data)
            start = 0
            while start < len(data):
                end = start + rng.randint(1, 1 << 16)
                server.send_raw(data[start:end])
                start = end
            last = next_id
            next_id += 1
            server.send(_request(random.Random(0), last) | {"method": "terminal/list"})
            answered = await _answers_until(server, last)
            for msg_id, count in stream.expected.items():
                assert answered[msg_id] == count, (seed, rounds, msg_id, answered[msg_id])
            assert server.process.returncode is None, seed
            rounds += 1
        assert rounds > 0
        assert isinstance(await server.call("terminal/list", {}), list)
    finally:
        await server.stop()
