"""Where an interrupted epoch resumes, on the same grid or another one: pure functions, no I/O.

An epoch runs in *segments*. The first is the plain plan of :func:`~uc_jupyter.data.stream.partition.plan`
over the epoch's order. When a run is interrupted and resumed on another grid (another world size,
``num_workers`` or ``on_uneven``), a new segment begins: the items of the epoch's order that no
earlier segment delivered (still in the epoch's order) are split over the new grid by the same
rules (ranks take strided slices, the policy evens them out, workers take strided slices of the
rank's share). So every item the interrupted epoch had not delivered is delivered exactly once
across the new grid with ``"allow"``; with ``"pad"`` only the reported padding repeats, with
``"drop"`` only the reported remainder is left out. Resumed on the grid of its last segment, a run
continues that segment's streams where they stopped: the same order as a run never interrupted.

A :class:`Segment` records its grid and how many items each of its streams delivered (rank-major:
stream ``(rank, worker)`` is ``delivered[rank * num_workers + worker]``; -1 where a rank's count is
not known, a checkpoint taken without ``torch.distributed``).

Example:
    >>> first = Segment(world_size=2, num_workers=1, on_uneven="allow", delivered=(2, 1))
    >>> remaining(10, shuffle=False, seed=0, epoch=0, segments=[first]).tolist()
    [3, 4, 5, 6, 7, 8, 9]
    >>> [segment_shard(10, Grid(rank=r, world_size=3), shuffle=False, seed=0, epoch=0,
    ...                on_uneven="allow", prior=[first]).indices.tolist() for r in range(3)]
    [[3, 6, 9], [4, 7], [5, 8]]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from uc_jupyter.data.stream.partition import Grid, OnUneven, Shard, epoch_order, rank_share

__all__ = ["Position", "ResumePoint", "Segment", "continuation", "remaining", "resume_point", "segment_shard"]

_POLICIES = ("pad", "drop", "allow")


@dataclass(frozen=True)
class Segment:
    """One grid's run through part of an epoch: its shape and what each of its streams delivered."""

    world_size: int
    num_workers: int  # DataLoader workers (0 and 1 both mean one stream per rank)
    on_uneven: OnUneven
    delivered: tuple[int, ...]  # per stream, rank-major; -1: not known

    def __post_init__(self) -> None:
        if self.world_size < 1 or self.num_workers < 0 or self.on_uneven not in _POLICIES:
            raise ValueError(f"invalid segment {self}")
        if len(self.delivered) != self.world_size * self.workers:
            streams = self.world_size * self.workers
            raise ValueError(f"a segment of {streams} streams has {len(self.delivered)} counts")

    @property
    def workers(self) -> int:
        return max(self.num_workers, 1)

    def same_grid(self, world_size: int, num_workers: int, on_uneven: str) -> bool:
        """Whether streams on this grid continue this segment (rather than start a new one)."""
        return (self.world_size, self.workers, self.on_uneven) == (world_size, max(num_workers, 1), on_uneven)

    def missing_rank(self) -> int | None:
        """The first rank whose counts this segment does not hold, else None."""
        unknown = [i for i, d in enumerate(self.delivered) if d < 0]
        return unknown[0] // self.workers if unknown else None

    def count(self, rank: int, worker: int) -> int:
        return self.delivered[rank * self.workers + worker]

    def to_state(self) -> list[Any]:
        """``[world_size, num_workers, on_uneven, [delivered...]]``: a list of plain values, which
        ``torch.distributed.checkpoint`` stores as one item (its key does not depend on the grid)."""
        return [self.world_size, self.num_workers, self.on_uneven, list(self.delivered)]

    @classmethod
    def from_state(cls, value: Any) -> Segment:
        try:
            world, workers, policy, delivered = value
            return cls(int(world), int(workers), policy, tuple(int(d) for d in delivered))
        except (TypeError, ValueError):
            raise ValueError(f"not a data position segment: {value!r}") from None


def _pool(n: int, *, shuffle: bool, seed: int, epoch: int, prior: Sequence[Segment]) -> npt.NDArray[np.int64]:
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    return order if not prior else remaining(n, shuffle=shuffle, seed=seed, epoch=epoch, segments=prior)


def _shard_of(pool: npt.NDArray[np.int64], grid: Grid, on_uneven: OnUneven) -> Shard:
    if len(pool) == 0:  # np.resize would pad an empty pool with zeros
        return Shard(indices=pool, rank_count=0, padded=0, dropped=0)
    share, padded, dropped = rank_share(pool, grid.rank, grid.world_size, on_uneven)
    return Shard(indices=share[grid.worker :: grid.workers], rank_count=len(share), padded=padded, dropped=dropped)


def segment_shard(
    n: int,
    grid: Grid,
    *,
    shuffle: bool,
    seed: int,
    epoch: int,
    on_uneven: OnUneven,
    prior: Sequence[Segment] = (),
) -> Shard:
    """Stream ``grid``'s items in the segment that follows ``prior`` (none: the plain plan)."""
    return _shard_of(_pool(n, shuffle=shuffle, seed=seed, epoch=epoch, prior=prior), grid, on_uneven)


def remaining(n: int, *, shuffle: bool, seed: int, epoch: int, segments: Sequence[Segment]) -> npt.NDArray[np.int64]:
    """The items of the epoch's order that none of ``segments`` delivered, in that order.

    Raises:
        ValueError: a segment's count is not known (-1), or larger than its stream's items.
    """
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    done = np.zeros(n, dtype=bool)
    pool = order
    for segment in segments:
        missing = segment.missing_rank()
        if missing is not None:
            raise ValueError(f"the data position holds no count for rank {missing}: it cannot say what is left")
        for rank in range(segment.world_size):
            share = _shard_of(pool, Grid(rank=rank, world_size=segment.world_size), segment.on_uneven).indices
            for worker in range(segment.workers):
                items = share[worker :: segment.workers]
                count = segment.count(rank, worker)
                if count > len(items):
                    raise ValueError(
                        f"the checkpoint says rank {rank} worker {worker} delivered {count} items of an "
                        f"epoch that gives it {len(items)}: it is not of this data"
                    )
                done[items[:count]] = True
        pool = order[~done[order]]
    return pool


def continuation(segments: Sequence[Segment], world_size: int, num_workers: int, on_uneven: str) -> int:
    """How many of ``segments`` come before the one a grid of this shape runs: all of them (it
    starts a new segment), or all but the last (it continues the last, where it stopped)."""
    if segments and segments[-1].same_grid(world_size, num_workers, on_uneven):
        return len(segments) - 1
    return len(segments)


@dataclass(frozen=True)
class Position:
    """Where a whole job's data stream is: the epoch, its segments so far, and per rank the stream
    whose batch that rank's loop takes next (DataLoader workers hand batches out in turn)."""

    epoch: int
    segments: tuple[Segment, ...] = ()
    next_stream: tuple[int, ...] = ()

    def to_state(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "segments": [segment.to_state() for segment in self.segments],
            "next_stream": list(self.next_stream),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Position:
        """Read :meth:`to_state`'s dict; a state of uc_jupyter before segments (``streams``, one
        grid, kept in its fingerprint) reads as one segment."""
        try:
            epoch = int(state["epoch"])
            if "segments" in state:
                segments = tuple(Segment.from_state(v) for v in state["segments"])
                return cls(epoch, segments, tuple(int(v) for v in state.get("next_stream", ())))
            old, streams = state["fingerprint"], state["streams"]
            world, workers = int(old["world_size"]), max(int(old["num_workers"]), 1)
            delivered = tuple(int(streams.get(f"rank{r}-worker{w}", -1)) for r in range(world) for w in range(workers))
            return cls(epoch, (Segment(world, workers, old["on_uneven"], delivered),))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise ValueError("not a data position: expected the dict a DataLoader's state_dict() returns") from None


@dataclass(frozen=True)
class ResumePoint:
    """How one rank's streams run the resumed epoch: after the ``prior`` segments, each stream
    ``skip``-ping what it already delivered (when continuing the last segment), torch's worker ``j``
    running stream ``(j + rotate) % workers`` so batches come in the order they would have."""

    epoch: int
    prior: tuple[Segment, ...]
    skip: tuple[int, ...]  # per worker of this rank
    rotate: int

    def stream_of(self, worker: int, workers: int) -> int:
        return (worker + self.rotate) % max(workers, 1)


def resume_point(position: Position, rank: int, world_size: int, num_workers: int, on_uneven: str) -> ResumePoint:
    """Where rank ``rank`` of a grid of this shape resumes ``position``.

    Raises:
        ValueError: the position lacks a count this resume needs (one-line reason).

    Example:
        >>> done = Position(0, (Segment(2, 2, "pad", (3, 2, 2, 2)),), next_stream=(1, 0))
        >>> resume_point(done, 0, 2, 2, "pad")
        ResumePoint(epoch=0, prior=(), skip=(3, 2), rotate=1)
        >>> resume_point(done, 2, 3, 2, "pad").prior == done.segments
        True
    """
    segments = position.segments
    kept = continuation(segments, world_size, num_workers, on_uneven)
    workers = max(num_workers, 1)
    if kept == len(segments):  # a new segment over what the others left: every count is needed
        for segment in segments:
            rank_missing = segment.missing_rank()
            if rank_missing is not None:
                raise ValueError(
                    f"cannot resume on {world_size} ranks x {workers} workers: the checkpoint holds no data "
                    f"position for rank {rank_missing} (it was taken without torch.distributed, each rank "
                    f"saving only its own); resume on its grid ({segment.world_size} x {segment.workers}, "
                    f"on_uneven={segment.on_uneven!r})"
                )
        return ResumePoint(position.epoch, segments, (0,) * workers, 0)
    last = segments[-1]
    skip = tuple(last.count(rank, w) for w in range(workers))
    if min(skip) < 0:
        raise ValueError(
            f"cannot resume rank {rank}: the checkpoint holds no data position for it (it was taken "
            "without torch.distributed, each rank saving only its own); load each rank's own state"
        )
    rotate = position.next_stream[rank] % workers if rank < len(position.next_stream) else 0
    return ResumePoint(position.epoch, tuple(segments[:kept]), skip, rotate)
