"""What a mix epoch delivers: its schedule, and which item of which source each sample is. Pure, no I/O.

A mix epoch runs the schedule of its weights (:mod:`uc_jupyter.data.mix.schedule`) from its start
for :attr:`MixPlan.length` samples. Each source's samples are numbered across the whole job: the
``m``-th sample ever taken of a source of ``n`` items is item ``m % n`` of that source's own epoch
``m // n``, in that epoch's order (its own shuffle and seed, as it would read alone). So a source
that runs out begins its next epoch, reshuffled, while the others go on, and within each of its
epochs every item comes once. A mix epoch starts each source where the epochs before it left it
(:attr:`MixPlan.bases`); weights may change from one mix epoch to the next.

Example:
    >>> first = MixPlan.first([1, 1], sizes=[2, 3], until="first_exhausted")
    >>> first.length, first.counts
    (3, (2, 1))
    >>> second = first.following([1, 1], sizes=[2, 3], until="first_exhausted")
    >>> second.bases
    (2, 1)
    >>> source, taken = second.picks(np.arange(second.length))
    >>> source.tolist(), taken.tolist()   # source 0 begins its second epoch: its samples 2 and 3
    ([0, 1, 0], [2, 1, 3])
    >>> source_items(np.array([0, 1, 2, 3]), 2, shuffle=False, seed=0).tolist()
    [0, 1, 0, 1]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from uc_jupyter.data.mix.schedule import Until, epoch_length, interleave, occurrences, per_source
from uc_jupyter.data.stream.partition import epoch_order

__all__ = ["MixPlan", "source_epochs", "source_items"]


@dataclass(frozen=True)
class MixPlan:
    """One mix epoch: the weights it runs, its length, and where each source stands before it: its
    ``holes`` (samples numbered below its base that it still owes, taken first, in order) and then
    its samples from ``bases`` on."""

    weights: tuple[Fraction, ...]
    length: int
    bases: tuple[int, ...]
    holes: tuple[tuple[int, ...], ...] = ()
    _schedule: list[npt.NDArray[np.int64]] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def first(
        cls, weights: Sequence[Fraction | int | float], sizes: Sequence[int], until: Until, steps: int | None = None
    ) -> MixPlan:
        """The job's first mix epoch."""
        exact = tuple(Fraction(w) for w in weights)
        return cls(exact, epoch_length(exact, sizes, until, steps), (0,) * len(exact))

    def following(
        self, weights: Sequence[Fraction | int | float], sizes: Sequence[int], until: Until, steps: int | None = None
    ) -> MixPlan:
        """The next mix epoch, with ``weights`` (perhaps new ones)."""
        exact = tuple(Fraction(w) for w in weights)
        holes = self._holes()
        bases = tuple(b + max(0, c - len(h)) for b, c, h in zip(self.bases, self.counts, holes, strict=True))
        left = tuple(h[c:] for h, c in zip(holes, self.counts, strict=True))  # owed samples it did not reach
        return MixPlan(exact, epoch_length(exact, sizes, until, steps), bases, left if any(left) else ())

    def rebased(
        self,
        delivered: npt.NDArray[np.bool_],
        weights: Sequence[Fraction | int | float],
        until: Until,
        steps: int | None = None,
    ) -> MixPlan:
        """The rest of this epoch with other ``weights``, ``delivered`` marking the samples the job
        has had: each source owes what the epoch promised it and did not deliver (taken first, in
        order, holes and all); the rest runs until each source has given what it owes
        (``"all_seen"``), the first has (``"first_exhausted"``), or for the samples left
        (``"steps"``). What a source still owes then is taken first in the next epoch.

        Example:
            >>> plan = MixPlan.first([1, 1], [2, 2], "all_seen")           # a b a b
            >>> rest = plan.rebased(np.array([True, False, True, False]), [3, 1], "all_seen")  # b owes 0, 1
            >>> rest.picks(np.arange(rest.length))[1].tolist()  # 3:1 from here on, until b has given both
            [2, 3, 0, 4, 5, 6, 1]
        """
        exact = tuple(Fraction(w) for w in weights)
        sources, taken = self.picks(np.arange(self.length, dtype=np.int64))
        holes = self._holes()
        owed = tuple(
            (*taken[(sources == j) & ~delivered].tolist(), *holes[j][count:]) for j, count in enumerate(self.counts)
        )
        bases = tuple(b + max(0, c - len(h)) for b, c, h in zip(self.bases, self.counts, holes, strict=True))
        if until == "steps":
            length = max(0, self.length - int(delivered.sum()))
        else:
            length = _owed_length(exact, [len(o) for o in owed], until)
        return MixPlan(exact, length, bases, owed if any(owed) else ())

    def _holes(self) -> tuple[tuple[int, ...], ...]:
        return self.holes or ((),) * len(self.weights)

    @property
    def schedule(self) -> npt.NDArray[np.int64]:
        """The source of each sample of the epoch (computed once)."""
        if not self._schedule:
            self._schedule.append(interleave(self.weights, self.length))
        return self._schedule[0]

    @property
    def counts(self) -> tuple[int, ...]:
        """Samples of each source in the epoch."""
        return per_source(self.schedule, len(self.weights))

    def picks(self, positions: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """For samples at ``positions`` of the epoch: their sources, and each one's number among
        all the samples ever taken of its source (see the module docstring)."""
        schedule = self.schedule
        sources = schedule[positions]
        before = occurrences(schedule, len(self.weights))[positions]
        taken = before + np.asarray(self.bases, dtype=np.int64)[sources]
        for j, owed in enumerate(self.holes):
            if owed:  # the source's first samples of this epoch are the ones it owes
                at = (sources == j) & (before < len(owed))
                taken[at] = np.asarray(owed, dtype=np.int64)[before[at]]
                later = (sources == j) & (before >= len(owed))
                taken[later] -= len(owed)
        return sources, taken

    def to_state(self) -> dict[str, Any]:
        """Plain values (weights as exact ``"p/q"`` strings) for a checkpoint."""
        state: dict[str, Any] = {"weights": [str(w) for w in self.weights], "length": self.length}
        state["bases"] = list(self.bases)
        if self.holes:
            state["holes"] = [list(h) for h in self.holes]
        return state

    @classmethod
    def from_state(cls, value: Any) -> MixPlan:
        try:
            weights = tuple(Fraction(str(w)) for w in value["weights"])
            bases = tuple(int(b) for b in value["bases"])
            holes = tuple(tuple(int(t) for t in h) for h in value.get("holes", ()))
            plan = cls(weights, int(value["length"]), bases, holes)
        except (KeyError, TypeError, ValueError, ZeroDivisionError, AttributeError):
            raise ValueError(f"not a mix schedule state: {value!r}") from None
        wrong_holes = bool(plan.holes) and len(plan.holes) != len(plan.weights)
        if len(plan.bases) != len(plan.weights) or plan.length < 0 or min(plan.bases, default=0) < 0 or wrong_holes:
            raise ValueError(f"not a mix schedule state: {value!r}")
        return plan


def _owed_length(weights: tuple[Fraction, ...], owed: list[int], until: Until) -> int:
    """Samples of the schedule of ``weights`` until every source (``"all_seen"``) or the first
    (``"first_exhausted"``) of those that owe something and have a weight has given what it owes."""
    live = [j for j, w in enumerate(weights) if w > 0 and owed[j] > 0]
    if not live:
        return 0
    total = sum(weights)
    horizon = math.ceil(max(owed[j] * total / weights[j] for j in live)) + len(weights) + 1
    schedule = interleave(weights, horizon)
    ends = [int(np.flatnonzero(schedule == j)[owed[j] - 1]) + 1 for j in live]
    return max(ends) if until == "all_seen" else min(ends)


def source_epochs(taken: npt.NDArray[np.int64], size: int | npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The source's own epoch of each of its samples numbered ``taken`` (``size``: its items, or
    each sample's source's)."""
    return taken // size


def source_items(taken: npt.NDArray[np.int64], size: int, *, shuffle: bool, seed: int) -> npt.NDArray[np.int64]:
    """The items (positions in the source's listing or rows) of its samples numbered ``taken``:
    each in its own epoch's order, as the source orders an epoch when read alone."""
    epochs = source_epochs(taken, size)
    items = np.empty(len(taken), dtype=np.int64)
    for epoch in np.unique(epochs):
        at = epochs == epoch
        items[at] = epoch_order(size, shuffle=shuffle, seed=seed, epoch=int(epoch))[taken[at] % size]
    return items
