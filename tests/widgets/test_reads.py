"""Latency- or bandwidth-bound reads, from what a rank's streams counted and its loop's time."""

from __future__ import annotations

import pytest

from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample
from uc_jupyter.widgets.reads import MIN_READS, Reads


def loop(batches: int = 100, wait: float = 0.03, step: float = 0.01) -> Sample:
    return Sample(
        rank=0,
        worker=MAIN_WORKER,
        seq=1,
        time=10.0,
        batches=batches,
        fetch=Histogram.of([wait] * batches),
        between=Histogram.of([step] * batches),
    )


def stream(worker: int, reads: int, each: float, answer: float | None, *, files: int | None = None) -> Sample:
    return Sample(
        rank=0,
        worker=worker,
        seq=1,
        time=10.0,
        files=reads if files is None else files,
        misses=reads,
        reads=reads,
        read_seconds=reads * each,
        answered=reads if answer is not None else 0,
        answer_seconds=reads * (answer or 0.0),
        bytes_downloaded=reads * 16_000,
    )


def test_reads_that_mostly_wait_for_the_answer_are_latency_bound_and_need_the_pace_times_a_read() -> None:
    # 4 s of loop time; 400 reads of 30 ms (29 waiting) from 2 streams: 3 in flight; 4 files a batch
    # every 10 ms step is 400 files a second, times 30 ms is 12, plus the window's 2.
    reads = Reads.of(loop(), [stream(0, 200, 0.03, 0.029), stream(1, 200, 0.03, 0.029)])
    assert reads.bound == "latency"
    assert reads.in_flight == pytest.approx(3.0)
    assert reads.latency == pytest.approx(0.029) and reads.answer_share == pytest.approx(0.029 / 0.03)
    assert reads.needed() == 14 and reads.per_stream(reads.needed()) == 7
    assert reads.throughput == pytest.approx(400 * 16_000 / 4.0)


def test_reads_that_mostly_receive_bytes_are_bandwidth_bound() -> None:
    reads = Reads.of(loop(), [stream(0, 100, 0.2, 0.01)])
    assert reads.bound == "bandwidth" and reads.answer_share == pytest.approx(0.05)


@pytest.mark.parametrize(
    "workers",
    [
        [stream(0, 400, 0.03, None)],  # the downloads cannot tell when the store answered
        [stream(0, MIN_READS - 1, 0.03, 0.029)],  # too few to judge
        [stream(0, 0, 0.0, None, files=400)],  # every file a hit: nothing downloaded
    ],
)
def test_reads_that_cannot_be_judged_have_no_bound(workers: list[Sample]) -> None:
    assert Reads.of(loop(), workers).bound is None


def test_without_a_measured_step_the_pace_and_what_it_needs_are_unknown() -> None:
    reads = Reads.of(loop(step=0.0), [stream(0, 400, 0.03, 0.029)])
    assert reads.pace == 0.0 and reads.needed() == 0
