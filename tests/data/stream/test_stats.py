"""The one shape of stream counters: StreamCounters, its frozen StreamStats, and the telemetry Sample."""

from __future__ import annotations

import dataclasses

from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.data.cache import CacheStats
from uc_jupyter.data.stream.stats import StreamCounters, StreamStats
from uc_jupyter.telemetry.model import Sample

COUNTERS = [f.name for f in dataclasses.fields(StreamCounters)]
# What stays the dataset's own: the telemetry model has no field for it.
NOT_IN_TELEMETRY = {"epoch"}


def test_the_frozen_stats_have_exactly_the_counters_fields_in_order() -> None:
    assert [f.name for f in dataclasses.fields(StreamStats)] == COUNTERS


def test_every_counter_the_telemetry_model_knows_goes_across() -> None:
    sample_fields = {f.name for f in dataclasses.fields(Sample)}
    assert set(COUNTERS) - sample_fields == NOT_IN_TELEMETRY


# A Mix's per-source counters are lists (one per source) in the counters, tuples once frozen; its
# sources' names are a tuple already.
PER_SOURCE = ["source_samples", "source_epochs", "source_seconds", "source_names"]
one_value = st.integers(min_value=0, max_value=2**40)


@given(
    st.lists(one_value, min_size=len(COUNTERS) - 4, max_size=len(COUNTERS) - 4),
    st.lists(st.integers(min_value=0, max_value=99), max_size=4),
)
def test_freezing_and_sampling_carry_every_value(scalars: list[int], per_source: list[int]) -> None:
    assert COUNTERS[-4:] == PER_SOURCE  # the per-source values come last
    seconds = [n / 8 for n in per_source]
    names = tuple(f"main.ml.t{n}" for n in per_source)
    counters = StreamCounters(*scalars, list(per_source), [2 * n for n in per_source], list(seconds), names)
    stats = counters.freeze()
    values = (*scalars, tuple(per_source), tuple(2 * n for n in per_source), tuple(seconds), names)
    assert tuple(getattr(stats, name) for name in COUNTERS) == values
    counters.source_samples.append(1)  # the frozen copy does not follow the live lists either
    counters.source_seconds.append(1.0)
    assert stats.source_samples == tuple(per_source) and stats.source_seconds == tuple(seconds)
    counters.files += 1  # the frozen copy does not follow the live counters
    assert stats.files == values[COUNTERS.index("files")]
    cache = CacheStats("/c", resident_bytes=5, in_flight_bytes=2, max_bytes=100, free_disk_bytes=0,
                       min_free_bytes=0, entries=1, evictions=3)  # fmt: skip
    sample = stats.sample(seq=9, time=2.5, cache=cache)
    assert (sample.rank, sample.worker, sample.seq, sample.time) == (stats.rank, stats.worker, 9, 2.5)
    for name in set(COUNTERS) - NOT_IN_TELEMETRY - {"rank", "worker"}:
        assert getattr(sample, name) == getattr(stats, name), name
    assert (sample.cache_used_bytes, sample.cache_max_bytes, sample.cache_evictions) == (7, 100, 3)


def test_a_stream_without_a_cache_samples_an_empty_fill() -> None:
    sample = StreamCounters(rank=1, worker=2, hits=4).freeze().sample(seq=1, time=0.0, cache=None)
    assert (sample.producer, sample.hits, sample.cache_max_bytes, sample.cache_used_bytes) == ((1, 2), 4, 0, 0)
