"""A pass of several ranks, a row per rank: how long each waited, how fast it went, and which one holds
the others back. Pure, no I/O.

Under DDP every step waits for the slowest rank, so a job's figures merged over its ranks hide the
one that matters; each rank's row is its own loop's (and its workers'), and the straggler (see
:func:`uc_jupyter.widgets.advice.straggler`) is marked.

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> def loop(rank, wait):
    ...     return Sample(rank=rank, worker=-1, seq=1, time=10.0, started=0.0, batches=100, samples=800,
    ...                   fetch=Histogram.of([wait] * 100), between=Histogram.of([0.05] * 99))
    >>> rows = rank_rows(Snapshot({(0, -1): loop(0, 0.005), (1, -1): loop(1, 0.05)}, time=10.0))
    >>> [(row.rank, f"{row.exposed_wait:.0%}", row.samples_per_second, row.straggler) for row in rows]
    [(0, '9%', 80.0, False), (1, '50%', 80.0, True)]
"""

from __future__ import annotations

from dataclasses import dataclass

from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.widgets.advice import straggler
from uc_jupyter.widgets.units import format_seconds, three_digits

__all__ = ["RankRow", "rank_rows", "ranks_text"]


@dataclass(frozen=True)
class RankRow:
    """One rank's own figures over a pass (or the run)."""

    rank: int
    batches: int
    samples_per_second: float
    exposed_wait: float | None  # its steady-state share waited (None before a measured step)
    wait_p50: float
    wait_p95: float
    wait_p99: float
    on_cpu: float | None  # its worker processes' share of time on CPU (None: no worker processes)
    straggler: bool
    bound_stage: str = ""  # the stage that caused most of its wait ('' when not timed)


def rank_rows(figures: Snapshot) -> tuple[RankRow, ...]:
    """A row per rank that delivered a batch, in rank order."""
    loops = figures.loops()
    waits = figures.exposed_waits()
    slow = straggler(waits)
    rows = []
    for rank, loop in loops.items():
        seconds = loop.time - loop.started
        fetch = loop.fetch
        rows.append(
            RankRow(
                rank=rank,
                batches=loop.batches,
                samples_per_second=loop.samples / seconds if seconds > 0 else 0.0,
                exposed_wait=waits.get(rank),
                wait_p50=fetch.quantile(0.5),
                wait_p95=fetch.quantile(0.95),
                wait_p99=fetch.quantile(0.99),
                on_cpu=figures.worker_cpu_share(rank),
                straggler=rank == slow,
                bound_stage=loop.bound_stage(),
            )
        )
    return tuple(rows)


def ranks_text(rows: tuple[RankRow, ...]) -> str:
    """'ranks: 0 waited 12% at 1,200 samples/s (p95 4.10 ms); 1 waited 45% ... straggler' ('' for one rank)."""
    if len(rows) < 2:
        return ""
    said = []
    for row in rows:
        wait = "" if row.exposed_wait is None else f" waited {row.exposed_wait:.0%}"
        rate = f" at {three_digits(row.samples_per_second)} samples/s"
        bound = f", most in {row.bound_stage}" if row.bound_stage and row.exposed_wait else ""
        said.append(
            f"{row.rank}{wait}{rate} (p95 {format_seconds(row.wait_p95)}{bound})"
            + (", straggler" if row.straggler else "")
        )
    return "ranks: " + "; ".join(said)
