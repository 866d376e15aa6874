"""The telemetry model: log-spaced histograms, cumulative samples, and the totals of a snapshot."""

from __future__ import annotations

import dataclasses
import itertools
import math
import statistics
from collections.abc import Callable, Sequence
from types import MappingProxyType

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from uc_jupyter.telemetry.model import BUCKET_BOUNDS, MAIN_WORKER, Histogram, Sample, Snapshot

STEP = 10 ** (1 / 8)  # the ratio of neighbouring bucket bounds
QUANTILES = (0.5, 0.95, 0.99)

seconds = st.floats(min_value=1e-6, max_value=1e4, allow_nan=False, allow_infinity=False)
value_lists = st.lists(seconds, min_size=1, max_size=200)
fractions = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)


def bucket_range(index: int) -> tuple[float, float]:
    """The nominal [low, high] of bucket ``index``; the two end buckets are one step wide."""
    high = BUCKET_BOUNDS[index] if index < len(BUCKET_BOUNDS) else BUCKET_BOUNDS[-1] * STEP
    low = BUCKET_BOUNDS[index - 1] if index > 0 else BUCKET_BOUNDS[0] / STEP
    return low, high


def order_statistic(values: Sequence[float], q: float) -> float:
    """The smallest value ``x`` with at least ``q * n`` values at or below it."""
    ordered = sorted(values)
    k = max(1, math.ceil(q * len(ordered)))
    return ordered[k - 1]


def sample(rank: int, worker: int, seq: int = 0, time: float = 0.0, **fields: object) -> Sample:
    return Sample(rank, worker, seq, time, **fields)  # type: ignore[arg-type]


def snapshot_of(*samples: Sample, time: float = 100.0) -> Snapshot:
    return Snapshot(MappingProxyType({s.producer: s for s in samples}), time)


# ---------------------------------------------------------------- bucket bounds


def test_bounds_are_strictly_increasing() -> None:
    assert all(a < b for a, b in itertools.pairwise(BUCKET_BOUNDS))


def test_bounds_span_10_us_to_1000_s_with_8_per_decade() -> None:
    assert len(BUCKET_BOUNDS) == 8 * 8 + 1
    assert BUCKET_BOUNDS[0] == pytest.approx(1e-5, rel=1e-12)
    assert BUCKET_BOUNDS[-1] == pytest.approx(1e3, rel=1e-12)
    for a, b in itertools.pairwise(BUCKET_BOUNDS):
        assert b / a == pytest.approx(STEP, rel=1e-12)
    for decade in range(9):
        assert BUCKET_BOUNDS[8 * decade] == pytest.approx(10.0 ** (decade - 5), rel=1e-12)


def test_an_empty_histogram_has_one_count_per_bucket_plus_overflow() -> None:
    h = Histogram()
    assert len(h.counts) == len(BUCKET_BOUNDS) + 1
    assert (h.count, h.total, h.squares, h.mean, h.variance) == (0, 0.0, 0.0, 0.0, 0.0)


@pytest.mark.parametrize("index", [0, 1, 7, 8, 35, 63, 64])
def test_a_bound_belongs_to_its_own_bucket(index: int) -> None:
    # The bounds are upper bounds: a value equal to one is counted below it, a bit more above it.
    bound = BUCKET_BOUNDS[index]
    assert Histogram.bucket(bound) == index
    assert Histogram.bucket(bound * (1 + 1e-9)) == index + 1


@given(seconds)
def test_every_value_lands_between_its_bucket_bounds(value: float) -> None:
    index = Histogram.bucket(value)
    assert 0 <= index <= len(BUCKET_BOUNDS)
    if index > 0:
        assert BUCKET_BOUNDS[index - 1] < value
    if index < len(BUCKET_BOUNDS):
        assert value <= BUCKET_BOUNDS[index]


# ---------------------------------------------------------------- of, count, mean, variance


@settings(max_examples=150, deadline=None)
@given(value_lists)
def test_of_counts_sums_and_moments(values: list[float]) -> None:
    h = Histogram.of(values)
    assert h.count == len(values) == sum(h.counts)
    assert all(c >= 0 for c in h.counts)
    for index in {Histogram.bucket(v) for v in values}:
        assert h.counts[index] == sum(1 for v in values if Histogram.bucket(v) == index)
    assert h.total == pytest.approx(math.fsum(values), rel=1e-9)
    assert h.squares == pytest.approx(math.fsum(v * v for v in values), rel=1e-9)
    assert h.mean == pytest.approx(statistics.fmean(values), rel=1e-9)
    # The variance comes from the sum of squares, so it is exact up to rounding on the scale of
    # the largest square (see the report on cancellation), never negative.
    scale = max(values) ** 2
    assert h.variance >= 0.0
    assert h.variance == pytest.approx(statistics.pvariance(values), rel=1e-6, abs=1e-12 * scale)


def test_variance_of_a_constant_is_zero() -> None:
    assert Histogram.of([0.25] * 7).variance == 0.0
    assert Histogram.of([1e4] * 3).variance == 0.0


def test_known_mean_and_variance() -> None:
    h = Histogram.of([1.0, 2.0, 3.0, 4.0])
    assert (h.count, h.mean) == (4, 2.5)
    assert h.variance == pytest.approx(1.25)


def test_a_histogram_is_frozen() -> None:
    h = Histogram.of([0.1])
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.total = 5.0  # type: ignore[misc]


# ---------------------------------------------------------------- merged and minus


@settings(max_examples=100, deadline=None)
@given(value_lists, value_lists)
def test_merged_equals_the_histogram_of_both(a: list[float], b: list[float]) -> None:
    merged = Histogram.of(a).merged(Histogram.of(b))
    whole = Histogram.of(a + b)
    assert merged.counts == whole.counts
    assert merged.count == len(a) + len(b)
    assert merged.total == pytest.approx(whole.total, rel=1e-9)
    assert merged.squares == pytest.approx(whole.squares, rel=1e-9)
    assert Histogram.of(b).merged(Histogram.of(a)).counts == merged.counts


@settings(max_examples=100, deadline=None)
@given(value_lists, value_lists)
def test_minus_inverts_merged(a: list[float], b: list[float]) -> None:
    ha, hb = Histogram.of(a), Histogram.of(b)
    back = ha.merged(hb).minus(hb)
    assert back.counts == ha.counts
    assert back.count == len(a)
    # Subtracting sums loses precision on the scale of the larger one.
    scale = ha.total + hb.total
    assert back.total == pytest.approx(ha.total, rel=1e-9, abs=1e-12 * scale)
    # What a cumulative histogram recorded since an earlier state of it.
    assert Histogram.of(a + b).minus(ha).counts == hb.counts


def test_merging_with_empty_changes_nothing() -> None:
    h = Histogram.of([0.001, 0.2, 3.0])
    assert h.merged(Histogram()) == h
    assert Histogram().merged(h) == h
    assert h.minus(Histogram()) == h
    assert h.minus(h).count == 0


# ---------------------------------------------------------------- quantile


def _log_uniform() -> np.ndarray:
    return 10 ** np.random.default_rng(20240611).uniform(-3.0, 0.0, 10_000)  # 1 ms .. 1 s


def _exponential() -> np.ndarray:
    return np.random.default_rng(7).exponential(0.05, 10_000)  # mean 50 ms


@pytest.mark.parametrize("q", QUANTILES)
@pytest.mark.parametrize("draw", [_log_uniform, _exponential], ids=["log-uniform", "exponential"])
def test_quantile_of_a_known_distribution_is_within_one_bucket(draw: Callable[[], np.ndarray], q: float) -> None:
    data = draw()
    estimate = Histogram.of(data.tolist()).quantile(q)
    exact = float(np.quantile(data, q))
    assert 1 / STEP <= estimate / exact <= STEP


@settings(max_examples=150, deadline=None)
@given(value_lists, fractions)
def test_quantile_lies_in_the_bucket_of_the_order_statistic(values: list[float], q: float) -> None:
    estimate = Histogram.of(values).quantile(q)
    low, high = bucket_range(Histogram.bucket(order_statistic(values, q)))
    assert low * (1 - 1e-12) <= estimate <= high * (1 + 1e-12)
    assert math.isfinite(estimate)


@settings(max_examples=150, deadline=None)
@given(value_lists, st.lists(fractions, min_size=2, max_size=10))
def test_quantile_is_monotone_in_q(values: list[float], qs: list[float]) -> None:
    h = Histogram.of(values)
    estimates = [h.quantile(q) for q in sorted(qs)]
    assert all(a <= b for a, b in itertools.pairwise(estimates))


def test_quantile_is_monotone_at_a_bucket_edge() -> None:
    # Interpolating to the top of a bucket, low * exp(log(high / low)), rounds one ulp past ``high``
    # for buckets 5 and 35; unclamped, that made quantile(0.5) > quantile(nextafter(0.5)) here.
    for low_value, high_value, index in ((0.2, 0.25, 35), (4e-5, 5e-5, 5)):
        h = Histogram.of([low_value, high_value])  # one value at the top bucket, one in the next
        assert Histogram.bucket(low_value) == index
        q = 0.5
        assert h.quantile(q) <= h.quantile(math.nextafter(q, 1.0))
        assert h.quantile(q) <= BUCKET_BOUNDS[index]
        assert Histogram.of([low_value]).quantile(1.0) <= BUCKET_BOUNDS[index]


@pytest.mark.parametrize("q", [0.0, 0.25, 0.5, 1.0])
def test_quantile_of_empty_is_zero(q: float) -> None:
    assert Histogram().quantile(q) == 0.0


@pytest.mark.parametrize("q", [-0.1, 1.5, -1e-9, 1.0000001, math.nan])
def test_quantile_outside_0_1_raises(q: float) -> None:
    with pytest.raises(ValueError, match="between 0 and 1"):
        Histogram.of([0.1]).quantile(q)


def test_quantile_extremes_stay_inside_the_data_buckets() -> None:
    h = Histogram.of([0.001, 0.002, 0.5])
    low, _ = bucket_range(Histogram.bucket(0.001))
    _, high = bucket_range(Histogram.bucket(0.5))
    assert low <= h.quantile(0.0) <= 0.001
    top = h.quantile(1.0)
    assert top * (1 + 1e-12) >= 0.5 and top <= high * (1 + 1e-12)


@pytest.mark.parametrize("value", [0.0, 1e-12, 1e-6, 9.9e-6])
def test_values_below_the_first_bound_land_in_the_first_bucket(value: float) -> None:
    h = Histogram.of([value] * 3)
    assert h.counts[0] == 3 and h.count == 3
    for q in (0.0, 0.5, 1.0):
        estimate = h.quantile(q)
        assert math.isfinite(estimate) and 0.0 < estimate <= BUCKET_BOUNDS[0]


@pytest.mark.parametrize("value", [1000.5, 1e4, 1e9])
def test_values_above_the_last_bound_land_in_the_overflow_bucket(value: float) -> None:
    h = Histogram.of([value] * 3)
    assert h.counts[-1] == 3 and h.count == 3
    for q in (0.0, 0.5, 0.99, 1.0):
        estimate = h.quantile(q)
        assert math.isfinite(estimate) and BUCKET_BOUNDS[-1] <= estimate <= BUCKET_BOUNDS[-1] * STEP * (1 + 1e-12)


def test_mixed_extremes_give_finite_ordered_quantiles() -> None:
    h = Histogram.of([1e-9, 0.05, 0.05, 1e7])
    estimates = [h.quantile(q) for q in (0.0, 0.25, 0.5, 0.75, 1.0)]
    assert all(math.isfinite(e) for e in estimates)
    assert estimates == sorted(estimates)


# ---------------------------------------------------------------- Sample


def test_advanced_bumps_seq_and_applies_changes() -> None:
    before = sample(0, 2, seq=4, time=1.0, files=10, hits=3)
    after = before.advanced(time=2.0, files=12)
    assert (after.seq, after.time, after.files, after.hits) == (5, 2.0, 12, 3)
    assert (after.rank, after.worker, after.producer) == (0, 2, (0, 2))
    assert (before.seq, before.time, before.files) == (4, 1.0, 10)


def test_advanced_without_changes_only_bumps_seq() -> None:
    before = sample(1, MAIN_WORKER, seq=0, batches=3)
    assert before.advanced() == dataclasses.replace(before, seq=1)


@given(st.integers(min_value=0, max_value=30))
def test_advanced_n_times_adds_n(n: int) -> None:
    s = sample(0, 0, seq=7)
    for _ in range(n):
        s = s.advanced()
    assert s.seq == 7 + n


def test_a_sample_is_frozen() -> None:
    s = sample(0, 0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.seq = 3  # type: ignore[misc]


def test_sample_defaults_are_zero_and_empty() -> None:
    s = sample(3, MAIN_WORKER, seq=1, time=2.0)
    assert s.producer == (3, MAIN_WORKER)
    assert s.fetch == Histogram() and s.between == Histogram()
    assert (s.batches, s.samples, s.hits, s.misses, s.shard_size, s.started) == (0, 0, 0, 0, 0, 0.0)


# ---------------------------------------------------------------- Snapshot

FETCH_0 = [0.010] * 10 + [0.4]
FETCH_1 = [0.020] * 5
BETWEEN_0 = [0.1] * 10
BETWEEN_1 = [0.2, 0.3]


def training_snapshot() -> Snapshot:
    return snapshot_of(
        # Inserted out of rank order on purpose.
        sample(
            1,
            MAIN_WORKER,
            seq=9,
            time=7.0,
            started=2.0,
            batches=5,
            samples=160,
            fetch=Histogram.of(FETCH_1),
            between=Histogram.of(BETWEEN_1),
        ),
        sample(1, 0, seq=2, time=20.0, shard_size=99, hits=5, misses=5, cache_used_bytes=999),  # no cache_max
        sample(
            0,
            MAIN_WORKER,
            seq=3,
            time=12.0,
            started=2.0,
            batches=11,
            samples=352,
            fetch=Histogram.of(FETCH_0),
            between=Histogram.of(BETWEEN_0),
        ),
        sample(
            0,
            0,
            seq=4,
            time=10.0,
            shard_size=100,
            hits=30,
            misses=10,
            bytes_downloaded=1_000,
            cache_used_bytes=500,
            cache_max_bytes=1_000,
        ),
        sample(
            0,
            1,
            seq=5,
            time=11.0,
            shard_size=101,
            hits=20,
            bytes_downloaded=500,
            cache_used_bytes=700,
            cache_max_bytes=1_000,
        ),
    )


def test_snapshot_totals_over_producers() -> None:
    snap = training_snapshot()
    assert snap.ranks == (0, 1)
    assert snap.batches == 16
    assert snap.samples_delivered == 512
    assert (snap.hits, snap.misses) == (55, 15)
    assert snap.hit_rate == pytest.approx(55 / 70)
    assert snap.bytes_downloaded == 1_500
    assert snap.cache_max_bytes == 1_000


def test_snapshot_merges_latency_histograms_over_producers() -> None:
    snap = training_snapshot()
    assert snap.fetch.counts == Histogram.of(FETCH_0 + FETCH_1).counts
    assert snap.fetch.total == pytest.approx(math.fsum(FETCH_0 + FETCH_1))
    assert snap.between.counts == Histogram.of(BETWEEN_0 + BETWEEN_1).counts
    assert snap.between.count == 12


def test_percentiles_come_from_the_merged_fetch_histogram() -> None:
    snap = training_snapshot()
    p = snap.percentiles()
    assert list(p) == ["p50", "p95", "p99"]
    fetch = Histogram.of(FETCH_0 + FETCH_1)
    assert p == {"p50": fetch.quantile(0.5), "p95": fetch.quantile(0.95), "p99": fetch.quantile(0.99)}
    assert p["p50"] <= p["p95"] <= p["p99"]


def test_samples_per_second_from_the_training_loops_only() -> None:
    snap = snapshot_of(
        sample(0, MAIN_WORKER, time=12.0, started=2.0, samples=300),  # 10 s
        sample(1, MAIN_WORKER, time=7.0, started=2.0, samples=200),  # 5 s
        sample(0, 0, time=1_000.0, started=999.0, samples=10_000),  # a worker: ignored
    )
    # Every loop's samples over the longest-running loop.
    assert snap.samples_per_second == pytest.approx(500 / 10.0)


@pytest.mark.parametrize(
    "samples",
    [
        (),
        (sample(0, 0, time=5.0, started=1.0, samples=100),),  # no training loop
        (sample(0, MAIN_WORKER, time=5.0, started=5.0, samples=100),),  # no time elapsed
        (sample(0, MAIN_WORKER, time=5.0, started=1.0, samples=0),),  # nothing delivered
    ],
    ids=["empty", "workers-only", "no-elapsed", "no-samples"],
)
def test_samples_per_second_is_zero_without_a_measurable_loop(samples: tuple[Sample, ...]) -> None:
    assert snapshot_of(*samples).samples_per_second == 0.0


def test_shard_sizes_sum_workers_per_rank_and_ignore_the_loop() -> None:
    snap = snapshot_of(
        sample(2, 1, shard_size=40),
        sample(0, MAIN_WORKER, shard_size=1_000_000),
        sample(0, 0, shard_size=100),
        sample(2, 0, shard_size=41),
        sample(0, 1, shard_size=101),
    )
    sizes = snap.shard_sizes()
    assert sizes == {0: 201, 2: 81}
    assert list(sizes) == [0, 2]
    per_worker = snap.worker_shard_sizes()
    assert per_worker == {(0, 0): 100, (0, 1): 101, (2, 0): 41, (2, 1): 40}
    assert list(per_worker) == sorted(per_worker)


def test_cache_used_bytes_from_the_newest_sample_that_knows_the_cache() -> None:
    snap = training_snapshot()
    # (0, 1) at t=11 is the newest with cache_max_bytes; (1, 0) at t=20 has none and is ignored.
    assert snap.cache_used_bytes == 700


@given(st.lists(st.tuples(st.floats(0, 1e6), st.integers(0, 10**12)), min_size=1, max_size=8, unique_by=lambda t: t[0]))
def test_cache_used_bytes_follows_time_not_insertion(readings: list[tuple[float, int]]) -> None:
    samples = [
        sample(0, worker, time=t, cache_used_bytes=used, cache_max_bytes=10**13)
        for worker, (t, used) in enumerate(readings)
    ]
    newest = max(readings)
    assert snapshot_of(*samples).cache_used_bytes == newest[1]
    assert snapshot_of(*reversed(samples)).cache_used_bytes == newest[1]


@pytest.mark.parametrize("ranks", [(3, 1, 0), (0, 1, 3), (5,), (2, 2, 0), (8, 1), (17, 3, 2, 9)])
def test_ranks_are_sorted_and_distinct(ranks: tuple[int, ...]) -> None:
    snap = snapshot_of(*(sample(rank, worker) for worker, rank in enumerate(ranks)))
    assert snap.ranks == tuple(sorted(set(ranks)))


def test_an_empty_snapshot_is_all_zero() -> None:
    snap = snapshot_of()
    assert snap.ranks == ()
    assert (snap.batches, snap.samples_delivered, snap.hits, snap.misses) == (0, 0, 0, 0)
    assert (snap.hit_rate, snap.samples_per_second) == (0.0, 0.0)
    assert (snap.bytes_downloaded, snap.cache_used_bytes, snap.cache_max_bytes) == (0, 0, 0)
    assert snap.fetch == Histogram() and snap.between == Histogram()
    assert snap.percentiles() == {"p50": 0.0, "p95": 0.0, "p99": 0.0}
    assert snap.shard_sizes() == {} and snap.worker_shard_sizes() == {}


def test_hit_rate_without_lookups_is_zero() -> None:
    assert snapshot_of(sample(0, 0, files=3)).hit_rate == 0.0
    assert snapshot_of(sample(0, 0, hits=4)).hit_rate == 1.0
    assert snapshot_of(sample(0, 0, misses=4)).hit_rate == 0.0


def test_a_snapshot_is_frozen() -> None:
    snap = snapshot_of(sample(0, 0))
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap.time = 1.0  # type: ignore[misc]


def test_resumed_epochs_are_the_streams_that_say_so() -> None:
    assert sample(0, 0).resumed_epoch == -1  # a stream whose pass did not resume
    snap = Snapshot(
        {
            (0, MAIN_WORKER): sample(0, MAIN_WORKER),
            (0, 0): dataclasses.replace(sample(0, 0), resumed_epoch=2),
            (1, 0): dataclasses.replace(sample(1, 0), resumed_epoch=2),
            (1, 1): sample(1, 1),
        },
        time=1.0,
    )
    assert snap.resumed_epochs == (2,)
    assert Snapshot({}, time=0.0).resumed_epochs == ()
