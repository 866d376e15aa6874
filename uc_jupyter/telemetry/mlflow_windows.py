"""What one MLflow window measures: a rank's loader since the previous window, or the job's worst rank.

A window is the batches a loader delivered since the previous one (the rank's cumulative figures in a
Snapshot, minus those at the previous window); its values are the means, variances and p95 of that
window and its step the batches delivered so far. :class:`RankWindows` measures one rank (the keys of
:func:`metric_names`); :class:`JobWindows` measures every rank's window at once and keeps the one that
waited most per batch (the keys of :data:`JOB_METRICS`): under DDP the slowest rank sets the step, so
the job's maximum exposed wait is what data loading costs the job (Ray Train's "max exposed data
loading time"; 0 is ideal).

Example:
    >>> from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot
    >>> def loop(rank, wait):
    ...     return Sample(rank=rank, worker=MAIN_WORKER, seq=1, time=1.0, batches=5, samples=20,
    ...                   fetch=Histogram.of([wait] * 5), between=Histogram.of([0.02] * 4))
    >>> snap = Snapshot({(0, MAIN_WORKER): loop(0, 0.001), (1, MAIN_WORKER): loop(1, 0.01)}, time=1.0)
    >>> values, step = JobWindows().close(snap)
    >>> values["max_exposed_wait_rank"], round(values["max_exposed_wait_seconds"], 4), step
    (1.0, 0.0125, 5)
"""

from __future__ import annotations

from typing import NamedTuple, TypeVar

from uc_jupyter.telemetry.model import EXPOSED_STAGES, MAIN_WORKER, Histogram, Sample, Snapshot, wait_share

__all__ = ["JOB_METRICS", "JobWindows", "RankWindows", "metric_names"]

_PREFIX = "dataloader"
_N = TypeVar("_N", int, float)

# The job's window: its worst rank's exposed wait per batch, its share, and which rank it was.
JOB_METRICS = {
    "max_exposed_wait_seconds": f"{_PREFIX}/max_exposed_wait_seconds",
    "max_exposed_wait": f"{_PREFIX}/max_exposed_wait",
    "max_exposed_wait_rank": f"{_PREFIX}/max_exposed_wait_rank",
}


class _RankNames(dict[str, str]):
    """A rank's metric keys; a Mix's per-source values (``source_share/2``) name their own."""

    def __init__(self, rank: int, names: dict[str, str]) -> None:
        super().__init__(names)
        self.rank = rank

    def __missing__(self, key: str) -> str:
        if key.startswith(("source_share/", "source_epoch/", "source_exposed_seconds/")):
            return f"{_PREFIX}/{key}/rank_{self.rank}"
        raise KeyError(key)


def metric_names(rank: int) -> dict[str, str]:
    """The MLflow keys of rank ``rank``'s windows, by value name (the reference runtime's first four);
    a Mix's sources add ``dataloader/source_share/<i>/rank_<rank>`` (the share of the window's samples
    source ``i`` gave), ``dataloader/source_epoch/<i>/rank_<rank>`` (its own epoch) and
    ``dataloader/source_exposed_seconds/<i>/rank_<rank>`` (the exposed wait per batch source ``i``
    caused: the wait the making stages caused, split in proportion to the seconds each source's stages
    took in the window)."""
    return _RankNames(
        rank,
        {
            "fetch": f"{_PREFIX}/fetch_seconds/rank_{rank}",
            "fetch_variance": f"{_PREFIX}/fetch_seconds_variance/rank_{rank}",
            "between": f"{_PREFIX}/between_next_seconds/rank_{rank}",
            "between_variance": f"{_PREFIX}/between_next_seconds_variance/rank_{rank}",
            "fetch_p95": f"{_PREFIX}/fetch_seconds_p95/rank_{rank}",
            "samples_per_second": f"{_PREFIX}/samples_per_second/rank_{rank}",
            "cache_hit_rate": f"{_PREFIX}/cache_hit_rate/rank_{rank}",
            "exposed_wait": f"{_PREFIX}/exposed_wait/rank_{rank}",
            "startup_seconds": f"{_PREFIX}/startup_seconds/rank_{rank}",
            "exposed_wait_seconds": f"{_PREFIX}/exposed_wait_seconds/rank_{rank}",
            **{f"exposed_{stage}": f"{_PREFIX}/exposed_seconds/{stage}/rank_{rank}" for stage in EXPOSED_STAGES},
        },
    )


class _Totals(NamedTuple):
    """A rank's cumulative counters a window is measured against."""

    fetch: Histogram
    between: Histogram
    samples: int
    hits: int
    misses: int
    time: float  # the snapshot's
    setup: float
    first_waits: float
    stages: tuple[float, ...]  # exposed seconds per stage
    sources: tuple[int, ...]  # a Mix's samples per source, over the rank's streams
    source_epochs: tuple[int, ...]  # a Mix's sources: each one's own epoch
    source_seconds: tuple[float, ...]  # a Mix's sources: seconds their stages took, over the rank's streams


class RankWindows:
    """Rank ``rank``'s windows, the first from ``baseline`` (the loader's snapshot when logging began;
    None: from the loader's start)."""

    def __init__(self, rank: int, baseline: Snapshot | None = None) -> None:
        self.rank = rank
        found = None if baseline is None else self._loop_totals(baseline)
        self._previous: _Totals | None = None if found is None else found[1]

    def close(self, snapshot: Snapshot) -> tuple[dict[str, float], int] | None:
        """The window since the previous one, at ``snapshot``: its values by name and its step
        (None: no new batch)."""
        found = self._loop_totals(snapshot)
        if found is None:
            return None
        loop, now = found
        before = self._previous
        if before is not None and now.fetch.count < before.fetch.count:
            before = None  # counters that went back: the rank's next loader, measured from its start
        if before is not None:
            fetch, between = now.fetch.minus(before.fetch), now.between.minus(before.between)
            samples, hits, misses = now.samples - before.samples, now.hits - before.hits, now.misses - before.misses
            elapsed, setup, first_waits = (
                now.time - before.time,
                now.setup - before.setup,
                now.first_waits - before.first_waits,
            )
            stages = tuple(a - b for a, b in zip(now.stages, before.stages, strict=True))
            sources = _minus(now.sources, before.sources)
            source_seconds = _minus(now.source_seconds, before.source_seconds)
        else:
            fetch, between, samples, hits, misses = now.fetch, now.between, now.samples, now.hits, now.misses
            elapsed, setup, first_waits, stages = now.time - loop.started, now.setup, now.first_waits, now.stages
            sources, source_seconds = now.sources, now.source_seconds
        if fetch.count == 0:
            return None
        self._previous = now
        values = {
            "fetch": fetch.mean,
            "fetch_variance": fetch.variance,
            "between": between.mean,
            "between_variance": between.variance,
            "fetch_p95": fetch.quantile(0.95),
            "samples_per_second": samples / elapsed if elapsed > 0 else 0.0,
        }
        if hits + misses:
            values["cache_hit_rate"] = hits / (hits + misses)
        exposed = wait_share(max(0.0, fetch.total - first_waits), between.total)
        if exposed is not None:
            values["exposed_wait"] = exposed
        if setup + first_waits > 0:
            values["startup_seconds"] = setup + first_waits
        steady = between.count  # the window's batches past their pass's first
        if steady:
            values["exposed_wait_seconds"] = max(0.0, fetch.total - first_waits) / steady
            if any(stages):  # the stages were timed (batches of a dataset of ours)
                values.update(
                    {f"exposed_{stage}": max(0.0, x) / steady for stage, x in zip(EXPOSED_STAGES, stages, strict=True)}
                )
        mixed = sum(sources)
        if mixed:  # a Mix: what each source gave of the window's samples, and its own epoch
            values.update({f"source_share/{i}": count / mixed for i, count in enumerate(sources)})
            values.update({f"source_epoch/{i}": float(epoch) for i, epoch in enumerate(now.source_epochs)})
            values.update(_source_waits(stages, source_seconds, steady))
        return values, loop.batches

    def _loop_totals(self, snapshot: Snapshot) -> tuple[Sample, _Totals] | None:
        """This rank's loop sample in ``snapshot`` and its cumulative totals (None: no loop yet)."""
        mine = [s for s in snapshot.samples.values() if s.rank == self.rank]
        loop = next((s for s in mine if s.worker == MAIN_WORKER), None)
        if loop is None:
            return None
        hits, misses = sum(s.hits for s in mine), sum(s.misses for s in mine)
        own = Snapshot({s.producer: s for s in mine}, snapshot.time)  # this rank's: its Mix sources summed
        totals = _Totals(
            loop.fetch,
            loop.between,
            loop.samples,
            hits,
            misses,
            snapshot.time,
            loop.setup,
            loop.first_waits,
            loop.exposed,
            own.source_samples,
            own.source_epochs,
            own.source_seconds,
        )
        return loop, totals


def _minus(now: tuple[_N, ...], before: tuple[_N, ...]) -> tuple[_N, ...]:
    """Per-source counts or seconds since ``before`` (none before: all of ``now``)."""
    if len(before) != len(now):
        return now
    return tuple(a - b for a, b in zip(now, before, strict=True))


def _source_waits(stages: tuple[float, ...], seconds: tuple[float, ...], steady: int) -> dict[str, float]:
    """Each Mix source's exposed wait per steady batch of the window: the exposed seconds of the
    stages a source's time is made of (fetch, decode), split in proportion to the seconds each
    source's stages took (none: the stages or the sources were not timed in the window).

    Example:
        >>> _source_waits((3.0, 1.0, 0.5, 0.0, 0.0), (0.5, 1.5), 4)
        {'source_exposed_seconds/0': 0.25, 'source_exposed_seconds/1': 0.75}
    """
    spent = sum(seconds)
    making = sum(max(0.0, stages[EXPOSED_STAGES.index(stage)]) for stage in ("fetch", "decode"))
    if not steady or spent <= 0 or making <= 0:
        return {}
    return {f"source_exposed_seconds/{i}": making * max(0.0, s) / spent / steady for i, s in enumerate(seconds)}


class JobWindows:
    """Every rank's windows at once, the first from ``baseline`` (the job's snapshot when logging
    began; None: from each loader's start); a window's values are its worst rank's."""

    def __init__(self, baseline: Snapshot | None = None) -> None:
        self._baseline = baseline
        self._ranks: dict[int, RankWindows] = {}

    def close(self, snapshot: Snapshot) -> tuple[dict[str, float], int] | None:
        """The window since the previous one: the exposed wait per batch of the rank that waited
        most, its share and the rank (None: no rank delivered a batch past its pass's first);
        its step, the most batches a rank has delivered."""
        worst: tuple[float, int, float | None] | None = None
        step = 0
        for rank in sorted({s.rank for s in snapshot.samples.values() if s.worker == MAIN_WORKER}):
            windows = self._ranks.get(rank)
            if windows is None:
                windows = self._ranks[rank] = RankWindows(rank, self._baseline)
            found = windows.close(snapshot)
            if found is None:
                continue
            values, batches = found
            step = max(step, batches)
            seconds = values.get("exposed_wait_seconds")
            if seconds is not None and (worst is None or seconds > worst[0]):
                worst = (seconds, rank, values.get("exposed_wait"))
        if worst is None:
            return None
        seconds, rank, share = worst
        values = {"max_exposed_wait_seconds": seconds, "max_exposed_wait_rank": float(rank)}
        if share is not None:
            values["max_exposed_wait"] = share
        return values, step
