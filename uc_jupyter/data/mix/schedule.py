"""Which source each sample of a mix comes from: a deterministic interleave by weight. Pure, no I/O.

The schedule is Tijdeman's solution of the chairman assignment problem, in exact integer
arithmetic: each sample goes to the source whose next sample is due first among those far enough
behind their share. It depends on the weights alone, so every rank and worker computes the same one,
and a mix epoch always runs it from its start.

The guarantee (``tests/data/mix/test_schedule.py`` proves it with hypothesis, in exact fractions):

- every prefix of ``t`` samples holds source ``j`` ``floor(p_j t)`` or ``ceil(p_j t)`` times, where
  ``p_j`` is its weight over the sum (the quota property; in fact ``|count - p_j t| <= 1 - 1/(2n-2)``
  for ``n`` sources);
- so every window of ``W`` consecutive samples holds it within 2 of ``p_j W`` (strictly), and with
  two sources within 1.

Within 1 for every window and every weight vector cannot be had: no sequence of any length 70 or
more with weights 3:30:1:1 keeps every window within 1 (the test searches them all). Integer
weights repeat the schedule every ``sum(weights)`` samples, exactly in proportion.

Example:
    >>> interleave([3, 1], 8).tolist()
    [0, 0, 1, 0, 0, 0, 1, 0]
    >>> epoch_length([3, 1], sizes=[6, 1], until="first_exhausted")  # source 1's one item is the 3rd sample
    3
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

__all__ = ["UNTIL", "Until", "checked_weights", "epoch_length", "interleave", "occurrences", "per_source"]

Until = Literal["all_seen", "first_exhausted", "steps"]
UNTIL: tuple[Until, ...] = ("all_seen", "first_exhausted", "steps")


def checked_weights(weights: object, names: Sequence[str]) -> tuple[Fraction, ...]:
    """``weights`` as exact fractions, one per source named in ``names``; a one-line error for a
    wrong count, a value that is not a finite number >= 0, or all zero.

    Example:
        >>> checked_weights([0.5, 2], ["a", "b"])
        (Fraction(1, 2), Fraction(2, 1))
    """
    if isinstance(weights, str | bytes) or not isinstance(weights, Sequence):
        raise ValueError(f"weights must be a list of numbers, one per source; got {weights!r}")
    if len(weights) != len(names):
        raise ValueError(f"{len(weights)} weights for {len(names)} sources: give one weight per source")
    checked: list[Fraction] = []
    for name, weight in zip(names, weights, strict=True):
        if isinstance(weight, bool) or not isinstance(weight, int | float | Fraction):
            raise ValueError(f"the weight of {name} must be a number; got {weight!r}")
        if isinstance(weight, float) and not math.isfinite(weight):
            raise ValueError(f"the weight of {name} is {weight}: give a finite number >= 0")
        if weight < 0:
            raise ValueError(f"the weight of {name} is {weight}: weights must be >= 0")
        checked.append(Fraction(weight))
    if not any(checked):
        raise ValueError("every weight is 0: give at least one source a positive weight")
    return tuple(checked)


def _integer_weights(weights: Sequence[Fraction | int | float]) -> list[int]:
    """The weights scaled to the smallest whole numbers in the same proportion (exact)."""
    exact = [Fraction(w) for w in weights]
    scale = math.lcm(*(w.denominator for w in exact))
    whole = [int(w * scale) for w in exact]
    divisor = math.gcd(*whole)
    return [w // divisor for w in whole]


def interleave(weights: Sequence[Fraction | int | float], length: int) -> npt.NDArray[np.int64]:
    """The source of each of the first ``length`` samples (see the module docstring); read-only."""
    return _interleave(tuple(_integer_weights(weights)), length)


# A pass asks for its epoch's schedule several times (its plan, its length, the next epoch's), and
# each made it again: at 20,000 samples that was about 0.3 us a sample of a pass, a third of what a
# mix of one source cost beside the source alone. The arrays are read-only, so they can be shared.
# A mix asks for two (its epoch's length and the horizon its length is found in); each holds 8 bytes
# a sample, so few are kept.
@functools.lru_cache(maxsize=4)
def _interleave(whole: tuple[int, ...], length: int) -> npt.NDArray[np.int64]:
    period = sum(whole)
    steps = min(length, period)  # every count is exactly in proportion after a period: it repeats
    taken = np.empty(steps, dtype=np.int64)
    counts = [0] * len(whole)
    # Tijdeman's rule with margin 1 / (2n - 2), in integers: among the sources at least that margin
    # behind their share, the one whose next sample is due first. It keeps every source within
    # 1 - 1 / (2n - 2) of its share after every sample (a greedy "most behind" round-robin does not).
    twice = max(2 * len(whole) - 2, 1)
    for t in range(1, steps + 1):
        best = -1
        for j, weight in enumerate(whole):
            if weight == 0 or (weight * t - counts[j] * period) * twice < period:
                continue  # not far enough behind its share (or never due)
            due = twice * (counts[j] + 1) - 1  # its next sample is due at due / (twice * weight)
            if best < 0 or due * whole[best] < (twice * (counts[best] + 1) - 1) * weight:
                best = j
        if best < 0:  # the theorem says some source always is; kept total for safety
            best = max(range(len(whole)), key=lambda j: whole[j] * t - counts[j] * period)
        counts[best] += 1
        taken[t - 1] = best
    schedule = taken if steps == length else np.resize(taken, length)
    schedule.setflags(write=False)
    return schedule


def occurrences(schedule: npt.NDArray[np.int64], sources: int) -> npt.NDArray[np.int64]:
    """For each sample, how many samples of its source came before it in ``schedule``.

    Example:
        >>> occurrences(np.array([0, 1, 0, 0, 1]), 2).tolist()
        [0, 0, 1, 2, 1]
    """
    counts = np.empty(len(schedule), dtype=np.int64)
    for source in range(sources):
        at = np.flatnonzero(schedule == source)
        counts[at] = np.arange(len(at), dtype=np.int64)
    return counts


def per_source(schedule: npt.NDArray[np.int64], sources: int) -> tuple[int, ...]:
    """How many samples of each source ``schedule`` holds."""
    return tuple(int(c) for c in np.bincount(schedule, minlength=sources))


def epoch_length(
    weights: Sequence[Fraction | int | float], sizes: Sequence[int], until: Until, steps: int | None = None
) -> int:
    """Samples in a mix epoch: ``steps``; or up to the sample that completes the first source's
    items (``"first_exhausted"``), or every source's (``"all_seen"``); a source of weight 0 is
    never reached, so it neither ends nor holds up an epoch."""
    if until == "steps":
        if steps is None:
            raise ValueError('until="steps" needs steps=, the samples of a mix epoch')
        return steps
    live = [j for j, w in enumerate(weights) if w > 0]
    # Source j's n-th sample comes after about n / p_j samples; search the schedule that far.
    total = sum(Fraction(w) for w in weights)
    needed = [sizes[j] * total / Fraction(weights[j]) for j in live]
    horizon = math.ceil(max(needed) if until == "all_seen" else min(needed)) + len(weights) + 1
    schedule = interleave(weights, horizon)
    ends = []
    for j in live:
        at = np.flatnonzero(schedule == j)
        if len(at) >= sizes[j]:  # "first_exhausted" searches only as far as the first source's end
            ends.append(int(at[sizes[j] - 1]) + 1)
    return max(ends) if until == "all_seen" else min(ends)
