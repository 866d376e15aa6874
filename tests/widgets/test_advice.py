"""The verdict and recommendations on crafted Snapshots: input-bound by workers, by cache budget, compute-bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample
from uc_jupyter.widgets.advice import INPUT_BOUND_SHARE, advise, skipped_text, verdict

from .conftest import snapshot


def loop(
    rank: int = 0,
    *,
    fetch: Sequence[float],
    between: Sequence[float],
    depths: tuple[int, ...] = (),
    seconds: float = 10.0,
    batch: int = 8,
) -> Sample:
    return Sample(
        rank=rank,
        worker=MAIN_WORKER,
        seq=1,
        time=seconds,
        started=0.0,
        batches=len(fetch),
        samples=batch * len(fetch),
        fetch=Histogram.of(fetch),
        between=Histogram.of(between),
        worker_queue_depths=depths,
    )


def workers(
    rank: int = 0,
    count: int = 2,
    *,
    data: int = 600_000,
    hits: int = 100,
    misses: int = 0,
    budget: int = 10_000_000,
    downloaded: int = 0,
) -> list[Sample]:
    """``count`` workers of ``rank`` that read ``data`` bytes between them in the pass."""
    return [
        Sample(
            rank=rank,
            worker=w,
            seq=1,
            time=10.0,
            files=(hits + misses) // count,
            bytes=data // count,
            hits=hits // count,
            misses=misses // count,
            bytes_downloaded=downloaded // count,
            shard_size=(hits + misses) // count,
            cache_used_bytes=min(data, budget),
            cache_max_bytes=budget,
        )
        for w in range(count)
    ]


def steady(share: float, batches: int = 100) -> tuple[list[float], list[float]]:
    """Fetch and compute times of a loop that waits ``share`` of its time, every batch alike."""
    step = 0.1
    return [step * share] * batches, [step * (1 - share)] * batches


def test_input_bound_by_workers_says_how_many_workers() -> None:
    fetch, between = steady(0.44)  # the case, once called "compute-bound"
    snap = snapshot(10.0, loop(fetch=fetch, between=between, depths=(4, 3)), *workers(count=2))
    judged = verdict(snap)
    assert (judged.input_bound, round(judged.share or 0, 2)) == (True, 0.44)
    assert judged.text == (
        "input-bound: the loop waited for data 44% of the time (over 10%: data loading holds training back)"
    )
    # 1 / (1 - 0.44) = 1.8 times the throughput: 2 workers become 4 (ceil 3.6)
    assert advise(snap, cpus=8) == (
        "raise num_workers to 4: 2 busy workers deliver 80.0 samples/s and the loop still waits 44% of the time",
    )
    assert advise(snap, cpus=3)[0].startswith("raise num_workers to 3: ")  # never more than the CPUs


def test_input_bound_by_cache_budget_says_what_each_epoch_re_downloads() -> None:
    fetch, between = steady(0.5)
    snap = snapshot(
        10.0,
        loop(fetch=fetch, between=between, depths=(2, 2)),
        *workers(data=600_000, hits=50, misses=50, budget=300_000, downloaded=300_000),
    )
    advice = advise(snap, cpus=8)
    assert advice[0] == (
        "cache budget 300 kB < data 600 kB: each epoch re-downloads 50%; raise cache_max_bytes to 660 kB"
    )
    assert advice[1].startswith("raise num_workers to 4: ")
    assert verdict(snap, scope="epoch 3").text.startswith("input-bound: the loop waited for data 50% in epoch 3 ")


def test_compute_bound_says_nothing_to_change() -> None:
    snap = snapshot(10.0, loop(fetch=[0.001] * 100, between=[0.05] * 100, depths=(4, 4)), *workers())
    judged = verdict(snap)
    assert (judged.input_bound, judged.text) == (
        False,
        "compute-bound: the loop waited for data 2% of the time; data keeps up",
    )
    assert advise(snap, cpus=8) == (
        "nothing to change in data loading: a faster training step is what speeds this loop up",
    )


@pytest.mark.parametrize(
    ("share", "bound"),
    [(0.05, False), (INPUT_BOUND_SHARE - 0.001, False), (INPUT_BOUND_SHARE + 0.001, True), (0.44, True)],
)
def test_the_threshold_is_ten_percent(share: float, bound: bool) -> None:
    fetch, between = steady(share)
    assert verdict(snapshot(10.0, loop(fetch=fetch, between=between))).input_bound is bound


def test_without_workers_the_advice_is_to_add_some() -> None:
    fetch, between = steady(0.3)
    snap = snapshot(10.0, loop(fetch=fetch, between=between))
    assert advise(snap, cpus=2) == ("raise num_workers to 2: data loads inside the training loop, between its steps",)
    assert advise(snap)[0].startswith("raise num_workers to 4: ")


def test_every_cpu_busy_asks_for_cheaper_items() -> None:
    fetch, between = steady(0.3)
    snap = snapshot(10.0, loop(fetch=fetch, between=between, depths=(1, 1, 1, 1)), *workers(count=4))
    assert advise(snap, cpus=4) == (
        "all 4 CPUs run a worker and the loop still waits 30% of the time: make each item cheaper to load "
        "(smaller files, a lighter transform) or use a machine with more CPUs",
    )


def test_a_few_long_stalls_ask_to_fetch_further_ahead() -> None:
    fetch = [0.0001] * 95 + [2.0] * 5
    snap = snapshot(10.0, loop(fetch=fetch, between=[0.05] * 100, depths=(3, 3)), *workers())
    (advice,) = advise(snap, cpus=8)
    assert advice.startswith("waits are a few long stalls (median ")
    assert "larger prefetch_factor, or the dataset's prefetch= for downloads" in advice


def test_idle_workers_are_named() -> None:
    fetch, between = steady(0.3)
    snap = snapshot(10.0, loop(fetch=fetch, between=between, depths=(0, 3, 3)), *workers(count=3))
    assert advise(snap, cpus=8) == (
        "1 of 3 workers have nothing to do (worker 0): their shards are empty or ran out; use fewer workers, "
        "or split the data into more files",
    )
    # Every queue empty is how a pass ends, not idleness: the steady waits ask for workers instead.
    ended = snapshot(10.0, loop(fetch=fetch, between=between, depths=(0, 0, 0)), *workers(count=3))
    assert advise(ended, cpus=8)[0].startswith("raise num_workers to 5: ")


def test_advice_is_per_rank() -> None:
    fetch, between = steady(0.3)
    calm = loop(0, fetch=[0.001] * 100, between=[0.05] * 100, depths=(2, 2))
    busy = loop(1, fetch=fetch, between=between, depths=(2, 2))
    one = snapshot(10.0, calm, busy, *workers(0), *workers(1))
    assert advise(one, cpus=8) == (
        "rank 1: raise num_workers to 3: 2 busy workers deliver 80.0 samples/s and the loop still waits 30% "
        "of the time",
    )
    # The ranks share the machine's CPUs: 4 CPUs are 2 for each rank, both taken by its workers.
    assert advise(one, cpus=4)[0].startswith("rank 1: all 2 CPUs run a worker and the loop still waits 30%")
    both = snapshot(10.0, replace(calm, fetch=busy.fetch, between=busy.between), busy, *workers(0), *workers(1))
    assert advise(both, cpus=8) == (
        "every rank: raise num_workers to 3: 2 busy workers deliver 80.0 samples/s and the loop still waits "
        "30% of the time",
    )


def test_cold_cache_and_no_cache() -> None:
    fetch, between = steady(0.4)
    cold = snapshot(
        10.0,
        loop(fetch=fetch, between=between, depths=(2, 2)),
        *workers(data=600_000, hits=0, misses=100, budget=10_000_000, downloaded=600_000),
    )
    assert advise(cold, cpus=8)[0] == (
        "cold cache: 100% of files were downloaded in this pass; the budget 10.0 MB holds the data (600 kB), "
        "so the next epoch reads from the cache"
    )
    uncached = snapshot(
        10.0,
        loop(fetch=fetch, between=between, depths=(2, 2)),
        *workers(data=600_000, hits=0, misses=100, budget=0, downloaded=600_000),
    )
    assert advise(uncached, cpus=8)[0] == (
        "no cache: every epoch downloads 600 kB; cache='always' with cache_max_bytes of 660 kB reads the "
        "next epochs locally"
    )


def test_no_batches_no_verdict_no_advice() -> None:
    empty = snapshot(0.0, *workers())
    assert verdict(empty).text == "" and verdict(empty).share is None
    assert advise(empty) == ()


def test_skipped_files() -> None:
    skipping = [replace(w, skipped=n) for w, n in zip(workers(count=2), (1, 2), strict=True)]
    assert skipped_text(snapshot(1.0, *skipping)) == "3 files skipped (not images, or outside include/exclude)"
    assert skipped_text(snapshot(1.0, replace(skipping[0], skipped=1))) == (
        "1 file skipped (not images, or outside include/exclude)"
    )
    assert skipped_text(snapshot(1.0, *workers())) == ""


def test_one_long_first_wait_is_start_up_not_a_knob() -> None:
    fetch = [1.5] + [0.002] * 99  # the workers starting, then every batch ready
    snap = snapshot(10.0, loop(fetch=fetch, between=[0.05] * 100, depths=(2, 2)), *workers())
    assert verdict(snap).input_bound  # 1.7 s of 6.7 s: measured as it is
    (advice,) = advise(snap, cpus=8)
    assert advice.startswith("only one batch waited long (1.")
    assert advice.endswith("the loop waits 3%: nothing to change (persistent_workers=True starts them once)")
