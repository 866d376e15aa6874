"""The verdict and recommendations on crafted Snapshots: input-bound by workers, by cache budget, compute-bound."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import pytest

from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot
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
        "cache budget 300 kB < data 600 kB: each epoch re-downloads 50%; raise cache_max_bytes to 1.50 MB (the data, "
        "the files in flight and the cache's headroom)"
    )  # 100 files a pass: every stream's deepest window holds them all, the cache keeps 40% of its budget
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
        "rank 1 is the straggler: it waits 30%, the others at most 2%, and every rank's step waits for it; look "
        "at its data (its shard: 100 items) or its machine first",
        "rank 1: raise num_workers to 3: 2 busy workers deliver 80.0 samples/s and the loop still waits 30% "
        "of the time",
    )
    # The ranks share the machine's CPUs: 4 CPUs are 2 for each rank, both taken by its workers.
    assert advise(one, cpus=4)[1].startswith("rank 1: all 2 CPUs run a worker and the loop still waits 30%")
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
        "no cache: every epoch downloads 600 kB; cache='always' with cache_max_bytes of 1.50 MB reads the "
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


def test_start_up_is_said_apart_and_left_out_of_the_steady_state() -> None:
    fetch = [1.5] + [0.002] * 99  # the first files, then every batch ready
    started = replace(loop(fetch=fetch, between=[0.05] * 99, depths=(2, 2)), setup=0.3, first_waits=1.5)
    snap = snapshot(10.0, started, *workers())
    judged = verdict(snap)
    assert (judged.kind, judged.input_bound, judged.text) == (
        "compute-bound",
        False,
        "compute-bound: the loop waited for data 4% of the time; data keeps up",  # 1.5 s of it was start-up
    )
    assert advise(snap, cpus=8) == (
        "nothing to change in data loading: a faster training step is what speeds this loop up",
    )


def test_a_short_pass_that_mostly_started_says_so_and_what_starts_the_workers_once() -> None:
    short = replace(
        loop(fetch=[0.4] + [0.002] * 9, between=[0.05] * 9, depths=(2, 2)), setup=2.0, first_waits=0.4, worker_starts=1
    )
    judged = verdict(snapshot(10.0, short, *workers()))
    assert judged.kind == "start-up" and not judged.input_bound
    assert judged.text == (
        "start-up: starting the pass took 2.40 s of 2.87 s (workers, listing, first files); after it the loop "
        "waited for data 4%"
    )
    assert advise(snapshot(10.0, short, *workers()), cpus=8) == (
        "starting the pass took 2.40 s (its workers start anew each epoch): persistent_workers=True starts them "
        "once, for every epoch",
    )
    kept = replace(short, persistent_workers=True)  # a first pass of workers that persist: nothing to add
    assert verdict(snapshot(10.0, kept, *workers())).kind == "start-up"
    assert advise(snapshot(10.0, kept, *workers()), cpus=8) == ()
    listing = replace(short, worker_starts=0)  # no worker started: the first files took the time
    assert advise(snapshot(10.0, listing, *workers()), cpus=8) == ()


def test_a_pass_of_first_batches_only_says_how_long_they_took() -> None:
    first = replace(loop(fetch=[1.5], between=[]), setup=0.1, first_waits=1.5)
    judged = verdict(snapshot(2.0, first))
    assert (judged.kind, judged.share, judged.text) == ("start-up", None, "start-up: the first batch took 1.60 s")
    assert advise(snapshot(2.0, first)) == ()


def test_a_loop_without_a_training_step_is_told_its_wait_is_expected_and_given_no_advice() -> None:
    counting = loop(fetch=[0.01] * 100, between=[0.00002] * 99, depths=(2, 2), seconds=2.0)
    snap = snapshot(2.0, counting, *workers())
    judged = verdict(snap)
    assert (judged.kind, judged.input_bound) == ("no-work", False)
    assert judged.text == (
        "no training step: the loop does nothing between batches, so waiting for data 100% of the time is "
        "expected; the loader alone delivers 400 samples/s"
    )
    assert advise(snap, cpus=8) == ()


def test_the_headline_follows_the_rank_that_waits_most_and_names_the_others() -> None:
    fast_fetch, fast_between = steady(0.12)
    slow_fetch, slow_between = steady(0.45)
    fast = loop(0, fetch=fast_fetch, between=fast_between, depths=(2, 2))
    slow = loop(1, fetch=slow_fetch, between=slow_between, depths=(2, 2))
    judged = verdict(snapshot(10.0, fast, slow, *workers(0), *workers(1)))
    assert (judged.rank, judged.share) == (1, pytest.approx(0.45))
    assert judged.text == (
        "input-bound: rank 1 waited for data 45% of the time (over 10%: data loading holds training back); "
        "rank 0 waited 12%"
    )
    calm = [loop(r, fetch=steady(s)[0], between=steady(s)[1]) for r, s in ((0, 0.02), (1, 0.05), (2, 0.08), (3, 0.03))]
    judged = verdict(snapshot(10.0, *calm))
    assert judged.text == "compute-bound: rank 2 waited for data 8% of the time; data keeps up; the other 3 ranks 2%-5%"


def test_a_table_loader_on_every_cpu_is_not_told_about_files() -> None:
    fetch, between = steady(0.3)
    rows = [replace(w, files=0, hits=0, bytes=0) for w in workers(count=2, hits=0)]
    (advice,) = advise(snapshot(10.0, loop(fetch=fetch, between=between, depths=(2, 2)), *rows), cpus=2)
    assert advice == (
        "all 2 CPUs run a worker and the loop still waits 30% of the time: make each item cheaper to load "
        "(fewer columns, a filter, a lighter transform) or use a machine with more CPUs"
    )


def on_cpu(samples: list[Sample], share: float, seconds: float = 10.0) -> list[Sample]:
    """``samples`` (workers) alive for ``seconds``, on CPU ``share`` of that time."""
    return [replace(w, time=seconds, started=0.001, cpu_seconds=share * (seconds - 0.001)) for w in samples]


def test_workers_that_mostly_wait_for_storage_are_told_to_keep_more_reads_in_flight() -> None:
    fetch, between = steady(0.4)
    waiting = snapshot(10.0, loop(fetch=fetch, between=between, depths=(2, 2)), *on_cpu(workers(), 0.2))
    (advice,) = advise(waiting, cpus=8)
    assert advice == (
        "the workers wait for their data: on CPU 20% of the time, they spend the rest waiting for storage; keep "
        "more reads in flight (the dataset's prefetch=, or more workers)"
    )
    busy = snapshot(10.0, loop(fetch=fetch, between=between, depths=(2, 2)), *on_cpu(workers(), 0.95))
    assert advise(busy, cpus=8) == (
        "raise num_workers to 4: 2 busy workers deliver 80.0 samples/s (on CPU 95% of the time) and the loop still "
        "waits 40% of the time",
    )
    assert advise(busy, cpus=2)[0].startswith("all 2 CPUs run a worker")


def test_a_workers_cpu_share_is_per_pass_and_absent_without_worker_processes() -> None:
    from uc_jupyter.widgets.passes import since

    fetch, between = steady(0.4)
    first = snapshot(10.0, loop(fetch=fetch, between=between), *on_cpu(workers(), 0.9, seconds=10.0))
    # The next 10 s the workers were on CPU 1 s of 10: the pass's own share, not the run's.
    later = [replace(w, time=20.0, cpu_seconds=w.cpu_seconds + 1.0) for w in first.samples.values() if w.worker >= 0]
    second = snapshot(20.0, loop(fetch=fetch * 2, between=between * 2, seconds=20.0), *later)
    assert second.worker_cpu_share(0) == pytest.approx((2 * 9 * 0.9999 + 2) / (2 * 19.999), rel=1e-3)
    assert since(second, first).worker_cpu_share(0) == pytest.approx(0.1)
    assert snapshot(10.0, loop(fetch=fetch, between=between), *workers()).worker_cpu_share(0) is None


def staged(share: float, made: tuple[float, float, float], exposed: tuple[float, ...], depths=(2, 2)) -> Sample:
    """A loop of 100 batches waiting ``share`` of its time, whose batches took ``made`` seconds in all
    (fetch, decode, collate) and whose waits went to ``exposed`` (per EXPOSED_STAGES, in seconds)."""
    fetch, between = steady(share)
    return replace(loop(fetch=fetch, between=between, depths=depths), made=made, exposed=exposed)


def test_the_stage_that_caused_most_of_the_wait_is_named_with_what_more_workers_would_leave() -> None:
    # 100 batches: 4.4 s waited, 20 s of work (200 ms a batch: 2 workers make one every 100 ms, which a
    # 56 ms step does not hide: 44 ms waited).
    snap = snapshot(10.0, staged(0.44, (0.3, 19.5, 0.2), (0.2, 4.0, 0.1, 0.1, 0.0)), *workers(count=2))
    assert verdict(snap).text == (
        "input-bound: the loop waited for data 44% of the time "
        "(fetch 5%, decode 91%, collate 2%, transfer 2%; over 10%: data loading holds training back)"
    )
    (advice,) = advise(snap, cpus=8)
    # 3 workers would leave 16%; 4 make a batch every 50 ms against a 56 ms step: the 1 ms transfer is left.
    assert advice == (
        "raise num_workers from 2 to 4: decode takes 195 ms per batch on 2 workers "
        "(fetch 5%, decode 91%, collate 2%, transfer 2% of the wait) (exposed wait 44% -> about 2%)"
    )
    assert advise(snap, cpus=2)[0].startswith("all 2 CPUs run a worker and decode takes 195 ms per batch")


def test_fetch_collate_and_transfer_each_get_their_own_change() -> None:
    fetching = snapshot(10.0, staged(0.5, (8.0, 0.1, 0.1), (4.8, 0.1, 0.0, 0.1, 0.0)), *workers(count=2))
    assert advise(fetching, cpus=8)[0].startswith("keep more reads in flight: fetch waits 80.0 ms per batch")
    assert "the dataset's prefetch=" in advise(fetching, cpus=8)[0]
    collating = snapshot(10.0, staged(0.5, (0.1, 0.1, 8.0), (0.0, 0.1, 4.8, 0.1, 0.0)), *workers(count=2))
    assert advise(collating, cpus=8)[0].startswith("collate takes 80.0 ms per batch on 2 workers")
    # Batches that take 1 ms to make and 40 ms to hand over: without workers the wait is the 1 ms.
    moving = snapshot(10.0, staged(0.5, (0.05, 0.05, 0.0), (0.0, 0.0, 0.0, 5.0, 0.0)), *workers(count=2))
    (advice,) = advise(moving, cpus=8)
    assert advice.startswith("moving each batch from a worker to the loop takes longer than making it (50.0 ms")
    assert "num_workers=0 makes them in the loop (exposed wait 50% -> about 2%)" in advice


def reading(samples: list[Sample], *, each: float, answer: float | None, size: int = 16_000) -> list[Sample]:
    """``samples`` (workers) whose misses were downloads of ``each`` seconds, of which the store took
    ``answer`` to answer (None: their downloads cannot tell)."""
    return [
        replace(
            w,
            reads=w.misses,
            read_seconds=w.misses * each,
            answered=w.misses if answer is not None else 0,
            answer_seconds=w.misses * (answer or 0.0),
            bytes_downloaded=w.misses * size,
        )
        for w in samples
    ]


def fetching(*, each: float, answer: float | None, size: int = 16_000) -> Snapshot:
    """A loop of 100 batches waiting half its time, nearly all of it for fetch, over 2 workers that
    downloaded 800 files (see :func:`reading`)."""
    loop = staged(0.5, (8.0, 0.1, 0.1), (4.8, 0.1, 0.0, 0.1, 0.0))
    return snapshot(10.0, loop, *reading(workers(count=2, hits=0, misses=800), each=each, answer=answer, size=size))


def test_fetch_that_waits_for_the_stores_answer_is_latency_bound_and_asks_for_the_window_its_pace_needs() -> None:
    # 100 batches of 8 files, a 50 ms step: the loop takes 160 files a second; a download takes 30 ms,
    # 28 of them waiting for the answer, and 2.4 are in flight (24 s of downloads over 10 s).
    snap = fetching(each=0.03, answer=0.028)
    assert "(latency-bound fetch 96%, decode 2%, transfer 2%; over 10%" in verdict(snap).text
    advice = advise(snap, cpus=8)
    assert advice[-1] == (
        "fetch is latency-bound (fetch 96%, decode 2%, transfer 2% of the wait): each read waits 28.0 ms for the "
        "store's answer (93% of it) with 2.4 in flight on average, and the loop's pace needs about 7: raise the "
        "dataset's prefetch= to 4 (reads in flight per worker) (exposed wait 50% -> about 31%), or num_workers "
        "from 2 to 4 (exposed wait 50% -> about 37%)"
    )
    # All CPUs busy: more reads in flight cost none, so the window is still what it asks for.
    assert "raise the dataset's prefetch= to 4" in advise(snap, cpus=2)[-1]


def test_fetch_that_mostly_receives_bytes_is_bandwidth_bound_and_never_asks_for_more_in_flight() -> None:
    snap = fetching(each=0.2, answer=0.01, size=200_000)
    assert "(bandwidth-bound fetch 96%, decode 2%, transfer 2%; over 10%" in verdict(snap).text
    advice = advise(snap, cpus=8)
    assert advice[-1] == (
        "fetch is bandwidth-bound (fetch 96%, decode 2%, transfer 2% of the wait): reads spend 95% of their time "
        "receiving bytes, 16.0 MB/s in all with 16.0 in flight, and more reads at once share the same link: read "
        "fewer bytes per item (smaller or compressed files), keep them in the cache for the next epochs, or read "
        "from storage closer to this machine"
    )
    assert not any("prefetch=" in line or "num_workers" in line for line in advice), advice


def test_fetch_whose_downloads_cannot_tell_the_answer_keeps_the_window_or_workers_advice() -> None:
    snap = fetching(each=0.03, answer=None)
    assert "(fetch 96%, decode 2%" in verdict(snap).text
    assert advise(snap, cpus=8)[-1].startswith("keep more reads in flight: fetch waits 80.0 ms per batch")
