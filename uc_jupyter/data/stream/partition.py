"""How a list of items is split across ranks and DataLoader workers: pure functions, no I/O.

Every epoch has one order of the items, computed identically on every rank from ``(seed, epoch)``
(or the listing order when not shuffling). Ranks take strided slices of that order, so the union
over ranks is the whole order exactly once; the ``on_uneven`` policy then evens out the ranks:
``"pad"`` repeats items from the start of the order so every rank has the same count (DDP needs
that, or the last collective hangs), ``"drop"`` trims the tail, ``"allow"`` keeps ranks uneven.
Within a rank, workers take strided slices of the rank's share.

Example:
    >>> s = plan(10, Grid(rank=1, world_size=3, worker=0, num_workers=2), on_uneven="pad")
    >>> s.indices.tolist(), s.rank_count, s.padded
    ([1, 7], 4, 1)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, overload

import numpy as np
import numpy.typing as npt

__all__ = [
    "Grid",
    "GrowingCount",
    "OnUneven",
    "Shard",
    "StreamPositions",
    "epoch_order",
    "plan",
    "rank_share",
    "skipped_share",
]

OnUneven = Literal["pad", "drop", "allow"]
_POLICIES = ("pad", "drop", "allow")


@dataclass(frozen=True)
class Grid:
    """Where one stream sits: rank ``rank`` of ``world_size``, worker ``worker`` of ``num_workers``
    (``num_workers`` counts DataLoader worker processes; 0 and 1 both mean a single stream)."""

    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1

    def __post_init__(self) -> None:
        if self.world_size < 1 or not 0 <= self.rank < self.world_size:
            raise ValueError(f"invalid rank {self.rank} of world size {self.world_size}")
        if self.num_workers < 0:
            raise ValueError(f"invalid num_workers {self.num_workers}: give 0 or more")
        workers = max(self.num_workers, 1)
        if not 0 <= self.worker < workers:
            raise ValueError(f"invalid worker {self.worker} of {self.num_workers} workers")

    @property
    def workers(self) -> int:
        return max(self.num_workers, 1)


@dataclass(frozen=True)
class Shard:
    """One stream's items for one epoch, and how its rank was evened out."""

    indices: npt.NDArray[np.int64]  # positions in the listing, in delivery order
    rank_count: int  # items this stream's rank delivers in total (over its workers)
    padded: int  # repeated items in this rank's share (pad)
    dropped: int  # items of this rank's share trimmed away (drop)


def epoch_order(n: int, *, shuffle: bool, seed: int, epoch: int) -> npt.NDArray[np.int64]:
    """The epoch's order of ``range(n)``: identity, or a permutation fixed by ``(seed, epoch)``."""
    if not shuffle:
        return np.arange(n, dtype=np.int64)
    # PCG64 seeded with both numbers: the same permutation on every rank, platform and run.
    return np.random.Generator(np.random.PCG64([seed, epoch])).permutation(n).astype(np.int64)


def rank_share(
    order: npt.NDArray[np.int64], rank: int, world_size: int, on_uneven: OnUneven
) -> tuple[npt.NDArray[np.int64], int, int]:
    """Rank ``rank``'s strided slice of ``order`` after the policy: (items, padded, dropped)."""
    if on_uneven not in _POLICIES:
        raise ValueError(f"invalid on_uneven {on_uneven!r}: use 'pad', 'drop' or 'allow'")
    n = len(order)
    if on_uneven == "allow" or n % world_size == 0:
        return order[rank::world_size], 0, 0
    if on_uneven == "drop":
        kept = n - n % world_size
        share = order[:kept][rank::world_size]
        return share, 0, len(order[rank::world_size]) - len(share)
    total = -(-n // world_size) * world_size
    extended = np.resize(order, total)  # repeats from the start, cycling if n < world_size
    share = extended[rank::world_size]
    return share, len(share) - len(order[rank::world_size]), 0


def plan(
    n: int,
    grid: Grid,
    *,
    shuffle: bool = False,
    seed: int = 0,
    epoch: int = 0,
    on_uneven: OnUneven = "pad",
) -> Shard:
    """The items of stream ``grid`` for ``epoch`` out of ``n`` listed items."""
    order = epoch_order(n, shuffle=shuffle, seed=seed, epoch=epoch)
    share, padded, dropped = rank_share(order, grid.rank, grid.world_size, on_uneven)
    return Shard(
        indices=share[grid.worker :: grid.workers],
        rank_count=len(share),
        padded=padded,
        dropped=dropped,
    )


def skipped_share(skipped: int, grid: Grid) -> int:
    """Stream ``grid``'s share of ``skipped`` items left out before partitioning, so that the shares
    of every stream of every rank add up to ``skipped`` (telemetry sums them).

    Example:
        >>> [skipped_share(5, Grid(rank=r, world_size=2, worker=w, num_workers=2)) for r in (0, 1) for w in (0, 1)]
        [2, 1, 1, 1]
    """
    streams = grid.world_size * grid.workers
    index = grid.rank * grid.workers + grid.worker
    return skipped // streams + (index < skipped % streams)


class GrowingCount(Protocol):
    """Items still arriving (a listing under way): how many there are now and in the end."""

    def known(self) -> int:
        """Items known now, without waiting."""

    def total(self) -> int | None:
        """All the items once they have all arrived, else None."""

    def wait_for(self, count: int) -> int:
        """Wait until ``count`` items are known or all have arrived; how many are known."""


class StreamPositions(Sequence[int]):
    """Stream ``grid``'s positions of an unshuffled epoch while its items still arrive: the same
    positions :func:`plan` gives once they all have (the order is the items' own, so the rank's
    strided share and the worker's strided slice of it are known item by item), after ``skip``
    delivered ones. ``len`` is how many are known now (``on_known`` is told each larger count, with
    the skipped ones); :meth:`wait_beyond` waits for more.

    Example:
        >>> class Five:
        ...     def known(self): return 5
        ...     def total(self): return 5
        ...     def wait_for(self, count): return 5
        >>> list(StreamPositions(Five(), Grid(rank=1, world_size=2), "pad"))
        [1, 3, 0]
    """

    def __init__(
        self,
        items: GrowingCount,
        grid: Grid,
        on_uneven: OnUneven,
        skip: int = 0,
        on_known: Callable[[int], None] | None = None,
    ) -> None:
        if on_uneven not in _POLICIES:
            raise ValueError(f"invalid on_uneven {on_uneven!r}: use 'pad', 'drop' or 'allow'")
        self._items, self._on_uneven, self._skip = items, on_uneven, skip
        self._first = grid.rank + grid.world_size * grid.worker  # the k-th position: first + step * k
        self._step = grid.world_size * grid.workers
        self._world = grid.world_size
        self._seen = 0  # positions known to exist (a lower bound of len, which only grows)
        self._reported = -1
        self._on_known = on_known  # told each new count (the stream's shard size so far)
        self.grid = grid

    def __len__(self) -> int:
        count = self._count(self._items.known(), self._items.total())
        if count > self._reported and self._on_known is not None:
            self._reported = count
            self._on_known(count + self._skip)
        return count

    def wait_beyond(self, length: int) -> bool:
        """Wait until more than ``length`` positions are known, or all items have arrived; whether
        there are more than ``length``."""
        while True:
            total = self._items.total()
            if self._count(self._items.known(), total) > length:
                return True
            if total is not None:
                return False
            self._items.wait_for(self._items.known() + 1)

    @overload
    def __getitem__(self, index: int) -> int: ...

    @overload
    def __getitem__(self, index: slice) -> list[int]: ...

    def __getitem__(self, index: int | slice) -> int | list[int]:
        if isinstance(index, int) and 0 <= index < self._seen:  # per item: no count asked
            return self._at(index)
        known = self._seen = len(self)
        if isinstance(index, slice):
            return [self._at(k) for k in range(*index.indices(known))]
        if not 0 <= index < known:
            raise IndexError(index)
        return self._at(index)

    def _at(self, k: int) -> int:
        position = self._first + self._step * (k + self._skip)
        total = self._items.total()
        return position % total if total and position >= total else position  # pad repeats from the start

    def _count(self, known: int, total: int | None) -> int:
        """Positions (after the skipped ones) below the limit: the policy's once every item is known;
        before, the known items, less for "drop" the tail that may yet be trimmed."""
        world = self._world
        if total is not None:
            limit = {"allow": total, "drop": total - total % world, "pad": -(-total // world) * world}[self._on_uneven]
        else:
            limit = known - (world - 1) if self._on_uneven == "drop" else known
        if limit <= self._first:
            return 0
        return max(0, -(-(limit - self._first) // self._step) - self._skip)
