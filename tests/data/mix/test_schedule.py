"""The mix schedule (uc_jupyter.data.mix.schedule): proportions proven in exact fractions, one-line refusals."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.data.mix.schedule import checked_weights, epoch_length, interleave, occurrences, per_source

whole_weights = st.lists(st.integers(min_value=0, max_value=40), min_size=1, max_size=7).filter(any)
any_weights = st.lists(
    st.one_of(st.integers(min_value=0, max_value=40), st.floats(min_value=0.001, max_value=50.0)),
    min_size=1,
    max_size=7,
).filter(any)


def prefix_errors(schedule: npt.NDArray[np.int64], share: Fraction, source: int) -> list[Fraction]:
    """count of ``source`` in each prefix (the empty one too) less ``share`` times its length."""
    counts = np.concatenate([[0], np.cumsum(schedule == source)])
    return [int(c) - share * t for t, c in enumerate(counts)]


@settings(max_examples=150, deadline=None)
@given(any_weights, st.integers(min_value=1, max_value=250))
def test_every_prefix_holds_each_source_floor_or_ceil_of_its_share(weights: list[float], length: int) -> None:
    schedule = interleave(weights, length)
    total = sum(Fraction(w) for w in weights)
    # Tijdeman's bound, 1 - 1/(2n - 2) for n sources (exact with one): below 1, so floor or ceil.
    bound = 1 - Fraction(1, 2 * len(weights) - 2) if len(weights) > 1 else Fraction(0)
    for source, weight in enumerate(weights):
        errors = prefix_errors(schedule, Fraction(weight) / total, source)
        assert all(abs(e) <= bound for e in errors), (weights, source)
    if not all(weights):
        assert set(schedule.tolist()) <= {j for j, w in enumerate(weights) if w}  # weight 0: never taken


@settings(max_examples=150, deadline=None)
@given(any_weights, st.integers(min_value=1, max_value=200))
def test_every_window_holds_each_source_within_2_of_its_share_and_within_1_with_two_sources(
    weights: list[float], length: int
) -> None:
    schedule = interleave(weights, length)
    total = sum(Fraction(w) for w in weights)
    bound = 1 if len(weights) <= 2 else 2
    for source, weight in enumerate(weights):
        errors = prefix_errors(schedule, Fraction(weight) / total, source)
        # A window's count less its share is the difference of two prefixes' errors.
        assert max(errors) - min(errors) <= bound
        if bound == 2:
            assert max(errors) - min(errors) < 2


@settings(max_examples=60, deadline=None)
@given(whole_weights, st.integers(min_value=1, max_value=5))
def test_whole_weights_repeat_exactly_in_proportion_every_period(weights: list[int], periods: int) -> None:
    divisor = math.gcd(*weights)
    period = sum(weights) // divisor
    schedule = interleave(weights, period * periods)
    assert per_source(schedule, len(weights)) == tuple(w // divisor * periods for w in weights)
    assert schedule.tolist() == interleave(weights, period).tolist() * periods


def test_the_same_weights_in_other_units_give_the_same_schedule() -> None:
    assert interleave([3, 1], 12).tolist() == interleave([0.75, 0.25], 12).tolist() == interleave([30, 10], 12).tolist()
    assert interleave([3, 1], 8).tolist() == [0, 0, 1, 0, 0, 0, 1, 0]


def windows_within_1_exist(weights: list[int], length: int) -> bool:
    """Whether any sequence of ``length`` keeps every window of every source within 1 of its share
    (a depth-first search of them all, cut where a prefix already breaks it)."""
    total = sum(weights)
    shares = [Fraction(w, total) for w in weights]
    counts = [0] * len(weights)
    low = [Fraction(0)] * len(weights)
    high = [Fraction(0)] * len(weights)

    def extend(t: int) -> bool:
        if t == length:
            return True
        for source in sorted(range(len(weights)), key=lambda j: (counts[j] + 1) / shares[j]):
            counts[source] += 1
            saved = list(low), list(high)
            fits = True
            for j, share in enumerate(shares):
                error = counts[j] - share * (t + 1)
                low[j], high[j] = min(low[j], error), max(high[j], error)
                fits = fits and high[j] - low[j] <= 1
            if fits and extend(t + 1):
                return True
            low[:], high[:] = saved
            counts[source] -= 1
        return False

    return extend(0)


def test_within_1_for_every_window_cannot_be_had_for_every_weight_vector() -> None:
    # Why the guarantee is within 2: 3:30:1:1 has no sequence of 70 samples within 1 in every window.
    assert not windows_within_1_exist([3, 30, 1, 1], 70)
    assert windows_within_1_exist([1, 2, 3, 4], 20)  # the search finds one where there is one


def test_occurrences_number_each_sources_samples() -> None:
    assert occurrences(np.array([1, 0, 1, 1, 0]), 2).tolist() == [0, 0, 1, 2, 1]


@pytest.mark.parametrize(
    ("weights", "sizes", "until", "length"),
    [
        ([1, 1], [2, 5], "first_exhausted", 3),  # source 0's second sample is the 3rd
        ([1, 1], [2, 5], "all_seen", 10),  # source 1's fifth is the 10th
        ([1, 0], [2, 5], "all_seen", 2),  # a source of weight 0 never holds an epoch up
        ([1, 3], [2, 5], "first_exhausted", 6),  # 1:3 runs 1 0 1 1: source 0's second sample is the 6th
    ],
)
def test_an_epoch_ends_when_the_rule_says(weights: list[int], sizes: list[int], until: str, length: int) -> None:
    assert epoch_length(weights, sizes, until, None) == length  # type: ignore[arg-type]
    assert epoch_length(weights, sizes, "steps", 17) == 17


@pytest.mark.parametrize(
    ("weights", "message"),
    [
        ([1], "1 weights for 2 sources: give one weight per source"),
        ([1, -1], "the weight of b is -1: weights must be >= 0"),
        ([0, 0.0], "every weight is 0: give at least one source a positive weight"),
        ([1, float("nan")], "the weight of b is nan: give a finite number >= 0"),
        ([1, float("inf")], "the weight of b is inf: give a finite number >= 0"),
        ([1, "2"], "the weight of b must be a number; got '2'"),
        ([True, 1], "the weight of a must be a number; got True"),
        ("12", "weights must be a list of numbers, one per source; got '12'"),
    ],
)
def test_bad_weights_are_refused_in_one_line(weights: object, message: str) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        checked_weights(weights, ["a", "b"])
