"""What a window of a rank, and of the job, measures (uc_jupyter.telemetry.mlflow_windows)."""

from __future__ import annotations

from uc_jupyter.telemetry.mlflow_windows import JOB_METRICS, JobWindows, RankWindows
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot


def loop(rank: int, batches: int, wait: float, *, seq: int = 1) -> Sample:
    """Rank ``rank``'s loop after ``batches`` batches, each waited for ``wait`` seconds, 20 ms apart."""
    return Sample(
        rank=rank,
        worker=MAIN_WORKER,
        seq=seq,
        time=1.0,
        batches=batches,
        samples=4 * batches,
        fetch=Histogram.of([wait] * batches),
        between=Histogram.of([0.02] * max(batches - 1, 0)),
    )


def snapshot(*loops: Sample) -> Snapshot:
    return Snapshot({s.producer: s for s in loops}, time=1.0)


def test_the_jobs_window_is_its_worst_ranks_and_its_step_the_most_batches_a_rank_delivered() -> None:
    values, step = JobWindows().close(snapshot(loop(0, 9, 0.001), loop(1, 5, 0.008), loop(2, 1, 0.5))) or ({}, 0)
    # Rank 2 delivered only its first batch (start-up, no steady wait yet): left out.
    assert values["max_exposed_wait_rank"] == 1.0
    assert abs(values["max_exposed_wait_seconds"] - 5 * 0.008 / 4) < 1e-9
    assert abs(values["max_exposed_wait"] - (5 * 0.008) / (5 * 0.008 + 4 * 0.02)) < 1e-9
    assert step == 9 and set(values) == set(JOB_METRICS)


def test_each_window_counts_only_the_batches_since_the_previous_and_none_without_a_new_one() -> None:
    job = JobWindows(baseline=snapshot(loop(0, 4, 0.1), loop(1, 4, 0.001)))  # rank 0 was slow before
    # Since the baseline: rank 0 still the slow one, over its own 4 new batches.
    found = job.close(snapshot(loop(0, 8, 0.1, seq=2), loop(1, 12, 0.001, seq=2)))
    assert found is not None and found[0]["max_exposed_wait_rank"] == 0.0 and found[1] == 12
    assert job.close(snapshot(loop(0, 8, 0.1, seq=3), loop(1, 12, 0.001, seq=3))) is None  # nothing new
    assert JobWindows().close(snapshot(loop(0, 1, 0.3))) is None  # a first batch only: start-up


def test_a_ranks_next_loader_is_measured_from_its_start() -> None:
    rank = RankWindows(0, baseline=snapshot(loop(0, 40, 0.001)))
    # Counters that went back: another loader on the rank; its window is all of its batches.
    values, step = rank.close(snapshot(loop(0, 5, 0.01, seq=2))) or ({}, 0)
    assert step == 5 and abs(values["exposed_wait_seconds"] - 5 * 0.01 / 4) < 1e-9
