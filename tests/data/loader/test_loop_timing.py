"""The loop's side of a DataLoader's timing: its cumulative counters as one telemetry sample, and how
many samples a collated batch holds, whatever the collate made of them."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.data.loader.loop_timing import LoopTiming, batch_len
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram

seconds = st.floats(min_value=0.0, max_value=100.0, allow_nan=False)


@given(st.lists(st.tuples(seconds, seconds, st.integers(1, 64)), max_size=30))
def test_the_counters_are_the_sums_and_histograms_of_every_batch(batches: list[tuple[float, float, int]]) -> None:
    timing = LoopTiming()
    for fetch, compute, size in batches:
        timing.add(fetch, compute, size)
    sample = timing.sample(rank=3, now=9.0, started=1.0, depths=(2, 0, 1))
    assert (sample.rank, sample.worker, sample.time, sample.started) == (3, MAIN_WORKER, 9.0, 1.0)
    # Numbered across the process's loaders: a newer loader's sample replaces an older one's.
    assert LoopTiming().sample(rank=3, now=9.0, started=1.0, depths=()).seq > sample.seq
    sample = timing.sample(rank=3, now=9.0, started=1.0, depths=(2, 0, 1))
    assert (sample.batches, sample.samples) == (len(batches), sum(size for _, _, size in batches))
    assert sample.fetch is not None and sample.between is not None
    assert sum(sample.fetch.counts) == len(batches)
    assert math.isclose(sample.fetch.total, sum(f for f, _, _ in batches), abs_tol=1e-9)
    # The first batch has no compute time before it: it is left out of "between".
    between = [c for _, c, _ in batches[1:]]
    assert sum(sample.between.counts) == len(between)
    assert math.isclose(sample.between.total, sum(between), abs_tol=1e-9)
    for fetch, _, _ in batches:
        assert sample.fetch.counts[Histogram.bucket(fetch)] > 0
    assert (sample.queue_depth, sample.worker_queue_depths) == (3, (2, 0, 1))
    assert timing.sample(rank=3, now=10.0, started=1.0, depths=()).seq > sample.seq  # each newer than the last


@pytest.mark.parametrize(
    ("batch", "samples"),
    [
        (torch.zeros(8, 3), 8),  # one tensor
        ([torch.zeros(5, 3), torch.zeros(5)], 5),  # (image, label) pairs: a list of two fields
        ((torch.zeros(4), [1, 2, 3, 4]), 4),
        ({"x": torch.zeros(6, 2), "y": torch.zeros(6)}, 6),  # dict samples: a dict of fields
        (["a.png", "b.png", "c.png"], 3),  # paths, not collated
        ([], 0),
        (torch.tensor(7.0), 1),  # a 0-d tensor: one sample
        ({}, 0),
        (42, 1),
    ],
)
def test_a_collated_batch_counts_its_samples(batch: Any, samples: int) -> None:
    assert batch_len(batch) == samples
