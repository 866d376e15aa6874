"""A pass's own figures from cumulative snapshots, and the epochs table's rows and labels."""

from __future__ import annotations

from dataclasses import replace

import pytest

from uc_jupyter.widgets.passes import CUMULATIVE, PassRecord, epoch_rows, error_line, forget_snapshots, since

from .conftest import loop, snapshot, worker


def test_since_subtracts_counters_and_keeps_gauges() -> None:
    start = snapshot(
        10.0,
        loop(0, 10.0, [0.1] * 4, [0.2] * 3),
        replace(worker(0, 0, 10.0, 50, used=100, budget=1000, evictions=2, hits=5), bytes=500, skipped=3),
    )
    end = snapshot(
        20.0,
        loop(0, 20.0, [0.1] * 4 + [0.3] * 6, [0.2] * 9),
        replace(worker(0, 0, 20.0, 50, used=900, budget=1000, evictions=7, hits=25), bytes=2500, skipped=3),
    )
    own = since(end, start)
    assert (own.batches, own.samples_delivered, own.fetch.count, own.between.count) == (6, 192, 6, 6)
    assert own.fetch.total == pytest.approx(1.8)
    assert own.samples_per_second == pytest.approx(192 / 10.0)  # from the pass's start, not the loop's
    w = own.samples[(0, 0)]
    assert (w.hits, w.misses, w.bytes, w.cache_evictions) == (20, 0, 2000, 5)
    assert (w.shard_size, w.skipped, w.cache_used_bytes, w.cache_max_bytes) == (50, 3, 900, 1000)
    assert since(end, None) is end


def test_a_restarted_or_new_producer_counts_whole() -> None:
    start = snapshot(10.0, loop(0, 10.0, [0.1] * 8, [0.2] * 7), worker(0, 0, 10.0, 50, hits=9))
    restarted = snapshot(20.0, loop(0, 20.0, [0.1] * 8 + [0.4] * 2, [0.2] * 9), worker(0, 0, 20.0, 50, hits=2))
    own = since(restarted, start)
    assert own.samples[(0, 0)].hits == 2  # a new worker process counts from zero: all of it is this pass's
    joined = since(snapshot(20.0, *restarted.samples.values(), worker(0, 1, 20.0, 50, hits=4)), start)
    assert joined.samples[(0, 1)].hits == 4
    # A cache made anew (its eviction counter lower than before) counts its evictions whole.
    cleared = since(
        snapshot(20.0, worker(0, 0, 20.0, 50, hits=9, evictions=1)),
        snapshot(10.0, worker(0, 0, 10.0, 50, hits=9, evictions=6)),
    )
    assert cleared.samples[(0, 0)].cache_evictions == 1


def test_epoch_rows_are_labelled_per_epoch_and_cumulative() -> None:
    s0 = snapshot(0.0)
    s1 = snapshot(10.0, loop(0, 10.0, [0.1] * 10, [0.1] * 9), worker(0, 0, 10.0, 80, hits=5, budget=10**6))
    s2 = snapshot(
        20.0, loop(0, 20.0, [0.1] * 10 + [0.3] * 5, [0.1] * 14), worker(0, 0, 20.0, 80, hits=15, budget=10**6)
    )
    now = snapshot(
        25.0, loop(0, 25.0, [0.1] * 10 + [0.3] * 5 + [0.05] * 3, [0.1] * 17), worker(0, 0, 25.0, 80, budget=10**6)
    )
    passes = [
        PassRecord("epoch 0", s0, s1, "done"),
        PassRecord("epoch 1", s1, s2, "failed", "ValueError: bad file"),
        PassRecord("epoch 2", s2),
    ]
    rows = epoch_rows(passes, now)
    assert [(r.label, r.state, r.batches) for r in rows] == [
        ("epoch 0", "done", 10),
        ("epoch 1", "failed: ValueError: bad file", 5),
        ("epoch 2", "running", 3),
        (CUMULATIVE, "3 passes", 18),
    ]
    assert rows[0].wait_share == pytest.approx(1.0 / 1.9)
    assert rows[1].samples_per_second == pytest.approx(5 * 32 / 10.0)
    assert rows[1].hit_rate == pytest.approx(10 / 10)
    assert epoch_rows(passes[:1], s1)[-1].label == "epoch 0"  # one pass: no cumulative row to repeat it
    assert len(epoch_rows(passes, now, keep=2)) == 3  # the last two, and all of them summed


def test_pass_status() -> None:
    start = snapshot(0.0, loop(0, 0.0, [0.1] * 2, [0.1]))
    end = snapshot(5.0, loop(0, 5.0, [0.1] * 14, [0.1] * 13))
    assert PassRecord("epoch 0", start).status == "running"
    assert PassRecord("epoch 0", start, end, "done").status == "done"
    assert PassRecord("epoch 0", start, end, "stopped").status == "stopped after 12 batches"
    assert PassRecord("epoch 0", start, end, "failed", "KeyError: 'x'").status == "failed: KeyError: 'x'"


def test_error_line_keeps_the_first_line() -> None:
    worker_error = ValueError("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback:\n  ...")
    assert error_line(worker_error) == "ValueError: Caught ValueError in DataLoader worker process 0."
    assert error_line(KeyboardInterrupt()) == "KeyboardInterrupt"


def test_a_long_run_keeps_the_rows_it_shows_and_the_whole_sum() -> None:
    run = [snapshot(float(t), loop(0, float(t), [0.1] * (10 * t), [0.1] * max(10 * t - 1, 0))) for t in range(21)]
    passes = [PassRecord(f"epoch {i}", run[i], run[i + 1], "done") for i in range(20)]
    forget_snapshots(passes)
    assert [i for i, record in enumerate(passes) if record.start is None] == list(range(1, 12))
    rows = epoch_rows(passes, run[-1])
    assert [row.label for row in rows] == [f"epoch {i}" for i in range(12, 20)] + [CUMULATIVE]
    assert [row.batches for row in rows] == [10] * 8 + [200]
    assert rows[-1].state == "20 passes"


def test_a_pass_that_resumed_its_epoch_says_so_and_the_next_one_does_not() -> None:
    resumed = replace(worker(0, 0, 10.0, 80, hits=5), resumed_epoch=3)
    start = snapshot(0.0)
    end = snapshot(10.0, loop(0, 10.0, [0.1] * 10, [0.1] * 9), resumed)
    # The next pass has begun, its worker not heard from yet: the collector still holds the old
    # sample that says epoch 3 resumed, which must not mark epoch 4.
    early = snapshot(11.0, loop(0, 11.0, [0.1] * 11, [0.1] * 10), resumed)
    passes = [PassRecord("epoch 3", start, end, "done", epoch=3), PassRecord("epoch 4", end, epoch=4)]
    assert [r.label for r in epoch_rows(passes, early)] == ["epoch 3 (resumed)", "epoch 4", CUMULATIVE]
    fresh = replace(resumed, seq=2, time=12.0, resumed_epoch=-1)  # epoch 4's worker: its pass did not resume
    later = snapshot(12.0, loop(0, 12.0, [0.1] * 12, [0.1] * 11), fresh)
    assert [r.label for r in epoch_rows(passes, later)] == ["epoch 3 (resumed)", "epoch 4", CUMULATIVE]
    # The running pass of the resumed epoch is marked as soon as a stream says so.
    assert epoch_rows([PassRecord("epoch 3", start, epoch=3)], end)[0].label == "epoch 3 (resumed)"
    assert epoch_rows([PassRecord("epoch 3", start, epoch=3)], start)[0].label == "epoch 3"


def test_a_block_of_work_on_ranks_names_the_epoch_its_ranks_resumed() -> None:
    """Ranks' telemetry in the kernel (%%uc_distributed --monitor): one pass whose epochs are unknown."""
    ranks = [replace(worker(rank, 0, 5.0, 40), resumed_epoch=1) for rank in range(3)]
    now = snapshot(5.0, *(loop(rank, 5.0, [0.1] * 4, [0.1] * 3) for rank in range(3)), *ranks)
    assert epoch_rows([PassRecord("", None)], now)[0].label == "epoch 1 (resumed)"
    assert epoch_rows([PassRecord("3 ranks", None)], now)[0].label == "3 ranks: epoch 1 (resumed)"
    mixed = snapshot(5.0, *ranks[:2], replace(ranks[2], resumed_epoch=2))  # never so, but said plainly
    assert epoch_rows([PassRecord("", None)], mixed)[0].label == "epochs 1, 2 (resumed)"
    assert epoch_rows([PassRecord("", None)], snapshot(5.0, worker(0, 0, 5.0, 40)))[0].label == ""


def test_a_pass_says_done_of_total_and_time_left_while_it_runs_then_its_line() -> None:
    start = snapshot(10.0, loop(0, 10.0, [0.1] * 4, [0.2] * 3))
    now = snapshot(16.0, loop(0, 16.0, [0.1] * 4 + [0.1] * 20, [0.2] * 23))
    running = PassRecord("epoch 1", start, epoch=1, total=50)
    assert running.progress(now) == "running: 20/50 batches, about 9.00 s left"  # 20 in 6 s: 30 more take 9 s
    assert PassRecord("epoch 1", start, epoch=1).progress(now) == "running"  # no total: no time left either
    stopped = replace(running, end=now, state="stopped")
    assert stopped.progress(now) == "stopped after 20 batches"
    assert stopped.line(now) == (
        "epoch 1: 20/50 batches in 6.00 s, 107 samples/s, exposed wait 33%, stopped after 20 batches"
    )
    only = snapshot(1.0, replace(loop(0, 1.0, [0.5], []), first_waits=0.5, setup=0.25))
    first = PassRecord("epoch 0", None, only, "done")
    # One batch is all start-up: no steady state to judge, and no "exposed wait" said.
    assert first.line(only) == "epoch 0: 1 batch in 1.00 s, 32.0 samples/s, start-up 750 ms"


def test_the_all_epochs_rate_counts_the_passes_time_not_the_idle_time_between_them() -> None:
    s0 = snapshot(0.0)
    s1 = snapshot(10.0, loop(0, 10.0, [0.1] * 10, [0.1] * 9))  # 320 samples in 10 s
    s2 = snapshot(70.0, loop(0, 10.0, [0.1] * 10, [0.1] * 9))  # a minute later, in another cell: idle
    s3 = snapshot(80.0, loop(0, 80.0, [0.1] * 20, [0.1] * 19))  # 320 more in 10 s
    passes = [PassRecord("epoch 0", s0, s1, "done"), PassRecord("epoch 1", s2, s3, "done")]
    cumulative = epoch_rows(passes, s3)[-1]
    assert cumulative.label == CUMULATIVE and cumulative.samples == 640
    assert cumulative.samples_per_second == pytest.approx(640 / 20.0)  # not 640 / 80 s
    forget_snapshots(passes := [*passes, *(PassRecord(f"epoch {i}", s2, s3, "done") for i in range(2, 12))], keep=8)
    assert passes[1].start is None and passes[1].ran == pytest.approx(10.0)  # its time outlives its snapshots
    assert epoch_rows(passes, s3)[-1].samples_per_second > 0
