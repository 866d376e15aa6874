"""Passes of a loader (epochs) as figures of their own: what a pass added to cumulative telemetry. Pure, no I/O.

Producers publish cumulative counters, so a Snapshot taken at a pass's end holds every earlier pass
too. A pass's own figures are the end snapshot minus the snapshot taken when it began
(:func:`since`); the dashboard keeps one :class:`PassRecord` per pass and shows a row per epoch
plus one for all of them (:func:`epoch_rows`), each labelled with what it counts.

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> def loop(t, n):
    ...     return Sample(rank=0, worker=-1, seq=n, time=t, batches=n, samples=4 * n,
    ...                   fetch=Histogram.of([0.01] * n), started=0.0)
    >>> start, end = Snapshot({(0, -1): loop(5.0, 10)}, 5.0), Snapshot({(0, -1): loop(9.0, 30)}, 9.0)
    >>> epoch = since(end, start)
    >>> epoch.batches, epoch.samples_delivered, epoch.samples_per_second
    (20, 80, 20.0)
    >>> rows = epoch_rows([PassRecord("epoch 0", start, end, "done")], end)
    >>> [(row.label, row.state, row.batches) for row in rows]
    [('epoch 0', 'done', 20)]

A pass that resumed mid-epoch from a checkpoint says so: its streams report ``resumed_epoch``, and
the row of that epoch reads "epoch 3 (resumed)" (:meth:`PassRecord.shown_label`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Literal

from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot, waits_most
from uc_jupyter.widgets.units import format_seconds, shares_text, three_digits

__all__ = [
    "CUMULATIVE",
    "SHOWN_PASSES",
    "EpochRow",
    "PassRecord",
    "PassState",
    "epoch_rows",
    "error_line",
    "forget_snapshots",
    "since",
]

PassState = Literal["running", "done", "failed", "stopped"]
CUMULATIVE = "all epochs"  # the label of the row that sums every pass
SHOWN_PASSES = 8  # rows of their own in the epochs table; the cumulative row sums every pass
_COUNTERS = (
    "batches",
    "samples",
    "files",
    "bytes",
    "hits",
    "misses",
    "bytes_downloaded",
    "streamed",
    "retries",
    "cache_evictions",
    "setup",
    "first_waits",
    "cpu_seconds",
    "worker_starts",
    "pinned",
    "reads",
    "read_seconds",
    "answered",
    "answer_seconds",
)


def since(current: Snapshot, start: Snapshot | None) -> Snapshot:
    """What ``current`` holds beyond ``start``: counters and histograms subtracted per producer.

    Gauges (shard sizes, skipped files, queue depths, cache fill and budget) are the current ones. A
    producer that is new, or restarted and counts from zero again (a new worker process), counts
    whole. Rates start at ``start.time``, so ``samples_per_second`` is the pass's own.
    """
    if start is None:
        return current
    samples: dict[tuple[int, int], Sample] = {}
    for key, now in current.samples.items():
        before = start.samples.get(key)
        samples[key] = now if before is None or _restarted(now, before) else _minus(now, before, start.time)
    return Snapshot(MappingProxyType(samples), current.time)


def _restarted(now: Sample, before: Sample) -> bool:
    if any(getattr(now, name) < getattr(before, name) for name in _COUNTERS if name != "cache_evictions"):
        return True
    return any(a < b for a, b in zip(now.fetch.counts, before.fetch.counts, strict=True))


def _minus(now: Sample, before: Sample, began: float) -> Sample:
    counters = {name: getattr(now, name) - getattr(before, name) for name in _COUNTERS}
    if now.cache_evictions < before.cache_evictions:  # the cache was made anew (its counter is the cache's own)
        counters["cache_evictions"] = now.cache_evictions
    counted = replace(
        now,
        fetch=_histogram_minus(now.fetch, before.fetch),
        between=_histogram_minus(now.between, before.between),
        made=_seconds_minus(now.made, before.made),
        exposed=_seconds_minus(now.exposed, before.exposed),
        started=max(now.started, began),
        **counters,
    )
    return _sources_minus(counted, before)


def _sources_minus(now: Sample, before: Sample) -> Sample:
    """A Mix stream's per-source samples and seconds since ``before`` (other sources: all of now's)."""
    if len(now.source_samples) != len(before.source_samples) or len(now.source_seconds) != len(before.source_seconds):
        return now
    samples = tuple(a - b for a, b in zip(now.source_samples, before.source_samples, strict=True))
    return replace(
        now, source_samples=samples, source_seconds=_seconds_minus(now.source_seconds, before.source_seconds)
    )


def _seconds_minus(now: tuple[float, ...], before: tuple[float, ...]) -> tuple[float, ...]:
    # Sums of floats subtracted may end a hair below zero.
    return tuple(max(0.0, a - b) for a, b in zip(now, before, strict=True))


def _histogram_minus(now: Histogram, before: Histogram) -> Histogram:
    delta = now.minus(before)
    # Sums of floats subtracted may end a hair below zero; the counts are exact.
    return Histogram(delta.counts, max(delta.total, 0.0), max(delta.squares, 0.0))


def error_line(error: BaseException) -> str:
    """'Type: message' with the message's first line only (a worker's error carries its whole traceback).

    Example:
        >>> error_line(ValueError("Caught ValueError in DataLoader worker process 0.\\nOriginal Traceback ..."))
        'ValueError: Caught ValueError in DataLoader worker process 0.'
    """
    lines = str(error).strip().splitlines()
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


@dataclass(frozen=True)
class PassRecord:
    """One pass over a loader: its label ("epoch 2"), the snapshots at its start and end, and how it ended.

    ``end`` is None while the pass runs; ``error`` is "Type: message" of a failed pass; ``epoch`` is
    the loader's epoch number when the pass is one (None: a block of work, e.g. a cell on ranks).
    """

    label: str
    start: Snapshot | None
    end: Snapshot | None = None
    state: PassState = "running"
    error: str = ""
    epoch: int | None = None
    total: int | None = None  # the batches the pass delivers, when known
    ran: float | None = None  # seconds it ran, kept when its snapshots are forgotten

    def shown_label(self, current: Snapshot) -> str:
        """The label, marked when the pass resumed mid-epoch from a checkpoint (its streams say so).

        A pass of a known epoch is marked only when a stream resumed that very epoch: a sample left
        from the previous, resumed pass (its workers not yet heard from) does not mark this one. A
        block of work whose epochs are not known (ranks' telemetry in the kernel) names the epoch.

        Example:
            >>> from uc_jupyter.telemetry.model import Sample, Snapshot
            >>> stream = Sample(rank=0, worker=0, seq=1, time=1.0, resumed_epoch=3)
            >>> now = Snapshot({(0, 0): stream}, time=1.0)
            >>> [PassRecord(f"epoch {n}", None, epoch=n).shown_label(now) for n in (3, 4)]
            ['epoch 3 (resumed)', 'epoch 4']
            >>> PassRecord("", None).shown_label(now), PassRecord("2 ranks", None).shown_label(now)
            ('epoch 3 (resumed)', '2 ranks: epoch 3 (resumed)')
        """
        resumed = (self.end if self.end is not None else current).resumed_epochs
        if self.epoch is not None:
            return f"{self.label} (resumed)" if self.epoch in resumed else self.label
        if not resumed:
            return self.label
        epochs = f"epoch {resumed[0]}" if len(resumed) == 1 else "epochs " + ", ".join(map(str, resumed))
        return f"{self.label}: {epochs} (resumed)" if self.label else f"{epochs} (resumed)"

    def figures(self, current: Snapshot) -> Snapshot:
        """This pass's own figures: its end (or ``current`` while it runs) minus its start."""
        return since(self.end if self.end is not None else current, self.start)

    def seconds(self, current: Snapshot) -> float:
        """How long the pass ran: from its start snapshot to its end (or ``current``); without a start,
        from its loops' first sample."""
        if self.ran is not None:
            return self.ran
        end = self.end if self.end is not None else current
        if self.start is not None:
            return max(0.0, end.time - self.start.time)
        return max((loop.time - loop.started for loop in end.loops().values()), default=0.0)

    def progress(self, current: Snapshot) -> str:
        """'running: 40/94 batches, about 12 s left' (done/total and the time left at the pass's own
        rate, when the total is known), or :attr:`status` once it ended.

        Example:
            >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
            >>> def at(t, n):
            ...     loop = Sample(rank=0, worker=-1, seq=n, time=t, batches=n, fetch=Histogram.of([0.1] * n))
            ...     return Snapshot({(0, -1): loop}, time=t)
            >>> PassRecord("epoch 0", at(10.0, 10), total=94).progress(at(14.0, 50))
            'running: 40/94 batches, about 5.40 s left'
        """
        if self.state != "running" or self.total is None:
            return self.status
        done, seconds = self.figures(current).batches, self.seconds(current)
        left = f", about {format_seconds(seconds * (self.total - done) / done)} left" if done and seconds else ""
        return f"running: {done:,}/{self.total:,} batches{left}"

    def line(self, current: Snapshot) -> str:
        """The pass in one line, however short it was: 'epoch 1: 94/94 batches in 0.80 s, 3,700 samples/s,
        exposed wait 12% (fetch 70%, decode 25%, collate 5%), start-up 310 ms' (the wait and its stages
        are the rank's that waits most).

        Example:
            >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
            >>> loop = Sample(rank=0, worker=-1, seq=1, time=10.8, started=10.0, batches=3, samples=96,
            ...               fetch=Histogram.of([0.2, 0.05, 0.05]), between=Histogram.of([0.2, 0.2]),
            ...               setup=0.1, first_waits=0.2, exposed=(0.08, 0.02, 0.0, 0.0, 0.0))
            >>> end = Snapshot({(0, -1): loop}, 10.8)
            >>> print(PassRecord("epoch 1", Snapshot({}, 10.0), end, "done", total=3).line(end))
            epoch 1: 3/3 batches in 800 ms, 120 samples/s, exposed wait 20% (fetch 80%, decode 20%), start-up 300 ms
        """
        figures = self.figures(current)
        batches = f"{figures.batches:,}/{self.total:,}" if self.total is not None else f"{figures.batches:,}"
        parts = [f"{batches} batch{'' if figures.batches == 1 and not self.total else 'es'}"]
        seconds = self.seconds(current)
        if seconds:
            parts[0] += f" in {format_seconds(seconds)}"
            rate = figures.samples_delivered / seconds
            parts.append(f"{rate:,.0f} samples/s" if rate >= 100 else f"{three_digits(rate)} samples/s")
        waits = figures.exposed_waits()
        if waits:
            worst = figures.loops()[waits_most(waits)]
            stages = shares_text(worst.exposed_by_stage()) if waits[worst.rank] >= 0.005 else ""
            parts.append(f"exposed wait {waits[worst.rank]:.0%}" + (f" ({stages})" if stages else ""))
        startup = max((loop.startup for loop in figures.loops().values()), default=0.0)
        if startup:
            parts.append(f"start-up {format_seconds(startup)}")
        if self.state not in ("running", "done"):
            parts.append(self.status)
        return f"{self.shown_label(current)}: " + ", ".join(parts)

    @property
    def status(self) -> str:
        """'running', 'done', 'stopped after 12 batches' or 'failed: ValueError: bad file'."""
        if self.state == "failed":
            return f"failed: {self.error}" if self.error else "failed"
        if self.state == "stopped" and self.end is not None:
            batches = since(self.end, self.start).batches
            return f"stopped after {batches:,} batch{'' if batches == 1 else 'es'}"
        return self.state


@dataclass(frozen=True)
class EpochRow:
    """One row of the epochs table: a pass's own figures, or (``label == CUMULATIVE``) all passes'."""

    label: str
    state: str
    batches: int
    samples: int
    samples_per_second: float
    wait_share: float | None
    fetch_p50: float
    fetch_p95: float
    hit_rate: float | None  # None without a cache (files read in place) or its lookups
    downloaded: int


def forget_snapshots(passes: list[PassRecord], keep: int = SHOWN_PASSES) -> None:
    """Drop the snapshots of passes no row shows any more (all but the first and the last ``keep``).

    A long training run keeps one small record per epoch instead of two snapshots each; the first
    pass's start stays, as the cumulative row's baseline.

    Example:
        >>> from uc_jupyter.telemetry.model import Snapshot
        >>> records = [PassRecord(f"epoch {i}", Snapshot({}, i), Snapshot({}, i + 1), "done") for i in range(12)]
        >>> forget_snapshots(records, keep=8)
        >>> [i for i, r in enumerate(records) if r.start is None]
        [1, 2, 3]
    """
    for index in range(1, len(passes) - keep):
        record = passes[index]
        if record.start is not None or record.end is not None:
            ran = record.seconds(record.end) if record.end is not None else record.ran
            passes[index] = replace(record, start=None, end=None, ran=ran)


def epoch_rows(passes: Sequence[PassRecord], current: Snapshot, *, keep: int = SHOWN_PASSES) -> tuple[EpochRow, ...]:
    """A row per pass (the last ``keep``), then with two passes or more a cumulative row since the first."""
    rows = [_row(record.shown_label(current), record.status, record.figures(current)) for record in passes[-keep:]]
    if len(passes) > 1:
        last = passes[-1]
        total = since(last.end if last.end is not None else current, passes[0].start)
        row = _row(CUMULATIVE, f"{len(passes)} passes", total)
        # The rate over the passes' own time: not the idle time between them (cells apart, minutes apart).
        active = sum(record.seconds(current) for record in passes)
        rows.append(replace(row, samples_per_second=total.samples_delivered / active if active > 0 else 0.0))
    return tuple(rows)


def _row(label: str, state: str, figures: Snapshot) -> EpochRow:
    looked = figures.hits + figures.misses
    p = figures.percentiles()
    return EpochRow(
        label=label,
        state=state,
        batches=figures.batches,
        samples=figures.samples_delivered,
        samples_per_second=figures.samples_per_second,
        wait_share=figures.exposed_wait,
        fetch_p50=p["p50"],
        fetch_p95=p["p95"],
        hit_rate=figures.hits / looked if looked and figures.cache_max_bytes else None,  # in place: no cache
        downloaded=figures.bytes_downloaded,
    )
