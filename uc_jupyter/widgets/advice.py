"""What the telemetry says to do: a verdict from the loop's wait share, and recommendations. Pure, no I/O.

The verdict: the training loop is *input-bound* when it waits for data more than
:data:`INPUT_BOUND_SHARE` (10%) of its time. With workers fetching ahead, a loop that keeps up waits
close to nothing (its next batch is ready when it asks), so a few percent is start-up and noise;
past 10% the accelerator idles a tenth of the time, and removing the wait speeds training up by
``1 / (1 - share)`` (1.8x at 44%), which is worth acting on.

Recommendations, per rank and most effective first, come only from what the Snapshot measured:

- the cache: a budget below the data a pass reads means an LRU cache re-downloads every epoch;
- the workers: none (the loop decodes between its own steps), all of them busy (more workers, up to
  the CPUs), some idle while others work (their shards ran out);
- fetch latency vs throughput: a few long stalls (a median wait far below the mean) call for
  fetching further ahead, steady waits for more throughput.

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> loop = Sample(rank=0, worker=-1, seq=1, time=10.0, started=0.0, batches=100, samples=800,
    ...               fetch=Histogram.of([0.04] * 100), between=Histogram.of([0.05] * 99),
    ...               worker_queue_depths=(2, 2))
    >>> workers = {(0, w): Sample(rank=0, worker=w, seq=1, time=10.0, files=400, hits=400) for w in (0, 1)}
    >>> snap = Snapshot({(0, -1): loop, **workers}, time=10.0)
    >>> verdict(snap).text
    'input-bound: the loop waited for data 45% of the time (over 10%: data loading holds training back)'
    >>> advise(snap, cpus=8)
    ('raise num_workers to 4: 2 busy workers deliver 80.0 samples/s and the loop still waits 45% of the time',)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot, wait_share
from uc_jupyter.widgets.units import format_bytes, format_seconds, three_digits

__all__ = ["INPUT_BOUND_SHARE", "STALL_RATIO", "Verdict", "advise", "skipped_text", "verdict"]

INPUT_BOUND_SHARE = 0.10
# Waits are "a few long stalls" when the median wait is below this share of the mean wait.
STALL_RATIO = 0.25
_NO_WORKERS_SUGGESTION = 4


@dataclass(frozen=True)
class Verdict:
    """The share of the loop's time spent waiting for data (None before any), and what it means."""

    share: float | None
    input_bound: bool
    text: str


def verdict(figures: Snapshot, *, scope: str = "") -> Verdict:
    """The verdict on ``figures`` (a pass's own or cumulative); ``scope`` ("epoch 2") ends the sentence."""
    share = wait_share(figures.fetch.total, figures.between.total)
    where = f" in {scope}" if scope else " of the time"
    if share is None:
        return Verdict(None, False, "")
    if share > INPUT_BOUND_SHARE:
        over = f"over {INPUT_BOUND_SHARE:.0%}: data loading holds training back"
        text = f"input-bound: the loop waited for data {share:.0%}{where} ({over})"
        return Verdict(share, True, text)
    return Verdict(share, False, f"compute-bound: the loop waited for data {share:.0%}{where}; data keeps up")


def advise(figures: Snapshot, *, cpus: int | None = None) -> tuple[str, ...]:
    """What to change, most effective first, per rank ("rank 1: ..." when there are several).

    ``figures`` are one pass's own (see :func:`uc_jupyter.widgets.passes.since`) or a whole run's;
    ``cpus`` is how many CPUs the machine gives the loaders (None: unknown, no cap); ranks are taken
    to share them (a notebook's rank pool runs on the kernel's machine), so each rank's workers get
    an equal part.
    """
    ranks = sorted({rank for rank, worker in figures.samples if worker == MAIN_WORKER})
    share_of_cpus = max(1, cpus // len(ranks)) if cpus and ranks else cpus
    per_rank: dict[str, list[int]] = {}
    bound = False
    for rank in ranks:
        lines = _rank_advice(figures, rank, share_of_cpus)
        bound = bound or lines is not None
        for line in lines or ():
            per_rank.setdefault(line, []).append(rank)
    if not per_rank:
        if bound or wait_share(figures.fetch.total, figures.between.total) is None:
            return ()
        return ("nothing to change in data loading: a faster training step is what speeds this loop up",)
    if len(ranks) == 1:
        return tuple(per_rank)
    return tuple(f"{_ranks(owners, len(ranks))}: {line}" for line, owners in per_rank.items())


def skipped_text(figures: Snapshot) -> str:
    """'12 files skipped (...)' when the workers left files out of their shards, else ''."""
    count = figures.skipped
    if not count:
        return ""
    return f"{count:,} file{'' if count == 1 else 's'} skipped (not images, or outside include/exclude)"


def _rank_advice(figures: Snapshot, rank: int, cpus: int | None) -> list[str] | None:
    """The lines for one rank; None when the rank is not input-bound."""
    loop = figures.samples[(rank, MAIN_WORKER)]
    share = wait_share(loop.fetch.total, loop.between.total)
    if share is None or share <= INPUT_BOUND_SHARE:
        return None
    workers = [s for (r, w), s in sorted(figures.samples.items()) if r == rank and w != MAIN_WORKER]
    alone = _longest_alone(loop.fetch)
    rest = wait_share(loop.fetch.total - alone, loop.between.total)
    if alone and rest is not None and rest <= INPUT_BOUND_SHARE:
        # One long wait (workers starting, a cold first file) is all of it: no knob helps the steady state.
        return [
            f"only one batch waited long ({format_seconds(alone)}, most likely the workers starting); without it "
            f"the loop waits {rest:.0%}: nothing to change (persistent_workers=True starts them once)"
        ]
    lines = []
    cache = _cache_advice(figures, workers)
    if cache:
        lines.append(cache)
    lines.append(_worker_advice(loop, workers, share, cpus))
    return lines


def _cache_advice(figures: Snapshot, workers: Sequence[Sample]) -> str:
    hits, misses = sum(w.hits for w in workers), sum(w.misses for w in workers)
    if not misses:
        return ""
    missed = misses / (hits + misses)
    budget = figures.cache_max_bytes
    # The cache is shared by every rank on the machine: the data it must hold is the whole pass's.
    data = sum(s.bytes for s in figures.samples.values() if s.worker != MAIN_WORKER)
    if budget and data > budget:
        return (
            f"cache budget {format_bytes(budget)} < data {format_bytes(data)}: each epoch re-downloads "
            f"{missed:.0%}; raise cache_max_bytes to {format_bytes(_round_up(data * 1.1))}"
        )
    if budget and missed > 0.5:
        return (
            f"cold cache: {missed:.0%} of files were downloaded in this pass; the budget "
            f"{format_bytes(budget)} holds the data ({format_bytes(data)}), so the next epoch reads from the cache"
        )
    if not budget and figures.bytes_downloaded:
        return (
            f"no cache: every epoch downloads {format_bytes(figures.bytes_downloaded)}; cache='always' with "
            f"cache_max_bytes of {format_bytes(_round_up(data * 1.1))} reads the next epochs locally"
        )
    return ""


def _worker_advice(loop: Sample, workers: Sequence[Sample], share: float, cpus: int | None) -> str:
    # The loop reports a queue per worker process; none: the streams run in its own process (num_workers=0).
    depths = loop.worker_queue_depths
    count = len(depths)
    waited = f"the loop still waits {share:.0%} of the time"
    if count == 0:
        suggestion = min(_NO_WORKERS_SUGGESTION, cpus) if cpus else _NO_WORKERS_SUGGESTION
        return f"raise num_workers to {suggestion}: data loads inside the training loop, between its steps"
    # Idle: asked for nothing (all idle is the pass's end, when nothing is asked any more), or no shard.
    idle = [w for w, depth in enumerate(depths) if depth == 0]
    if not idle or len(idle) == count:
        idle = [s.worker for s in workers if s.shard_size == 0 and any(o.shard_size for o in workers)]
    if idle and len(idle) < count:
        listed = ", ".join(map(str, idle[:4])) + (", ..." if len(idle) > 4 else "")
        return (
            f"{len(idle)} of {count} workers have nothing to do (worker {listed}): their shards are empty "
            "or ran out; use fewer workers, or split the data into more files"
        )
    fetch = loop.fetch
    if fetch.count and fetch.quantile(0.5) < STALL_RATIO * fetch.mean:
        return (
            f"waits are a few long stalls (median {format_seconds(fetch.quantile(0.5))}, p99 "
            f"{format_seconds(fetch.quantile(0.99))}): fetch further ahead with a larger prefetch_factor, "
            "or the dataset's prefetch= for downloads"
        )
    if cpus is not None and count >= cpus:
        return (
            f"all {cpus} CPUs run a worker and {waited}: make each item cheaper to load "
            "(smaller files, a lighter transform) or use a machine with more CPUs"
        )
    # Throughput must grow by 1 / (1 - share); at most doubled in one step, the advice follows the result.
    needed = min(math.ceil(count / (1.0 - share)), 2 * count)
    suggestion = min(max(needed, count + 1), cpus) if cpus else max(needed, count + 1)
    rate = f"{three_digits(loop.samples / (loop.time - loop.started))} samples/s" if loop.time > loop.started else ""
    busy = f"{count} busy worker{'' if count == 1 else 's'}" + (
        f" deliver{'s' if count == 1 else ''} {rate}" if rate else ""
    )
    return f"raise num_workers to {suggestion}: {busy} and {waited}"


def _longest_alone(fetch: Histogram) -> float:
    """The longest wait when it is alone in its bucket and 10 times the mean of the others; else 0.

    Buckets are 8 per decade, so the value is the bucket's geometric middle (within 15%).
    """
    used = [i for i, count in enumerate(fetch.counts) if count]
    if len(used) < 2 or fetch.counts[used[-1]] != 1:
        return 0.0
    longest = fetch.quantile(1.0 - 0.5 / fetch.count)
    others = (fetch.total - longest) / (fetch.count - 1)
    return longest if longest > 10 * others else 0.0


def _round_up(count: float) -> int:
    """Up to two significant digits: 660 kB, not 657,800 bytes."""
    if count <= 0:
        return 0
    scale = 10 ** max(int(math.log10(count)) - 1, 0)
    return int(math.ceil(count / scale) * scale)


def _ranks(owners: Sequence[int], world: int) -> str:
    if len(owners) == world:
        return "every rank"
    return ("rank " if len(owners) == 1 else "ranks ") + ", ".join(map(str, owners))
