"""What a window of a rank, and of the job, measures (uc_jupyter.telemetry.mlflow_windows)."""

from __future__ import annotations

from dataclasses import replace

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


def mixing(rank: int, worker: int, counts: tuple[int, ...], epochs: tuple[int, ...], seq: int = 1) -> Sample:
    """A Mix's stream in worker ``worker`` of rank ``rank``: its samples of each source so far."""
    return Sample(rank=rank, worker=worker, seq=seq, time=1.0, source_samples=counts, source_epochs=epochs)


def test_a_mix_logs_each_sources_share_of_the_window_and_its_epoch() -> None:
    from uc_jupyter.telemetry.mlflow_windows import metric_names

    windows = RankWindows(0)
    first = snapshot(
        loop(0, 4, 0.01), mixing(0, 0, (6, 2), (0, 0)), mixing(0, 1, (6, 2), (0, 1)), mixing(1, 0, (9, 9), (5, 5))
    )
    values, _ = windows.close(first) or ({}, 0)
    assert (values["source_share/0"], values["source_share/1"]) == (0.75, 0.25)  # rank 1's stream is its own
    assert (values["source_epoch/0"], values["source_epoch/1"]) == (0.0, 1.0)
    later = snapshot(loop(0, 8, 0.01, seq=2), mixing(0, 0, (8, 4), (1, 1), seq=2), mixing(0, 1, (8, 4), (1, 1), seq=2))
    values, _ = windows.close(later) or ({}, 0)
    assert (values["source_share/0"], values["source_share/1"]) == (0.5, 0.5)  # the window's 8 samples only
    names = metric_names(0)
    assert names["source_share/1"] == "dataloader/source_share/1/rank_0"
    assert names["source_epoch/0"] == "dataloader/source_epoch/0/rank_0"
    values, _ = RankWindows(0).close(snapshot(loop(0, 4, 0.01))) or ({}, 0)
    assert not any(key.startswith("source_") for key in values)  # a single dataset logs none


def test_a_mix_logs_the_exposed_wait_each_source_caused_per_batch() -> None:
    """The wait the fetch and decode stages caused, split in proportion to each source's seconds in the window."""
    from uc_jupyter.telemetry.mlflow_windows import metric_names

    def waited(seq: int, batches: int, fetch: float, decode: float) -> Sample:
        return replace(loop(0, batches, 0.05, seq=seq), exposed=(fetch, decode, 0.0, 0.1, 0.0))

    def stream(seq: int, seconds: tuple[float, ...]) -> Sample:
        counts = (3 * seq, seq)
        return Sample(rank=0, worker=0, seq=seq, time=1.0, source_samples=counts, source_epochs=(0, 0),
                      source_seconds=seconds)  # fmt: skip

    windows = RankWindows(0)
    values, _ = windows.close(snapshot(waited(1, 5, 0.2, 0.2), stream(1, (0.1, 0.3)))) or ({}, 0)
    # 0.4 s of fetch and decode over 4 steady batches, the second source's stages a 3/4 of the sources' time.
    assert abs(values["source_exposed_seconds/0"] - 0.025) < 1e-9
    assert abs(values["source_exposed_seconds/1"] - 0.075) < 1e-9
    values, _ = windows.close(snapshot(waited(2, 9, 0.6, 0.2), stream(2, (0.5, 0.3)))) or ({}, 0)
    # The window's own: 0.4 s over its 4 batches, all of it the first source's (the second took no time).
    assert (abs(values["source_exposed_seconds/0"] - 0.1) < 1e-9, values["source_exposed_seconds/1"]) == (True, 0.0)
    assert metric_names(0)["source_exposed_seconds/1"] == "dataloader/source_exposed_seconds/1/rank_0"
