"""A Mix's sources as the dashboard shows them: each one's samples, its own epoch, its time and its
share of the exposed wait, and the source the loop waited on most. Pure, no I/O.

Each mix stream counts, per source, the seconds that source's own stages (fetch, decode) took to make
its samples (:class:`~uc_jupyter.data.Mix` reads them where its schedule turns from one source to the
next). The loop splits its steady-state wait per stage (``Sample.exposed``); the part the making
stages caused (fetch and decode) is split among the sources in proportion to their seconds, which is
each source's *share of the exposed wait*. The source with the largest share is the one the loop
waited on: a slow source (a remote store, a heavy transform) shows as a share of the wait far above
its share of the samples.

Example:
    >>> from uc_jupyter.telemetry.model import Histogram, Sample, Snapshot
    >>> loop = Sample(rank=0, worker=-1, seq=1, time=9.0, batches=10, exposed=(3.0, 1.0, 0.0, 0.0, 0.0))
    >>> stream = Sample(rank=0, worker=0, seq=1, time=9.0, source_samples=(30, 10), source_epochs=(1, 0),
    ...                 source_seconds=(0.3, 3.7), source_names=("/Volumes/main/ml/images", "main.ml.crawl"))
    >>> snap = Snapshot({(0, -1): loop, (0, 0): stream}, time=9.0)
    >>> print(sources_text(snap))  # doctest: +NORMALIZE_WHITESPACE
    sources: /Volumes/main/ml/images 75% (its epoch 1, 10.0 ms a sample, 8% of the wait),
    main.ml.crawl 25% (its epoch 0, 370 ms a sample, 92% of the wait); the loop waits most for main.ml.crawl
    >>> waited_on(snap).name
    'main.ml.crawl'
"""

from __future__ import annotations

from dataclasses import dataclass

from uc_jupyter.telemetry.model import EXPOSED_STAGES, MADE_STAGES, Snapshot
from uc_jupyter.widgets.units import format_seconds

__all__ = ["SourceRow", "source_rows", "sources_text", "waited_on"]

# The stages a source's seconds are made of: the making stages but collate (the mix's batches are collated whole).
_SOURCE_STAGES = tuple(EXPOSED_STAGES.index(stage) for stage in MADE_STAGES if stage != "collate")


@dataclass(frozen=True)
class SourceRow:
    """One source of a Mix: its ``samples`` and their ``share`` of the mix's, its own ``epoch``, the
    ``seconds`` its stages took to make them, and its ``wait``: the share of the loops' exposed wait
    it caused (None before the loop's stage times say how much of the wait the sources caused)."""

    name: str
    samples: int
    share: float
    epoch: int
    seconds: float
    wait: float | None

    @property
    def per_sample(self) -> float:
        """Seconds its stages took per sample (0.0 before any)."""
        return self.seconds / self.samples if self.samples else 0.0


def source_rows(figures: Snapshot) -> tuple[SourceRow, ...]:
    """The sources of the Mix ``figures`` is a telemetry snapshot of (cumulative, a pass's own or one
    rank's: :meth:`~uc_jupyter.telemetry.model.Snapshot.of_rank`); empty for a single dataset.

    A source is named as its streams tell (``#i``, its place in the mix, when they have not).
    """
    counts, epochs = figures.source_samples, figures.source_epochs
    if not counts:
        return ()
    seconds = figures.source_seconds or (0.0,) * len(counts)
    names = figures.source_names or tuple(f"#{i}" for i in range(len(counts)))
    total, spent = sum(counts), sum(seconds)
    making = _making_share(figures)
    return tuple(
        SourceRow(
            name=name,
            samples=count,
            share=count / total if total else 0.0,
            epoch=epoch,
            seconds=second,
            wait=making * second / spent if making is not None and spent > 0 else None,
        )
        for name, count, epoch, second in zip(names, counts, epochs, seconds, strict=True)
    )


def _making_share(figures: Snapshot) -> float | None:
    """The share of the loops' exposed wait the sources' stages caused (None before any was split)."""
    exposed = [loop.exposed for loop in figures.loops().values()]
    total = sum(sum(seconds) for seconds in exposed)
    if total <= 0:
        return None
    return sum(seconds[i] for seconds in exposed for i in _SOURCE_STAGES) / total


def waited_on(figures: Snapshot) -> SourceRow | None:
    """The source the loop waited on most: the largest share of the sources' time, with two sources
    or more and their time measured (None otherwise)."""
    rows = source_rows(figures)
    if len(rows) < 2 or not any(row.seconds > 0 for row in rows):
        return None
    return max(rows, key=lambda row: row.seconds)


def sources_text(snapshot: Snapshot) -> str:
    """A Mix's sources by name: their share of the samples so far, their own epoch, the time a sample
    of theirs took to make and their share of the wait, and the source the loop waits most for (''
    for a single dataset); ``mix.figures(loader.stats())`` says the share each was asked for.

    Example:
        >>> from uc_jupyter.telemetry.model import Sample
        >>> def worker(w, counts, epochs):
        ...     return Sample(rank=0, worker=w, seq=1, time=1.0, source_samples=counts, source_epochs=epochs,
        ...                   source_names=("/Volumes/main/ml/a", "main.ml.t"))
        >>> sources_text(Snapshot({(0, 0): worker(0, (6, 2), (1, 0)), (0, 1): worker(1, (6, 2), (0, 0))}, 1.0))
        'sources: /Volumes/main/ml/a 75% (its epoch 1), main.ml.t 25% (its epoch 0)'
    """
    rows = source_rows(snapshot)
    if not sum(row.samples for row in rows):
        return ""
    said = []
    for row in rows:
        details = [f"its epoch {row.epoch}"]
        if row.seconds > 0:
            details.append(f"{format_seconds(row.per_sample)} a sample")
        if row.wait is not None:
            details.append(f"{row.wait:.0%} of the wait")
        said.append(f"{row.name} {row.share:.0%} ({', '.join(details)})")
    slow = waited_on(snapshot)
    most = f"; the loop waits most for {slow.name}" if slow is not None and slow.wait is not None else ""
    return "sources: " + ", ".join(said) + most
