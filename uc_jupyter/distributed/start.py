"""Starting a pool's ranks: one generation of rank processes, placed, on a free port, every one ready.

:func:`start_ranks` plans the devices and backend with the placement (:mod:`uc_jupyter.distributed.launch`),
starts the ranks, retrying on another free port when the one picked was taken before rank 0 bound it
(unless ``MASTER_PORT`` chose it), and waits until every rank has initialised its process group. A
rank that fails to start, dies or does not start in time makes a :class:`RankStartError` naming each
such rank and why; Ctrl-C stops the ranks and says so in one line. Starting takes seconds: past one,
a line says what is being waited for.

Example:
    >>> generation = start_ranks(placement_for(None, None, None), 2, "cpu", "auto", "alice",   # doctest: +SKIP
    ...                          Collector(), 120.0, lambda rank, output: print(output.text))
"""

from __future__ import annotations

import os
import queue
import time
from collections.abc import Callable

from uc_jupyter.distributed.errors import RankStartError, RemoteFailure, describe_exit, interrupted
from uc_jupyter.distributed.launch import Exited, Generation, Placement
from uc_jupyter.distributed.protocol import Output, Ready, StartFailed
from uc_jupyter.progress import waiting
from uc_jupyter.telemetry.collector import Collector

__all__ = ["start_ranks"]


def start_ranks(
    placement: Placement,
    size: int,
    devices: str,
    backend: str,
    principal: str,
    collector: Collector,
    start_timeout: float,
    write: Callable[[int, Output], None],
) -> Generation:
    """``size`` ranks started by ``placement`` on ``devices`` with ``backend`` ("auto": as the
    placement plans them), acting as ``principal``, their telemetry into ``collector``, each ready
    within ``start_timeout`` seconds; what they print meanwhile goes to ``write(rank, output)``.

    Raises:
        RankStartError: a rank failed to start, died, or did not start in time (each named, with why).
        KeyboardInterrupt: Ctrl-C; the ranks were stopped (one line says so).
    """
    start = _Start(size, principal, collector, start_timeout, write)
    devices, backend = placement.plan(size, devices, backend)
    chosen = os.environ.get("MASTER_PORT")
    attempts = 1 if chosen else 3  # a free port can be taken before rank 0 binds it: pick another
    where = f" on {placement.cluster}" if placement.cluster else ""
    with waiting(f"starting {size} {devices} ranks{where}"):  # a start takes seconds: say so past one
        for attempt in range(attempts):
            port = int(chosen) if chosen else None
            try:
                return start.launch(placement, port, devices, backend)
            except RankStartError as exc:
                if attempt + 1 == attempts or "address already in use" not in str(exc.remote_tracebacks()).lower():
                    raise
    raise AssertionError("unreachable")


class _Start:
    """One start of ``size`` ranks (see :func:`start_ranks`)."""

    def __init__(
        self,
        size: int,
        principal: str,
        collector: Collector,
        start_timeout: float,
        write: Callable[[int, Output], None],
    ) -> None:
        self.size, self.principal, self.collector = size, principal, collector
        self.start_timeout, self.write = start_timeout, write

    def launch(self, placement: Placement, port: int | None, devices: str, backend: str) -> Generation:
        try:
            generation = placement.start(
                self.size, port, devices, backend, self.principal, self.collector, self.start_timeout
            )
        except KeyboardInterrupt:
            raise interrupted(f"interrupted the start of {self.size} ranks; they were stopped") from None
        try:
            self._await_ready(generation)
        except KeyboardInterrupt:
            generation.kill()
            raise interrupted(f"interrupted the start of {self.size} ranks; they were stopped") from None
        except BaseException:
            generation.kill()
            raise
        return generation

    def _await_ready(self, generation: Generation) -> None:
        pending = set(range(self.size))
        failures: list[RemoteFailure] = []
        deadline = time.monotonic() + self.start_timeout
        while pending and not failures:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                failures = [
                    RemoteFailure(r, "TimeoutError", f"did not start within {self.start_timeout:g} s", "")
                    for r in sorted(pending)
                ]
                break
            try:
                rank, message = generation.inbox.get(timeout=min(remaining, 0.2))
            except queue.Empty:
                continue
            if isinstance(message, Ready):
                generation.ranks[rank].device = message.device
                generation.ranks[rank].pid = message.pid
                pending.discard(rank)
            elif isinstance(message, StartFailed):
                failures.append(message.failure)
            elif isinstance(message, Exited):
                how = (message.how or f"its process {describe_exit(message.returncode)}") + generation.ranks[
                    rank
                ].where()
                failures.append(RemoteFailure(rank, "RankDied", how, generation.ranks[rank].log_tail()))
            elif isinstance(message, Output):
                self.write(rank, message)
        if failures:
            raise RankStartError(
                failures,
                world_size=self.size,
                summary="the rank pool could not start: "
                + "; ".join(f"rank {f.rank}: {f.headline}" for f in sorted(failures, key=lambda f: f.rank)),
            )
