"""What the dashboard shows, without widgets: texts, shard flags, windows, the text summary."""

from __future__ import annotations

import doctest
from dataclasses import replace
from types import ModuleType

import pytest

from uc_jupyter.telemetry.model import Histogram, Sample
from uc_jupyter.widgets import advice, charts, passes, summary, units, view
from uc_jupyter.widgets.passes import PassRecord
from uc_jupyter.widgets.view import DashboardView, HistoryPoint, fetch_share, shard_report, window

from .conftest import loop, snapshot, worker


@pytest.mark.parametrize("module", [view, charts, advice, passes, units], ids=lambda m: m.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0


def test_cache_evictions_come_from_the_same_sample_as_the_fill() -> None:
    older = worker(0, 0, 1.0, 10, used=100, budget=1000, evictions=7)
    newer = worker(0, 1, 2.0, 10, used=300, budget=1000, evictions=9)
    no_cache = Sample(rank=0, worker=2, seq=1, time=3.0, cache_evictions=99)  # budget 0: not the cache's view
    snap = snapshot(3.0, older, newer, no_cache)
    assert (snap.cache_used_bytes, snap.cache_evictions) == (300, 9)
    assert snapshot(1.0).cache_evictions == 0


def test_windows_are_differences_of_cumulative_histograms() -> None:
    first = snapshot(1.0, loop(0, 1.0, [0.1, 0.1], [0.2]))
    second = snapshot(2.0, loop(0, 2.0, [0.1, 0.1, 0.4, 0.6], [0.2, 0.3, 0.5]))
    assert window(None, first) == HistoryPoint(1.0, 0.1, 0.2, 2)
    point = window(first, second)
    assert point is not None
    assert (point.time, point.fetch, point.compute, point.batches) == (2.0, pytest.approx(0.5), pytest.approx(0.4), 2)
    assert window(second, second) is None
    # a restarted producer counts from zero: the window is what it has now, never negative
    restarted = snapshot(3.0, loop(0, 3.0, [0.3], []))
    assert window(second, restarted) == HistoryPoint(3.0, 0.3, 0.0, 1)
    # a rank joining adds its batches to the window
    joined = snapshot(3.0, loop(0, 3.0, [0.1, 0.1, 0.4, 0.6], [0.2, 0.3, 0.5]), loop(1, 3.0, [0.9], []))
    assert window(second, joined) == HistoryPoint(3.0, pytest.approx(0.9), 0.0, 1)


def test_fetch_share() -> None:
    assert fetch_share(snapshot(0.0)) is None
    assert fetch_share(snapshot(1.0, loop(0, 1.0, [0.3], [0.1]))) == pytest.approx(0.75)


def test_shard_reports() -> None:
    assert shard_report(snapshot(0.0)).text == "shards: no shard telemetry yet"
    one = shard_report(snapshot(0.0, worker(0, 0, 0.0, 7)))
    assert (one.text, one.flagged_ranks) == ("shards: 1 rank x 1 worker, 7 items", ())
    mixed = shard_report(snapshot(0.0, worker(0, 0, 0.0, 7), worker(0, 1, 0.0, 7), worker(1, 0, 0.0, 9)))
    assert mixed.ranks == {0: 14, 1: 9}
    assert mixed.text == "shards: 2 ranks, 9 to 14 items; uneven: rank 1 has 9 of 14"
    empty = shard_report(snapshot(0.0, worker(0, 0, 0.0, 7), worker(1, 0, 0.0, 0), worker(2, 0, 0.0, 0)))
    assert empty.flagged_ranks == (1, 2)
    assert empty.empty_workers == ((1, 0), (2, 0))
    assert empty.text == "shards: 3 ranks x 1 worker, 0 to 7 items; empty: rank 1, rank 2"
    # Workers of a rank one item apart are how partitioning splits a rank: not flagged.
    assert shard_report(snapshot(0.0, worker(0, 0, 0.0, 8), worker(0, 1, 0.0, 7))).flagged_ranks == ()


def test_summary_is_one_paragraph() -> None:
    assert summary(snapshot(0.0)) == (
        "0 batches, 0 samples at 0.00 samples/s; fetch: no batches yet; no shared cache (files read in place); "
        "shards: no shard telemetry yet."
    )
    fetch = Histogram.of([0.001] * 98 + [0.05, 0.2])
    step = Histogram.of([0.002] * 99)  # a training step between batches
    loops = Sample(
        rank=0, worker=-1, seq=1, time=4.0, started=0.0, batches=100, samples=6400, fetch=fetch, between=step
    )
    text = summary(
        snapshot(4.0, loops, worker(0, 0, 4.0, 3200, used=5_000_000, budget=10_000_000, hits=90)), title="epoch 1"
    )
    assert text == (
        "epoch 1: 100 batches, 6,400 samples at 1600 samples/s; fetch p50 869 us, p95 991 us, p99 56.2 ms; "
        "input-bound: the loop waited for data 64% of the time (over 10%: data loading holds training back); "
        "to do: raise num_workers to 4: data loads inside the training loop, between its steps; "
        "cache 5.00 MB of 10.0 MB (50%), hit rate 90%, 0 evictions; shards: 1 rank x 1 worker, 3,200 items."
    )
    assert "\n" not in text


def test_the_main_figures_of_a_resumed_pass_are_labelled_with_it() -> None:
    start = snapshot(0.0)
    now = snapshot(10.0, loop(0, 10.0, [0.1] * 10, [0.1] * 9), replace(worker(0, 0, 10.0, 80), resumed_epoch=3))
    shown = DashboardView.of(now, passes=[PassRecord("epoch 3", start, epoch=3)])
    assert (shown.scope, shown.status_text) == ("epoch 3 (resumed)", "epoch 3 (resumed): running")
    assert shown.epochs[0].label == "epoch 3 (resumed)"
    text = summary(now, title="DataLoader", passes=[PassRecord("epoch 3", start, now, "done", epoch=3)])
    assert text.startswith("DataLoader: epoch 3 (resumed): 10 batches, 320 samples")
    assert DashboardView.of(now, passes=[PassRecord("epoch 4", start, epoch=4)]).scope == "epoch 4"


def test_a_mixs_sources_show_their_share_and_epoch_and_a_single_dataset_shows_none() -> None:
    def mixing(w: int, counts: tuple[int, ...], epochs: tuple[int, ...]) -> Sample:
        return Sample(rank=0, worker=w, seq=1, time=1.0, source_samples=counts, source_epochs=epochs)

    ran = loop(0, 1.0, [0.01] * 4, [0.02] * 3)
    mixed = DashboardView.of(snapshot(1.0, ran, mixing(0, (3, 1), (0, 2)), mixing(1, (3, 1), (1, 2))))
    assert mixed.sources_text == "sources: #0 75% (its epoch 1), #1 25% (its epoch 2)"
    assert "sources: #0 75%" in view.view_text(mixed)
    assert DashboardView.of(snapshot(1.0, ran)).sources_text == ""
