"""What the telemetry says to do: a verdict on the rank that waits most, and recommendations. Pure, no I/O.

The verdict judges each rank's *exposed wait*: the share of its loop's steady-state time spent
blocked in ``next()`` (a pass's start-up, its iter() and first batch, is measured apart), and follows
the rank that waits most, since under DDP that rank sets the step. The loop is *input-bound* past
:data:`INPUT_BOUND_SHARE` (10%): with workers fetching ahead, a loop that keeps up waits close to
nothing, so a few percent is noise; past 10% the accelerator idles a tenth of the time, and removing
the wait speeds training up by ``1 / (1 - share)`` (1.8x at 44%). A loop that does nothing between
batches (no training step) waits by design and is told so; a pass whose start-up took most of it is
*start-up*; else the loop is *compute-bound*. Reading a :class:`~uc_jupyter.data.Mix`, an input-bound
or no-work verdict names the source that rank waited on most (:mod:`uc_jupyter.widgets.sources`).

Recommendations, per rank and most effective first, come only from what the Snapshot measured:

- the cache: a budget below the data a pass reads means an LRU cache re-downloads every epoch;
- the workers: none (the loop decodes between its own steps), some idle while others work (their
  shards ran out), waiting for storage (their processes on CPU under half the time: more reads in
  flight), all of them busy (more workers, up to the CPUs; past them, cheaper items: for files smaller
  ones, for tables fewer columns). The share is CPU time over wall time: on a machine with more
  runnable threads than cores a decoding worker reads lower than it is busy;
- fetch, when it is the bound stage and the store tells when it answered
  (:mod:`uc_jupyter.widgets.reads`): latency-bound reads get the window the loop's pace needs (the
  dataset's ``prefetch=``, with the exposed wait expected of it), bandwidth-bound ones fewer bytes
  (more reads at once would share the link); without those times, a few long stalls (a median wait
  far below the mean) call for fetching further ahead, steady waits for more throughput;
- start-up: workers started anew each pass (``persistent_workers=True`` starts them once).

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
from typing import Literal

from uc_jupyter.telemetry.model import EXPOSED_STAGES, MADE_STAGES, MAIN_WORKER, Sample, Snapshot, waits_most
from uc_jupyter.widgets.cache_advice import cache_advice
from uc_jupyter.widgets.reads import Reads
from uc_jupyter.widgets.sources import waited_on
from uc_jupyter.widgets.units import format_bytes, format_seconds, shares_text, three_digits

__all__ = [
    "INPUT_BOUND_SHARE",
    "NO_WORK_SECONDS",
    "STALL_RATIO",
    "WAITING_WORKERS",
    "Verdict",
    "VerdictKind",
    "advise",
    "skipped_text",
    "straggler",
    "verdict",
]

INPUT_BOUND_SHARE = 0.10
# A loop whose own time between batches is mostly below this (its median; and in all a tenth of its
# waits) runs no training step.
NO_WORK_SECONDS = 0.001
# Workers on CPU less than this share of their time (while the loop waits) are waiting for storage.
WAITING_WORKERS = 0.5
# Waits are "a few long stalls" when the median wait is below this share of the mean wait.
STALL_RATIO = 0.25
_NO_WORKERS_SUGGESTION = 4


VerdictKind = Literal["", "input-bound", "compute-bound", "no-work", "start-up"]


@dataclass(frozen=True)
class Verdict:
    """What holds the loop back, judged on the rank that waits most (under DDP it sets the step).

    ``share`` is that rank's exposed wait (None before one was measured), ``rank`` that rank when
    there are several, ``kind`` the cause named in ``text``.
    """

    share: float | None
    input_bound: bool
    text: str
    kind: VerdictKind = ""
    rank: int | None = None


def verdict(figures: Snapshot, *, scope: str = "") -> Verdict:
    """The verdict on ``figures`` (a pass's own or cumulative); ``scope`` ("epoch 2") ends the sentence.

    The causes, in the order they are judged: *no-work* (the loop does nothing between batches, so it
    waits by design), *input-bound* (the steady state waits over 10%), *start-up* (starting the pass
    took most of its time), else *compute-bound*. Start-up (iter(), the first batch) is left out of
    the steady state's share, and said apart.
    """
    loops = figures.loops()
    if not loops:
        return Verdict(None, False, "")
    where = f" in {scope}" if scope else " of the time"
    shares = figures.exposed_waits()
    if not shares:  # only first batches yet: all there is to say is how long they took to start
        rank = max(loops, key=lambda r: loops[r].startup)
        startup = loops[rank].startup
        return Verdict(None, False, f"start-up: the first batch took {format_seconds(startup)}", "start-up", rank)
    rank = waits_most(shares)
    loop, share = loops[rank], shares[rank]
    who = f"rank {rank}" if len(loops) > 1 else "the loop"
    others = _others(shares, rank, len(loops))
    if share > INPUT_BOUND_SHARE and _no_step(loop):
        rate = _rate(loop)
        text = (
            f"no training step: {who} does nothing between batches, so waiting for data {share:.0%}{where} "
            f"is expected{f'; the loader alone delivers {rate}' if rate else ''}{_slow_source(figures, rank)}"
        )
        return Verdict(share, False, text, "no-work", rank if len(loops) > 1 else None)
    ranked = rank if len(loops) > 1 else None
    if share > INPUT_BOUND_SHARE:
        over = f"over {INPUT_BOUND_SHARE:.0%}: data loading holds training back"
        stages = shares_text(_named_stages(figures, loop))  # where the wait went, when the stages are timed
        text = (
            f"input-bound: {who} waited for data {share:.0%}{where} ({f'{stages}; ' if stages else ''}{over})"
            f"{_slow_source(figures, rank)}{others}"
        )
        return Verdict(share, True, text, "input-bound", ranked)
    steady = _steady_seconds(loop)
    if loop.startup > steady:
        took, of = format_seconds(loop.startup), format_seconds(loop.startup + steady)
        text = (
            f"start-up: starting the pass took {took} of {of} (workers, listing, first files); after it {who} "
            f"waited for data {share:.0%}"
        )
        return Verdict(share, False, text, "start-up", ranked)
    text = f"compute-bound: {who} waited for data {share:.0%}{where}; data keeps up{others}"
    return Verdict(share, False, text, "compute-bound", ranked)


def _slow_source(figures: Snapshot, rank: int) -> str:
    """'; mostly for main.ml.crawl (92% of the wait, 25% of the samples)': the source of a Mix that
    ``rank``'s loop waited on most (:mod:`uc_jupyter.widgets.sources`), '' for a single dataset."""
    slow = waited_on(figures.of_rank(rank))
    if slow is None or slow.wait is None:
        return ""
    return f"; mostly for {slow.name} ({slow.wait:.0%} of the wait, {slow.share:.0%} of the samples)"


def _named_stages(figures: Snapshot, loop: Sample) -> dict[str, float]:
    """The loop's stage shares, fetch named 'latency-bound fetch' or 'bandwidth-bound fetch' when
    it is the bound stage and its reads say which (:mod:`uc_jupyter.widgets.reads`)."""
    shares = loop.exposed_by_stage()
    if loop.bound_stage() != "fetch":
        return shares
    bound = Reads.of(loop, _workers(figures, loop.rank)).bound
    return {(f"{bound}-bound fetch" if bound and stage == "fetch" else stage): v for stage, v in shares.items()}


def _workers(figures: Snapshot, rank: int) -> list[Sample]:
    """The samples of ``rank``'s streams (its worker processes, or its loop's own process)."""
    return [s for (r, w), s in sorted(figures.samples.items()) if r == rank and w != MAIN_WORKER]


def _no_step(loop: Sample) -> bool:
    """The loop does nothing between batches (no training step): its waits are its design."""
    # The median, not the mean: on a loaded machine a loop that does nothing still loses the CPU now
    # and then between two batches (a few ms each), which moves the mean, not the median.
    return loop.between.quantile(0.5) < NO_WORK_SECONDS and loop.between.total < 0.1 * loop.fetch.total


def _steady_seconds(loop: Sample) -> float:
    """The loop's time after its passes' start-up: its waits past each first batch, and its steps."""
    return max(0.0, loop.fetch.total - loop.first_waits) + loop.between.total


def _others(shares: dict[int, float], rank: int, ranks: int) -> str:
    """'; rank 0 waited 12%' or '; the other 3 ranks 5%-12%': how the rest compare with the headline's."""
    rest = sorted(share for r, share in shares.items() if r != rank)
    if not rest:
        return ""
    if ranks == 2:
        (other,) = (r for r in shares if r != rank)
        return f"; rank {other} waited {rest[0]:.0%}"
    span = f"{rest[0]:.0%}" if f"{rest[0]:.0%}" == f"{rest[-1]:.0%}" else f"{rest[0]:.0%}-{rest[-1]:.0%}"
    return f"; the other {len(rest)} ranks {span}"


def _rate(loop: Sample) -> str:
    return f"{three_digits(loop.samples / (loop.time - loop.started))} samples/s" if loop.time > loop.started else ""


def straggler(waits: dict[int, float]) -> int | None:
    """The one rank that holds the others back: its exposed wait is past :data:`INPUT_BOUND_SHARE`
    and at least twice every other rank's (None with one rank, or when no rank stands out).

    Example:
        >>> straggler({0: 0.12, 1: 0.45}), straggler({0: 0.44, 1: 0.45}), straggler({0: 0.02, 1: 0.08})
        (1, None, None)
    """
    if len(waits) < 2:
        return None
    rank = waits_most(waits)
    others = max(share for r, share in waits.items() if r != rank)
    return rank if waits[rank] > INPUT_BOUND_SHARE and waits[rank] >= 2 * others else None


def advise(figures: Snapshot, *, cpus: int | None = None) -> tuple[str, ...]:
    """What to change, most effective first, per rank ("rank 1: ..." when there are several).

    ``figures`` are one pass's own (see :func:`uc_jupyter.widgets.passes.since`) or a whole run's;
    ``cpus`` is how many CPUs the machine gives the loaders (None: unknown, no cap); ranks are taken
    to share them (a notebook's rank pool runs on the kernel's machine), so each rank's workers get
    an equal part.
    """
    loops = figures.loops()
    share_of_cpus = max(1, cpus // len(loops)) if cpus and loops else cpus
    per_rank: dict[str, list[int]] = {}
    bound = False
    for rank, loop in loops.items():
        lines = _rank_advice(figures, loop, share_of_cpus)
        bound = bound or lines is not None
        for line in lines or ():
            per_rank.setdefault(line, []).append(rank)
    if not per_rank:
        if bound or figures.exposed_wait is None:
            return ()
        return ("nothing to change in data loading: a faster training step is what speeds this loop up",)
    if len(loops) == 1:
        return tuple(per_rank)
    named = tuple(f"{_ranks(owners, len(loops))}: {line}" for line, owners in per_rank.items())
    waits = figures.exposed_waits()
    slow = straggler(waits)
    if slow is None:
        return named
    others = max(share for r, share in waits.items() if r != slow)
    shard = figures.shard_sizes().get(slow)
    holds = f" (its shard: {shard:,} items)" if shard else ""
    said = (
        f"rank {slow} is the straggler: it waits {waits[slow]:.0%}, the others at most {others:.0%}, and every "
        f"rank's step waits for it; look at its data{holds} or its machine first"
    )
    return (said, *named)


def skipped_text(figures: Snapshot) -> str:
    """'12 files skipped (...)' when the workers left files out of their shards, else ''."""
    count = figures.skipped
    if not count:
        return ""
    return f"{count:,} file{'' if count == 1 else 's'} skipped (not images, or outside include/exclude)"


def _rank_advice(figures: Snapshot, loop: Sample, cpus: int | None) -> list[str] | None:
    """The lines for one rank; None when nothing holds its loop back (it is compute-bound)."""
    share = loop.exposed_wait
    steady = _steady_seconds(loop)
    workers = _workers(figures, loop.rank)
    if share is None or share <= INPUT_BOUND_SHARE:
        if loop.startup <= steady:
            return None
        if loop.worker_starts and not loop.persistent_workers:
            return [
                f"starting the pass took {format_seconds(loop.startup)} (its workers start anew each epoch): "
                "persistent_workers=True starts them once, for every epoch"
            ]
        return []  # the first files took the time, or workers that already persist: no knob for it
    if _no_step(loop):
        return []  # no training step: the wait is the loop's design, no knob shortens it
    lines = []
    cache = cache_advice(figures, workers)
    if cache:
        lines.append(cache)
    lines.append(_worker_advice(loop, workers, share, cpus, figures.worker_cpu_share(loop.rank)))
    return lines


def _worker_advice(
    loop: Sample, workers: Sequence[Sample], share: float, cpus: int | None, on_cpu: float | None
) -> str:
    # The loop reports a queue per worker process; none: the streams run in its own process (num_workers=0).
    depths = loop.worker_queue_depths
    count = len(depths)
    waited = f"the loop still waits {share:.0%} of the time"
    stages = loop.exposed_by_stage()
    if count == 0:
        suggestion = min(_NO_WORKERS_SUGGESTION, cpus) if cpus else _NO_WORKERS_SUGGESTION
        effect = _effect(loop, 0, suggestion, share)
        return f"raise num_workers to {suggestion}: data loads inside the training loop, between its steps{effect}"
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
    bound = loop.bound_stage()
    if bound and bound != "other":
        return _stage_advice(loop, bound, stages, count, cpus, share, workers)
    if on_cpu is not None and on_cpu < WAITING_WORKERS:
        return (
            f"the workers wait for their data: on CPU {on_cpu:.0%} of the time, they spend the rest waiting for "
            "storage; keep more reads in flight (the dataset's prefetch=, or more workers)"
        )
    fetch = loop.fetch
    # Stalls say "fetch further ahead" only when the workers' CPU time is not known: busy workers
    # (decoding) need more of them, whatever the shape of the waits.
    if on_cpu is None and fetch.count and fetch.quantile(0.5) < STALL_RATIO * fetch.mean:
        return (
            f"waits are a few long stalls (median {format_seconds(fetch.quantile(0.5))}, p99 "
            f"{format_seconds(fetch.quantile(0.99))}): fetch further ahead with a larger prefetch_factor, "
            "or the dataset's prefetch= for downloads"
        )
    files = _reads_files(workers)
    if cpus is not None and count >= cpus:
        return _cheaper(cpus, waited, files)
    suggestion = _more_workers(loop, count, cpus, share)
    rate = _rate(loop)
    busy = f"{count} busy worker{'' if count == 1 else 's'}" + (
        f" deliver{'s' if count == 1 else ''} {rate}" if rate else ""
    )
    busy += f" (on CPU {on_cpu:.0%} of the time)" if on_cpu is not None else ""
    return f"raise num_workers to {suggestion}: {busy} and {waited}"


def _stage_advice(
    loop: Sample,
    bound: str,
    stages: dict[str, float],
    count: int,
    cpus: int | None,
    share: float,
    workers: Sequence[Sample],
) -> str:
    """The change for the stage that caused most of the wait, with the seconds it measured and the
    exposed wait more workers are expected to leave (:func:`_effect`)."""
    files = _reads_files(workers)
    made = dict(zip(MADE_STAGES, loop.made, strict=True))
    batches = max(loop.batches, 1)
    where = f"{shares_text(stages)} of the wait"
    on = f"on {count} worker{'' if count == 1 else 's'}"
    if bound == "transfer":
        making = sum(loop.made) / batches
        moving = loop.exposed[EXPOSED_STAGES.index("transfer")] / max(loop.between.count, 1)
        if making < moving:  # small batches: handing them over costs more than making them
            step = loop.between.mean
            alone = f" (exposed wait {share:.0%} -> about {making / (making + step):.0%})" if making + step > 0 else ""
            return (
                f"moving each batch from a worker to the loop takes longer than making it ({format_seconds(moving)} "
                f"against {format_seconds(making)}; {where}): num_workers=0 makes them in the loop{alone}, or "
                "larger batches spread the cost"
            )
        return (
            f"moving batches from the workers to the loop is most of the wait ({where}): return tensors or NumPy "
            "arrays from the transform (they travel through shared memory, Python objects are pickled), or "
            "smaller batches"
        )
    per_batch = format_seconds(made.get(bound, 0.0) / batches)
    if bound == "collate":
        said = f"collate takes {per_batch} per batch {on} ({where})"
        return f"{said}: a lighter collate_fn (stack tensors, not Python lists), or more workers"
    suggestion = _more_workers(loop, count, cpus, share)
    reads = Reads.of(loop, workers)
    if bound == "fetch" and reads.bound is not None:  # more reads in flight cost no CPU: judged first
        return _fetch_advice(loop, reads, count, suggestion, share, where)
    if suggestion <= count:  # every CPU runs a worker already: only cheaper items help
        return _cheaper(count, f"{bound} takes {per_batch} per batch ({where})", files)
    effect = _effect(loop, count, suggestion, share)
    if bound == "fetch":
        source = "storage or the cache" if files else "the table's rows"
        return (
            f"keep more reads in flight: fetch waits {per_batch} per batch for {source} {on} ({where}); raise "
            f"num_workers from {count} to {suggestion}{effect}, or the dataset's prefetch= (more downloads per worker)"
        )
    return f"raise num_workers from {count} to {suggestion}: {bound} takes {per_batch} per batch {on} ({where}){effect}"


def _fetch_advice(loop: Sample, reads: Reads, count: int, suggestion: int, share: float, where: str) -> str:
    """Fetch caused most of the wait, and the reads say why (:mod:`uc_jupyter.widgets.reads`):
    latency-bound, the window to ask for and the exposed wait expected of it; bandwidth-bound, what
    lowers the bytes (more reads in flight would share the same link)."""
    if reads.bound == "bandwidth":
        return (
            f"fetch is bandwidth-bound ({where}): reads spend {1 - reads.answer_share:.0%} of their time receiving "
            f"bytes, {format_bytes(reads.throughput)}/s in all with {reads.in_flight:.1f} in flight, and more reads "
            "at once share the same link: read fewer bytes per item (smaller or compressed files), keep them in "
            "the cache for the next epochs, or read from storage closer to this machine"
        )
    needed = max(reads.needed(), math.ceil(reads.in_flight) + 1)
    window = reads.per_stream(needed)  # per stream: the dataset's prefetch= (the rank's in flight: all streams')
    asked = window * max(1, reads.streams)
    expected = _expected_wait(loop, count, count, fetch_scale=min(1.0, reads.in_flight / asked))
    effect = f" (exposed wait {share:.0%} -> about {expected:.0%})" if expected is not None else ""
    workers = (
        f", or num_workers from {count} to {suggestion}{_effect(loop, count, suggestion, share)}"
        if suggestion > count
        else ""
    )
    return (
        f"fetch is latency-bound ({where}): each read waits {format_seconds(reads.latency)} for the store's "
        f"answer ({reads.answer_share:.0%} of it) with {reads.in_flight:.1f} in flight on average, and the loop's "
        f"pace needs about {needed}: raise the dataset's prefetch= to {window} (reads in flight "
        f"per worker){effect}{workers}"
    )


def _reads_files(workers: Sequence[Sample]) -> bool:
    """Whether the streams read files (a table's count rows, never hits or misses): file advice fits."""
    return any(w.hits or w.misses for w in workers)


def _cheaper(cpus: int, why: str, files: bool) -> str:
    cheaper = "smaller files, a lighter transform" if files else "fewer columns, a filter, a lighter transform"
    return (
        f"all {cpus} CPUs run a worker and {why}: make each item cheaper to load ({cheaper}) "
        "or use a machine with more CPUs"
    )


def _more_workers(loop: Sample, count: int, cpus: int | None, share: float) -> int:
    """The workers to suggest: the fewest, at most twice as many (or 4 from none) and at most the CPUs,
    expected to bring the wait under :data:`INPUT_BOUND_SHARE`; without stage times, as many as the
    throughput needs (it must grow by ``1 / (1 - share)``)."""
    most = 2 * count if count else _NO_WORKERS_SUGGESTION
    if cpus:
        most = min(most, cpus)
    for then in range(count + 1, most + 1):
        expected = _expected_wait(loop, count, then)
        if expected is not None and expected <= INPUT_BOUND_SHARE:
            return then
    if _expected_wait(loop, count, most) is not None:
        return max(most, count)
    needed = min(math.ceil(count / (1.0 - share)), 2 * count)
    return min(max(needed, count + 1), cpus) if cpus else max(needed, count + 1)


def _expected_wait(loop: Sample, now: int, then: int, *, fetch_scale: float = 1.0) -> float | None:
    """The exposed wait expected with ``then`` workers instead of ``now``, and the fetch stage's
    seconds scaled by ``fetch_scale`` (more reads in flight), from the stage times: each batch takes
    ``P`` seconds to make (its stages' seconds; ``P'`` after the change) and ``then`` workers make
    one every ``P' / then``; the loop's step ``S`` hides that much, the transfer stays. With workers
    already, the measured wait shrinks by what the change saves (``P / now - P' / then``). None
    without stage times.

    Example:
        >>> from uc_jupyter.telemetry.model import Histogram
        >>> loop = Sample(rank=0, worker=-1, seq=1, time=2.0, batches=10, made=(0.0, 0.4, 0.0),
        ...               between=Histogram.of([0.01] * 10), exposed=(0.0, 0.3, 0.0, 0.0, 0.0))
        >>> round(_expected_wait(loop, 1, 2), 2), round(_expected_wait(loop, 1, 4), 2)  # 30 ms a batch -> 10, 0
        (0.5, 0.0)
    """
    steps = loop.between.count
    making = sum(loop.made)
    if not steps or making <= 0 or then <= 0:
        return None
    per_batch, step = making / max(loop.batches, 1), loop.between.mean
    changed = (making - (1.0 - fetch_scale) * loop.made[MADE_STAGES.index("fetch")]) / max(loop.batches, 1)
    transfer = loop.exposed[EXPOSED_STAGES.index("transfer")] / steps
    if now == 0:
        wait = max(0.0, changed / then - step)
    else:
        made_wait = sum(loop.exposed) / steps - transfer
        wait = max(0.0, made_wait - (per_batch / now - changed / then))
    wait += transfer
    return wait / (wait + step) if wait + step > 0 else None


def _effect(loop: Sample, now: int, then: int, share: float) -> str:
    """'; exposed wait 45% -> about 8%' when the stage times say what ``then`` workers would leave."""
    expected = _expected_wait(loop, now, then)
    return f" (exposed wait {share:.0%} -> about {expected:.0%})" if expected is not None else ""


def _ranks(owners: Sequence[int], world: int) -> str:
    if len(owners) == world:
        return "every rank"
    return ("rank " if len(owners) == 1 else "ranks ") + ", ".join(map(str, owners))
