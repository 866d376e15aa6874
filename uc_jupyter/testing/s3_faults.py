"""Random faults of the S3 test server: a fraction of object GETs answered 503, a fraction cut mid-answer.

A real store fails now and then without warning: a request is throttled (503 SlowDown), or a
connection drops while the bytes flow (a load balancer restarts, a NAT entry expires). The soak
(:mod:`uc_jupyter.testing.soak`) runs its training loop through both. :class:`RandomFaults` draws, for
each GET of an object, whether it fails and how, from a generator seeded with ``seed``, so two runs
with the same requests in the same order meet the same faults; it counts what it injected.

- ``fail_rate``: the fraction of object GETs answered 503 SlowDown at once (a client must retry).
- ``reset_rate``: the fraction answered 200/206 with their headers and half their body, after which
  the connection is reset (TCP RST): the client holds a response it cannot finish.

Listings, HEADs and writes are never faulted here: these are the faults of reading data, which
every reader must survive; ``fail_first`` of the server covers the deterministic cases.

Example:
    >>> faults = RandomFaults(fail_rate=0.5, reset_rate=0.0, seed=1)
    >>> [faults.draw() for _ in range(4)]
    ['503', None, None, '503']
    >>> faults.counts()
    {'503': 2, 'reset': 0}
"""

from __future__ import annotations

import random
import socket
import struct
from typing import Literal

from aiohttp import web

__all__ = ["Fault", "RandomFaults", "answer_then_reset"]

Fault = Literal["503", "reset"]


class RandomFaults:
    """Which GETs fail: each draw is ``"503"`` with probability ``fail_rate``, ``"reset"`` with
    probability ``reset_rate``, else None (the two never overlap: one uniform draw decides)."""

    def __init__(self, *, fail_rate: float = 0.0, reset_rate: float = 0.0, seed: int = 0) -> None:
        self.fail_rate = fail_rate
        self.reset_rate = reset_rate
        self._random = random.Random(seed)
        self.reset_counts()

    def reset_counts(self) -> None:
        self.injected = {"503": 0, "reset": 0}

    def draw(self) -> Fault | None:
        # Nothing is drawn while both rates are 0, so turning faults on later starts the seeded
        # sequence at the same place whatever ran before.
        if not (self.fail_rate or self.reset_rate):
            return None
        roll = self._random.random()
        fault: Fault | None = None
        if roll < self.fail_rate:
            fault = "503"
        elif roll < self.fail_rate + self.reset_rate:
            fault = "reset"
        if fault is not None:
            self.injected[fault] += 1
        return fault

    def counts(self) -> dict[str, int]:
        return dict(self.injected)


async def answer_then_reset(
    request: web.Request, status: int, headers: dict[str, str], body: bytes
) -> web.StreamResponse:
    """Send the headers and the first half of ``body``, then reset the connection (SO_LINGER 0, so
    the kernel sends RST rather than a clean FIN): the client sees its response cut short."""
    response = web.StreamResponse(status=status, headers=headers)
    await response.prepare(request)
    await response.write(body[: len(body) // 2])
    transport = request.transport
    if transport is not None:
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    return response
