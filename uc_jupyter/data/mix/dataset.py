"""``Mix``: several datasets read as one, each sample's source chosen by weight, resumable on any grid.

A mix epoch is a sequence of samples whose sources follow the weights' schedule
(:mod:`uc_jupyter.data.mix.schedule`); which item of its source each sample is follows from how many
samples of that source came before (:mod:`uc_jupyter.data.mix.epochs`). The mix's samples are the
items of a :class:`~uc_jupyter.data.stream.partitioned.PartitionedDataset`, split over ranks and
DataLoader workers, checkpointed and resumed on the same grid or another by the same machinery as a
single volume or table; each source reads its part of a stream through its own stages (cache,
prefetch, decode, its own options), and was checked against the catalog when it was made.

Example:
    >>> from uc_jupyter.data import Mix, UCTableDataset, UCVolumeDataset
    >>> mix = Mix([UCVolumeDataset("/Volumes/main/ml/images", decode="image"),   # doctest: +SKIP
    ...            UCVolumeDataset("/Volumes/main/ml/crawl", decode="image", shuffle=True)],
    ...           weights=[3, 1])
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from uc_jupyter import options as opt
from uc_jupyter.data.mix.epochs import MixPlan, source_epochs, source_items
from uc_jupyter.data.mix.figures import SourceFigures, source_figures
from uc_jupyter.data.mix.part_consumer import PartConsumer
from uc_jupyter.data.mix.schedule import UNTIL, Until, checked_weights, epoch_length
from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.partition import GrowingCount, OnUneven
from uc_jupyter.data.stream.partitioned import PartitionedDataset
from uc_jupyter.data.stream.resume import Position, remaining
from uc_jupyter.data.stream.stages import StageTimes
from uc_jupyter.data.stream.stats import DatasetStats, StreamCounters
from uc_jupyter.telemetry import producer
from uc_jupyter.telemetry.model import Snapshot

__all__ = ["Mix"]


class Mix(PartitionedDataset):
    """A torch ``IterableDataset`` over several datasets, each sample's source chosen by weight.

    Args:
        sources: the datasets to mix (:class:`~uc_jupyter.data.UCVolumeDataset`,
            :class:`~uc_jupyter.data.UCTableDataset`, an exported Parquet folder read as a volume
            dataset), each made with its own options (decode, columns, filter, shuffle, seed, cache);
            a table source's samples are single rows (dicts), whatever its ``batch_size``.
        weights: one number >= 0 per source, in any unit (``[3, 1]`` is three quarters and a quarter).
        until: when a mix epoch ends: ``"all_seen"`` (every source has given as many samples as it
            has items), ``"first_exhausted"`` (the first source has), or ``"steps"`` (after ``steps``
            samples of the whole job).
        steps: the samples of a mix epoch with ``until="steps"``.
        on_uneven: how the epoch's samples are evened out over ranks (as for a single dataset; the
            sources' own ``on_uneven`` does not apply in a mix).

    Proportions: the sources follow a fixed schedule of the weights alone, the same on every rank.
    Every prefix of the schedule holds each source ``floor`` or ``ceil`` of its weight share times
    its length, so every window of ``W`` consecutive samples holds it within 2 of its share of ``W``
    (within 1 with two sources; within 1 for every weight vector is impossible, see
    :mod:`uc_jupyter.data.mix.schedule`); each mix epoch runs it from its start, so windows count
    within an epoch. The job's samples are the schedule in order: with
    ``num_workers`` 0 or 1, each step of all ranks together takes the next ``batch_size x
    world_size`` samples of it; with more workers, each round of ``num_workers`` steps does.

    Epochs: a source that runs out within a mix epoch begins its next epoch (reshuffled with its own
    epoch number, exactly as it would alone) while the others go on; a mix epoch takes every
    source from where the last one left it. Within each of its own epochs every item of a source
    comes once across all ranks and workers (with ``on_uneven="pad"`` the reported padding repeats).

    Resume (``state_dict()``, or a :class:`~uc_jupyter.data.DataLoader` of the mix in a ``dcp``
    checkpoint): the state holds the mix's position and the schedule of its epoch (its weights and
    where each source stood). On the same grid the mix continues batch for batch; on another world
    size or ``num_workers`` the rest of the epoch is split over the new grid, each source
    delivering exactly the samples its current epoch had not. The weights (and ``until``, ``steps``)
    may change at resume: the new weights rule from the resume point (the window guarantee holds from
    there), each source first giving the samples the interrupted epoch still owed it, so no sample of
    a source's epoch repeats or is skipped; the rest of that epoch lasts until each source
    (``"all_seen"``) or the first (``"first_exhausted"``) has given what it owed, or for the samples
    left (``"steps"``), and what a source still owes then comes first in the next epoch. (A state
    taken without ``torch.distributed`` on several ranks lacks the other ranks' counts: its epoch
    then ends with the weights it began with.) A checkpoint of other sources is refused, naming the
    first that differs.

    Example:
        >>> mix = Mix([images, captions], weights=[3, 1], until="first_exhausted")  # doctest: +SKIP
        >>> loader = DataLoader(mix, batch_size=64, collate_fn=my_collate)           # doctest: +SKIP
    """

    def __init__(
        self,
        sources: Sequence[PartitionedDataset],
        weights: Sequence[float],
        *,
        until: Until = "all_seen",
        steps: int | None = None,
        on_uneven: OnUneven = "pad",
    ) -> None:
        super().__init__(shuffle=False, seed=0, on_uneven=on_uneven)
        if isinstance(sources, PartitionedDataset) or not isinstance(sources, Sequence) or not sources:
            raise ValueError("Mix needs a list of datasets (UCVolumeDataset, UCTableDataset), one per source")
        for i, source in enumerate(sources):
            if not isinstance(source, PartitionedDataset) or isinstance(source, Mix):
                raise ValueError(
                    f"source {i} of the mix is a {type(source).__name__}: give UCVolumeDataset or UCTableDataset"
                )
        self.sources = tuple(sources)
        self.names = tuple(source._identity()[0] for source in self.sources)
        _refuse_repeats(self.sources, self.names)
        self.weights = checked_weights(weights, self.names)
        self.until: Until = opt.choice("until", until, UNTIL)
        self.steps = opt.maybe_whole_number("steps", steps, minimum=1)
        if (self.until == "steps") != (self.steps is not None):
            raise ValueError('give steps= with until="steps" (the samples of a mix epoch), and only then')
        self.sizes = tuple(source._item_count() for source in self.sources)
        for name, size in zip(self.names, self.sizes, strict=True):
            if size == 0:
                raise ValueError(f"{name} has no items to mix")
        self._anchor: tuple[int, MixPlan] = (0, self._first_plan())
        self._running: int | None = None  # the epoch of the pass started last here

    # ---------------------------------------------------------------- the plan of each epoch
    def _first_plan(self) -> MixPlan:
        return MixPlan.first(self.weights, self.sizes, self.until, self.steps)

    def plan(self, epoch: int) -> MixPlan:
        """Mix epoch ``epoch``'s plan: after a resumed epoch, the ones that follow it take the
        current weights; before it (``set_epoch`` back), the current weights from the job's start."""
        anchored, plan = self._anchor
        if epoch < anchored:
            anchored, plan = 0, self._first_plan()
        if epoch == anchored:
            return plan
        plan = plan.following(self.weights, self.sizes, self.until, self.steps)
        while plan.holes and anchored + 1 < epoch:  # samples still owed: walk the epochs that take them
            anchored, plan = anchored + 1, plan.following(self.weights, self.sizes, self.until, self.steps)
        # Later epochs of the same weights take the same counts each: no need to walk them one by one.
        later = epoch - anchored - 1
        bases = tuple(b + later * c for b, c in zip(plan.bases, plan.counts, strict=True))
        return MixPlan(plan.weights, plan.length, bases, plan.holes)

    def plan_state(self, epoch: int) -> dict[str, Any]:
        """The schedule of mix epoch ``epoch`` as a checkpoint holds it (see :meth:`MixPlan.to_state`)."""
        return self.plan(epoch).to_state()

    # ---------------------------------------------------------------- PartitionedDataset
    def __repr__(self) -> str:
        """Example: ``Mix(/Volumes/main/ml/a x 3, main.ml.t x 1, until='all_seen')``."""
        parts = ", ".join(f"{n} x {w}" for n, w in zip(self.names, self.weights, strict=True))
        return f"Mix({parts}, until={self.until!r})"

    @property
    def name(self) -> str:
        """``"mix of /Volumes/main/ml/a, main.ml.t"``: what the loader's dashboard is titled with."""
        return f"mix of {', '.join(self.names)}"

    def _item_count(self) -> int:
        epoch = self._running if self._running is not None else self._next_epoch
        return self.plan(epoch).length

    def _identity(self) -> tuple[str, str]:
        # The sources only: the weights and the epoch rule may change at resume.
        sources = [asdict(source.fingerprint()) for source in self.sources]
        return self.name, json.dumps(sources, sort_keys=True)

    def _arriving(self) -> GrowingCount | None:
        return None  # the sizes of every source are known when the mix is made

    def _take_epoch(self) -> int:
        self._running = super()._take_epoch()
        return self._running

    def set_epoch(self, epoch: int) -> None:
        super().set_epoch(epoch)
        self._running = None

    def sample_structure(self) -> str:
        kinds = {source.sample_structure() for source in self.sources}
        return kinds.pop() if len(kinds) == 1 else "mixed"

    def structure_mismatch(self) -> str | None:
        """A one-line reason when the sources' samples differ (a collate must handle both), else None."""
        first = self.sources[0].sample_structure()
        for name, source in zip(self.names[1:], self.sources[1:], strict=True):
            theirs = source.sample_structure()
            if theirs != first:
                return (
                    f"the mix's sources yield different samples: {self.names[0]} {first}, {name} {theirs}; "
                    "give the DataLoader a collate_fn that takes both, or decode them alike"
                )
        return None

    def _stream(self, positions: Any, counters: StreamCounters, stream: str) -> Iterator[Any]:
        plan = self.plan(counters.epoch)
        sources, taken = plan.picks(np.asarray(positions, dtype=np.int64))
        whole = consumer.of(self)  # the loader binds the mix's consumer as the pass starts
        # The sources' stage seconds: the loader's (they reach the loop with the batches), or, with a
        # consumer that takes none, this pass's own (the shared one of every unbound stream would mix
        # another stream's seconds into a source's).
        stages = whole.stages if whole.exact else StageTimes()
        for j, source in enumerate(self.sources):
            # Each source keeps its files until the loop is past the batch that holds them.
            consumer.install_part(source, PartConsumer(whole, np.flatnonzero(sources == j), stages))
        parts = [self._part(j, taken[sources == j]) for j in range(len(self.sources))]
        sizes = np.asarray(self.sizes, dtype=np.int64)
        epochs = source_epochs(taken, sizes[sources]) if len(taken) else taken
        if len(counters.source_samples) != len(self.sources):  # counters of this stream, cumulative over passes
            counters.source_samples[:] = [0] * len(self.sources)
            counters.source_epochs[:] = [0] * len(self.sources)
            counters.source_seconds[:] = [0.0] * len(self.sources)
        counters.source_names = self.names  # once per pass: telemetry carries them to the dashboard
        return self._interleaved(sources.tolist(), epochs.tolist(), parts, counters, stream, stages)

    def _part(self, source: int, taken: npt.NDArray[np.int64]) -> Iterator[Any]:
        """Source ``source``'s samples numbered ``taken`` (in order), read by the source itself."""
        if len(taken) == 0:
            return iter(())
        dataset, size = self.sources[source], self.sizes[source]
        items = source_items(taken, size, shuffle=dataset.shuffle, seed=dataset.seed)
        first_epoch = int(source_epochs(taken[:1], size)[0])
        part = dataset.part_of_mix(items, first_epoch)
        # A table reads rows in batches of its batch_size: a mix takes them one row at a time.
        return _rows(part) if type(dataset).items_in is not PartitionedDataset.items_in else part

    def _interleaved(
        self,
        sources: list[int],
        epochs: list[int],
        parts: list[Iterator[Any]],
        counters: StreamCounters,
        stream: str,
        stages: StageTimes,
    ) -> Iterator[Any]:
        positions, per_source, latest = self._positions, counters.source_samples, counters.source_epochs
        spent = counters.source_seconds
        # Each source's time is what its own stages (fetch, decode) add to ``stages`` while it makes
        # its samples. Only a source's code runs inside ``next(parts[source])``, and the seconds only
        # grow, so one reading where the schedule turns to another source closes the run that ends
        # and opens the next: no clock read, and nothing per sample but the comparison.
        running, mark = -1, 0.0
        try:
            for source, epoch in zip(sources, epochs, strict=True):
                if source != running:
                    now = stages.fetch + stages.decode
                    if running >= 0:
                        spent[running] += now - mark
                    running, mark = source, now
                sample = next(parts[source])
                # _count written out and without its lock, as it runs per sample: this stream is the only
                # writer of its counters and position (readers see a count a sample late at worst).
                counters.files += 1
                per_source[source] += 1
                latest[source] = epoch
                positions[stream] += 1
                yield sample
        finally:  # the last run, however the pass ends (a loader stopped early closes it here)
            if running >= 0:
                spent[running] += stages.fetch + stages.decode - mark
        for part in parts:  # each has given all it had: let it end as a pass of its own ends (its files released)
            for _ in part:
                raise RuntimeError("a source of the mix gave more samples than its part of the stream")
        producer.notify(final=True)  # the pass's last counters, the mix's whole, reach the loop

    def figures(self, stats: Snapshot | None = None) -> tuple[SourceFigures, ...]:
        """Each source's samples, their share of the mix against the share asked (the current
        weights), its own epoch and the time its stages took per sample: from ``stats`` (a loader's
        ``stats()``, every worker and rank it has heard from), else from the streams run in this process.

        Example:
            >>> for row in mix.figures(loader.stats()): print(row)  # doctest: +SKIP
            /Volumes/main/ml/curated: 4,800 samples, 75.0% of the mix (asked 75.0%), its epoch 1, 0.41 ms a sample
        """
        if stats is not None:
            samples, epochs, seconds = stats.source_samples, stats.source_epochs, stats.source_seconds
        else:
            streams = [s for s in self.stream_stats() if s.source_samples]
            samples = tuple(sum(c) for c in zip(*(s.source_samples for s in streams), strict=True))
            epochs = tuple(max(e) for e in zip(*(s.source_epochs for s in streams), strict=True))
            seconds = tuple(sum(t) for t in zip(*(s.source_seconds for s in streams), strict=True))
        return source_figures(self.names, self.weights, samples, epochs, seconds)

    def stats(self) -> DatasetStats:
        """The mix's streams in this process (each sample counted as one file)."""
        return DatasetStats(streams=self.stream_stats(), listed_files=sum(self.sizes))

    # ---------------------------------------------------------------- checkpoints
    def state_dict(self) -> dict[str, Any]:
        """As :meth:`PartitionedDataset.state_dict`, with the schedule of the state's mix epoch."""
        state = super().state_dict()
        return {**state, "schedule": self.plan_state(int(state["epoch"]))}

    def load_state_dict(self, state: dict[str, Any], grid: Any = None) -> dict[str, Any] | None:
        """Resume ``state``: refused, naming the source, when it is a mix of other sources. With the
        weights it was taken with, its mix epoch continues; with others, the rest of the epoch runs
        the new weights from the resume point, each source first giving what the epoch owed it
        (see the class docstring). Returns the position actually resumed (a DataLoader keeps it)."""
        given = state.get("fingerprint") if isinstance(state, dict) else None
        if not isinstance(given, dict) or not str(given.get("source", "")).startswith("mix of"):
            raise ValueError("not a Mix state: it has no mix fingerprint (is it a single dataset's?)")
        self._refuse_other_sources(given)
        schedule = state.get("schedule")
        if schedule is None:
            super().load_state_dict(state, grid)
            return state
        epoch, taken_with = int(state["epoch"]), MixPlan.from_state(schedule)
        plan, resumed = self._replanned(taken_with, state), state
        if plan is not taken_with:  # the rest of the epoch is a new plan: it starts with nothing delivered
            resumed = {**state, "segments": [], "next_stream": []}
        super().load_state_dict(resumed, grid)
        self._anchor, self._running = (epoch, plan), None
        return resumed

    def _replanned(self, taken_with: MixPlan, state: dict[str, Any]) -> MixPlan:
        """The plan the state's epoch resumes with: its own, or the rest of it with this mix's weights."""
        if _shares(taken_with.weights) == _shares(self.weights):
            return taken_with
        position = Position.from_state(state)
        if not position.segments:  # the epoch had not begun: all of it with the new weights
            length = epoch_length(self.weights, self.sizes, self.until, self.steps)
            return MixPlan(self.weights, length, taken_with.bases, taken_with.holes)
        try:  # what the whole job had of it (every rank's counts are needed)
            rest = remaining(taken_with.length, shuffle=False, seed=0, epoch=position.epoch, segments=position.segments)
        except ValueError:
            return taken_with  # a rank's counts are not known: the epoch ends with its own weights
        delivered = np.ones(taken_with.length, dtype=bool)
        delivered[rest] = False
        plan = taken_with.rebased(delivered, self.weights, self.until, self.steps)
        return plan if plan.length > 0 else taken_with

    def _refuse_other_sources(self, given: dict[str, Any]) -> None:
        try:
            theirs = json.loads(given["version"])
        except (KeyError, TypeError, ValueError):
            raise ValueError("not a Mix state: its fingerprint does not list its sources") from None
        ours = [asdict(source.fingerprint()) for source in self.sources]
        if len(theirs) != len(ours):
            raise ValueError(f"cannot resume: the checkpoint mixes {len(theirs)} sources, this mix {len(ours)}")
        for i, (then, now) in enumerate(zip(theirs, ours, strict=True)):
            differs = [key for key in now if then.get(key) != now[key]]
            if differs:
                key = differs[0]
                raise ValueError(
                    f"cannot resume the mix: its source {i} ({now['source']}) has {key} {now[key]!r}, "
                    f"the checkpoint's ({then.get('source')}) {then.get(key)!r}"
                )


def _shares(weights: tuple[Fraction, ...]) -> tuple[Fraction, ...]:
    total = sum(weights)
    return tuple(w / total for w in weights)


def _refuse_repeats(sources: Sequence[PartitionedDataset], names: Sequence[str]) -> None:
    seen: dict[tuple[str, str], int] = {}
    for i, source in enumerate(sources):
        identity = source._identity()
        if identity in seen:
            raise ValueError(
                f"{names[i]} is listed twice in the mix (sources {seen[identity]} and {i}): list it once, "
                "with the sum of its weights"
            )
        seen[identity] = i


def _rows(batches: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A table's dict batches as one dict per row."""
    for batch in batches:
        count = len(next(iter(batch.values()))) if batch else 0
        for row in range(count):
            yield {name: column[row] for name, column in batch.items()}
