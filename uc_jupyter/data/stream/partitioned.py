"""What every partitioned dataset shares: epochs, the split over ranks and workers, checkpoints, counters.

A :class:`PartitionedDataset` has ``n`` items (files of a volume folder, rows of a table). Each pass
takes the next epoch, plans this stream's items with :func:`uc_jupyter.data.stream.partition.plan` (or, in
an epoch resumed from a checkpoint, :func:`uc_jupyter.data.stream.resume.segment_shard`: the rest of the
epoch on this grid, whatever grid it was taken on), and hands the positions to the subclass's
``_stream``. The dataset is ``Stateful`` for ``torch.distributed.checkpoint``.

Example:
    >>> class Numbers(PartitionedDataset):
    ...     def __init__(self, n): super().__init__(shuffle=False, seed=0, on_uneven="pad"); self.n = n
    ...     def _item_count(self): return self.n
    ...     def _identity(self): return ("numbers", str(self.n))
    ...     def _stream(self, positions, counters, stream):
    ...         for p in positions:
    ...             self._count(counters, stream, delivered=1, files=1)
    ...             yield int(p)
    >>> numbers = Numbers(3)
    >>> list(numbers), numbers.state_dict()["segments"]
    ([0, 1, 2], [[1, 1, 'pad', [3]]])
"""

from __future__ import annotations

import gc
import os
import threading
from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import torch.utils.data

from uc_jupyter import options as opt
from uc_jupyter.data.stream.grid import current_grid, stream_name
from uc_jupyter.data.stream.partition import Grid, GrowingCount, OnUneven, Shard, StreamPositions, plan, skipped_share
from uc_jupyter.data.stream.position import job_state
from uc_jupyter.data.stream.resume import Position, ResumePoint, Segment, resume_point, segment_shard
from uc_jupyter.data.stream.stats import StreamCounters, StreamStats

__all__ = ["Fingerprint", "PartitionedDataset"]

_ON_UNEVEN: tuple[OnUneven, ...] = ("pad", "drop", "allow")
# A pass that starts while its items arrive: its shard's figures come at its end (_arrived).
_UNKNOWN_SHARD = Shard(indices=np.zeros(0, dtype=np.int64), rank_count=0, padded=0, dropped=0)


@dataclass(frozen=True)
class Fingerprint:
    """The data a checkpoint of a stream is only valid for (the grid may change: see
    :mod:`uc_jupyter.data.stream.resume`)."""

    source: str  # the /Volumes folder or the table
    version: str  # listing digest, or Delta version plus columns and filter
    seed: int
    shuffle: bool


class PartitionedDataset(torch.utils.data.IterableDataset[Any]):
    """Base of UCVolumeDataset and UCTableDataset (see the module docstring)."""

    def __init__(self, *, shuffle: bool, seed: int, on_uneven: OnUneven) -> None:
        super().__init__()
        # shuffle="no" is refused, not truthy; a seed or epoch that is a bool or float is refused too.
        self.shuffle = opt.flag("shuffle", shuffle)
        self.seed = opt.whole_number("seed", seed)
        self.on_uneven = opt.choice("on_uneven", on_uneven, _ON_UNEVEN)
        self._next_epoch = 0
        self._resume: ResumePoint | None = None
        self._loaded: dict[str, Any] | None = None  # a loaded state, until a pass of it starts
        self._prior: tuple[int, tuple[Segment, ...]] = (0, ())  # (epoch, segments before this process's)
        self._pass_workers = 1  # DataLoader workers of the last pass here
        self._stream_here: str | None = None  # the stream of the last pass here
        self._streams: dict[tuple[int, int], StreamCounters] = {}
        self._positions: dict[str, int] = {}
        self._lock = threading.Lock()

    # ---------------------------------------------------------------- for subclasses
    def _item_count(self) -> int:
        raise NotImplementedError

    def _identity(self) -> tuple[str, str]:
        """(source, version) of the fingerprint."""
        raise NotImplementedError

    def _skipped_count(self) -> int:
        """Items of the source left out before partitioning (a volume's files that match no filter)."""
        return 0

    def _arriving(self) -> GrowingCount | None:
        """The items while they still arrive (a listing under way), else None: an unshuffled pass
        then starts on the first ones (:class:`~uc_jupyter.data.stream.partition.StreamPositions`)."""
        return None

    def _stream(
        self, positions: npt.NDArray[np.int64] | StreamPositions, counters: StreamCounters, stream: str
    ) -> Iterator[Any]:
        """Yield the items at ``positions``, counting what reaches the consumer with ``_count``
        (positions still arriving: call :meth:`_arrived` once they all have)."""
        raise NotImplementedError

    # ---------------------------------------------------------------- pickling and copies
    def __getstate__(self) -> dict[str, Any]:  # for spawn/forkserver DataLoader workers and ranks
        state = self.__dict__.copy()
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __copy__(self) -> PartitionedDataset:
        """A view with the same items and settings but its own progress and counters."""
        twin = type(self).__new__(type(self))
        twin.__dict__.update(self.__getstate__())
        twin._lock = threading.Lock()
        twin._streams, twin._positions, twin._resume, twin._loaded = {}, {}, None, None
        return twin

    # ---------------------------------------------------------------- torch protocol
    def __len__(self) -> int:
        """The number of items this rank yields per epoch (over all its DataLoader workers)."""
        grid = current_grid()
        return plan(self._item_count(), replace(grid, worker=0, num_workers=1), on_uneven=self.on_uneven).rank_count

    def length_known(self, *, waiting_for: int = 0) -> int | None:
        """``len(self)`` when it is known without waiting for the end of items still arriving (a
        listing under way); for those, after waiting until ``waiting_for`` items have arrived or all
        of them have, and None when more may still come then.

        Example:
            >>> class Three(PartitionedDataset):
            ...     def __init__(self): super().__init__(shuffle=False, seed=0, on_uneven="pad")
            ...     def _item_count(self): return 3
            >>> Three().length_known()  # all known: no listing still arriving
            3
        """
        arriving = self._arriving()
        if arriving is not None:
            if waiting_for > arriving.known():
                arriving.wait_for(waiting_for)
            if arriving.total() is None:
                return None
        return len(self)

    def __iter__(self) -> Iterator[Any]:
        _freeze_inherited()
        worker = grid = current_grid()
        epoch = self._take_epoch()
        resume = self._resume if self._resume is not None and self._resume.epoch == epoch else None
        prior: tuple[Segment, ...] = ()
        skip = 0
        if resume is not None:
            # torch's worker j runs stream (j + rotate): batches come in the order they would have.
            # Its counters stay the worker's own (telemetry is per worker process).
            grid = replace(grid, worker=resume.stream_of(grid.worker, grid.workers))
            prior, skip = resume.prior, resume.skip[grid.worker]
        stream = stream_name(grid.rank, grid.worker)
        arriving = None if self.shuffle or prior else self._arriving()
        if arriving is not None:
            counters = self._record(worker, grid, _UNKNOWN_SHARD, epoch, skip, prior)
            # The shard's size so far, as its positions become known (dashboards show it growing).
            positions = StreamPositions(arriving, grid, self.on_uneven, skip, on_known=counters.known_shard)
            return self._stream(positions, counters, stream)
        n = self._item_count()
        shard = segment_shard(
            n, grid, shuffle=self.shuffle, seed=self.seed, epoch=epoch, on_uneven=self.on_uneven, prior=prior
        )
        if shard.rank_count == 0 and not prior:  # a resumed segment may well have nothing left
            self._nothing_for(n, grid)
        counters = self._record(worker, grid, shard, epoch, skip, prior)
        counters.skipped = skipped_share(self._skipped_count(), grid)
        return self._stream(shard.indices[skip:], counters, stream)

    def part_of_mix(self, positions: npt.NDArray[np.int64], epoch: int) -> Iterator[Any]:
        """This dataset's items at ``positions`` (its own ``epoch``), read as one part of a
        :class:`~uc_jupyter.data.Mix`'s stream: through the same stages and counters as a pass of
        its own, in the stream of this process's grid. The mix, not this dataset, keeps the position."""
        grid = current_grid()
        shard = Shard(indices=positions, rank_count=len(positions), padded=0, dropped=0)
        counters = self._record(grid, grid, shard, epoch, 0, ())
        return self._stream(positions, counters, stream_name(grid.rank, grid.worker))

    def _arrived(self, positions: StreamPositions, counters: StreamCounters) -> None:
        """A pass that started while its items arrived has all of them: its shard's figures, as
        :meth:`__iter__` sets them for a pass that starts on all its items."""
        n = self._item_count()
        shard = plan(n, positions.grid, on_uneven=self.on_uneven)
        if shard.rank_count == 0:
            self._nothing_for(n, positions.grid)
        with self._lock:
            counters.padded, counters.dropped, counters.shard_size = shard.padded, shard.dropped, len(shard.indices)
        counters.skipped = skipped_share(self._skipped_count(), positions.grid)

    def _nothing_for(self, n: int, grid: Grid) -> None:
        raise ValueError(
            f"{self._identity()[0]}: {n} items leave rank {grid.rank} of {grid.world_size} nothing "
            f"with on_uneven={self.on_uneven!r}; use on_uneven='pad'"
        )

    def sample_structure(self) -> str:
        """What one sample of this dataset is, in words, known before anything is read: a
        :class:`~uc_jupyter.data.Mix` of sources whose samples differ needs a collate that takes both."""
        return "items"

    def items_in(self, element: Any) -> int:
        """How many items one yielded element holds (1; a table dataset yields batches of rows)."""
        return 1

    def set_epoch(self, epoch: int) -> None:
        """Use ``epoch``'s order for the next pass (later passes count up from it).

        Without ``set_epoch`` each pass in a process moves to the next epoch by itself, which
        keeps persistent DataLoader workers in step.
        """
        self._next_epoch = opt.whole_number("epoch", epoch)

    # ---------------------------------------------------------------- checkpoints
    def fingerprint(self) -> Fingerprint:
        """The data this dataset's checkpoints hold a position in."""
        source, version = self._identity()
        return Fingerprint(source=source, version=version, seed=self.seed, shuffle=self.shuffle)

    def state_dict(self) -> dict[str, Any]:
        """Where the streams run in this process are in the current epoch, JSON-serialisable.

        Under ``torch.distributed`` it holds every rank's streams (a collective: call it on every
        rank together, as ``torch.distributed.checkpoint`` does). Streams run by DataLoader workers
        are the :class:`~uc_jupyter.data.DataLoader`'s to checkpoint: checkpoint the loader.

        Example:
            >>> state = ds.state_dict()        # doctest: +SKIP
            >>> ds2.load_state_dict(state)     # doctest: +SKIP
        """
        fingerprint = asdict(self.fingerprint())  # outside the lock: it may wait for a listing's end
        here = current_grid()
        rank, world = here.rank, here.world_size
        with self._lock:
            if self._loaded is not None:  # no pass of the loaded state has started yet
                return {**self._loaded, "fingerprint": fingerprint}
            epoch = max((s.epoch for s in self._streams.values()), default=self._next_epoch)
            workers = self._pass_workers
            row = [self._positions.get(stream_name(rank, w), 0) for w in range(workers)]
            prior = self._prior[1] if self._prior[0] == epoch else ()
        return job_state(fingerprint, epoch, prior, row, 0, world=world, workers=workers, on_uneven=self.on_uneven)

    def load_state_dict(self, state: dict[str, Any], grid: Grid | None = None) -> dict[str, Any] | None:
        """Resume: the next pass runs ``state``'s epoch, delivering exactly what it had not.

        ``grid`` is where the streams will run (a DataLoader passes its worker count): on the grid
        the state was taken on, each stream continues where it stopped (the order of a run never
        interrupted); on another world size, worker count or ``on_uneven``, the rest of the epoch
        is split over the new grid (:mod:`uc_jupyter.data.stream.resume`). A state of other data (another
        folder or table, listing, version, seed or shuffle) is refused, naming what differs.
        """
        grid = grid or current_grid()
        expected = asdict(self.fingerprint())
        given = state.get("fingerprint") if isinstance(state, dict) else None
        if not isinstance(given, dict):
            raise ValueError(f"not a {type(self).__name__} state: it has no 'fingerprint'")
        differs = [k for k in expected if given.get(k) != expected[k]]
        if differs:
            first = differs[0]
            raise ValueError(
                f"cannot resume {expected['source']}: the checkpoint's {first} is "
                f"{given.get(first)!r}, this dataset's is {expected[first]!r}"
            )
        position = Position.from_state(state)
        resume = resume_point(position, grid.rank, grid.world_size, grid.num_workers, self.on_uneven)
        with self._lock:
            self._resume, self._next_epoch = resume, resume.epoch
            self._loaded = {"fingerprint": given, **position.to_state()}
        return None  # the position given is the one resumed (a Mix may resume another: it returns it)

    def stream_position(self) -> int | None:
        """How many items the stream of this process's last pass has yielded of its epoch (with
        what a resumed stream had delivered before): after a batch, exactly the items of the
        batches so far, however the collate shaped them (None before any pass)."""
        with self._lock:
            return None if self._stream_here is None else self._positions.get(self._stream_here)

    def stream_stats(self) -> tuple[StreamStats, ...]:
        """Counters of the streams run in this process, cumulative over epochs."""
        with self._lock:
            return tuple(self._streams[k].freeze() for k in sorted(self._streams))

    # ---------------------------------------------------------------- internals
    def _take_epoch(self) -> int:
        with self._lock:
            epoch = self._next_epoch
            self._next_epoch += 1
            return epoch

    def _record(
        self, worker: Grid, grid: Grid, shard: Shard, epoch: int, skip: int, prior: tuple[Segment, ...]
    ) -> StreamCounters:
        """Start a pass of stream ``grid`` in ``worker``: its counters stay cumulative over epochs."""
        key = (worker.rank, worker.worker)
        with self._lock:
            counters = self._streams.setdefault(key, StreamCounters(rank=key[0], worker=key[1]))
            counters.epoch, counters.padded, counters.dropped = epoch, shard.padded, shard.dropped
            counters.shard_size = len(shard.indices)
            resumed = self._resume is not None and self._resume.epoch == epoch
            counters.resumed_epoch = epoch if resumed else -1
            self._stream_here = stream_name(grid.rank, grid.worker)
            self._positions[self._stream_here] = skip
            self._prior, self._pass_workers, self._loaded = (epoch, prior), grid.workers, None
            return counters

    def _count(self, counters: StreamCounters, stream: str | None = None, delivered: int = 0, **deltas: int) -> None:
        """Add ``deltas`` to the counters; ``delivered`` items reached the consumer of ``stream``."""
        with self._lock:
            for name, value in deltas.items():
                setattr(counters, name, getattr(counters, name) + value)
            if stream is not None and delivered:
                self._positions[stream] = self._positions.get(stream, 0) + delivered

    def _count_file(self, counters: StreamCounters, stream: str, size: int, downloaded: bool, resident: bool) -> None:
        """One file of ``size`` bytes reached the consumer of ``stream``: :meth:`_count` for the
        case that runs per file, written out (keyword arguments and ``setattr`` cost more than
        a warm cache's hit)."""
        with self._lock:
            counters.files += 1
            counters.bytes += size
            if downloaded:
                counters.misses += 1
                counters.bytes_downloaded += size
                counters.streamed += not resident
            else:
                counters.hits += 1
            self._positions[stream] += 1

    def _count_read(self, counters: StreamCounters, seconds: float, answered: float | None) -> None:
        """One download of the stream took ``seconds``, of which the store took ``answered`` to
        answer (None: not told)."""
        with self._lock:
            counters.reads += 1
            counters.read_seconds += seconds
            if answered is not None:
                counters.answered += 1
                counters.answer_seconds += answered


_FROZEN_IN: int | None = None  # the DataLoader worker process that froze what it inherited


def _freeze_inherited() -> None:
    """In a DataLoader worker, once: move every object it started with (torch's modules, the
    listing, the dataset) out of the cyclic garbage collector's reach (:func:`gc.freeze`). A pass
    allocates a few objects per item, so the collector runs often, and each full collection walked
    all of them: measured at issue 16's conditions (3,000 files, 2 workers, back to back), client
    CPU per file 0.61-0.64 ms without, 0.46-0.51 ms with. Not in the training process itself
    (its objects are the user's); cycles already unreachable then are kept for the worker's life."""
    global _FROZEN_IN
    if os.getpid() == _FROZEN_IN or torch.utils.data.get_worker_info() is None:
        return
    _FROZEN_IN = os.getpid()
    gc.freeze()
