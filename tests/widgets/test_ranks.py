"""uc_jupyter.widgets.ranks: a row per rank (its own wait, rate, percentiles, workers on CPU), the
straggler marked, in the text fallback and in the dashboard's table."""

from __future__ import annotations

from dataclasses import replace

import pytest

from uc_jupyter.telemetry.model import Sample
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.widgets.dashboard import LoaderDashboard
from uc_jupyter.widgets.ranks import rank_rows, ranks_text
from uc_jupyter.widgets.view import DashboardView, view_text

from .conftest import CommLog, loop, snapshot, worker


def two_ranks(slow_wait: float) -> list[Sample]:
    fast = loop(0, 10.0, [0.002] * 50, [0.05] * 49)
    slow = loop(1, 10.0, [slow_wait] * 50, [0.05] * 49, batch=16)
    cpu = replace(worker(1, 0, 10.0, 400), started=0.001, cpu_seconds=2.0)
    return [fast, slow, worker(0, 0, 10.0, 800), cpu]


def test_each_rank_has_its_own_row_and_the_one_holding_the_others_back_is_marked() -> None:
    rows = rank_rows(snapshot(10.0, *two_ranks(0.05)))
    assert [row.rank for row in rows] == [0, 1]
    fast, slow = rows
    assert (fast.straggler, slow.straggler) == (False, True)
    assert fast.exposed_wait == pytest.approx(0.1 / (0.1 + 2.45), rel=1e-6)
    assert slow.exposed_wait == pytest.approx(2.5 / (2.5 + 2.45), rel=1e-6)
    assert (fast.samples_per_second, slow.samples_per_second) == (160.0, 80.0)  # 32 and 16 samples a batch
    assert slow.wait_p50 == pytest.approx(0.05, rel=0.16) and slow.wait_p99 >= slow.wait_p50
    assert (fast.on_cpu, slow.on_cpu) == (None, pytest.approx(2.0 / 9.999))


def test_ranks_alike_have_no_straggler_and_one_rank_has_no_rows_text() -> None:
    alike = rank_rows(snapshot(10.0, loop(0, 10.0, [0.05] * 20, [0.05] * 19), loop(1, 10.0, [0.05] * 20, [0.05] * 19)))
    assert [row.straggler for row in alike] == [False, False]
    assert ranks_text(rank_rows(snapshot(10.0, loop(0, 10.0, [0.05] * 20, [0.05] * 19)))) == ""


def test_the_text_and_the_dashboard_show_the_rows_with_the_straggler(comms: CommLog) -> None:
    snap = snapshot(10.0, *two_ranks(0.05))
    view = DashboardView.of(snap)
    text = view_text(view)
    assert "ranks: 0 waited 4% at 160 samples/s (p95 " in text
    assert "; 1 waited 51% at 80.0 samples/s (p95 " in text and text.count("straggler") == 2  # row, and advice
    assert "input-bound: rank 1 waited for data 51% of the time" in text
    dashboard = LoaderDashboard(clock=ManualClock())
    dashboard.update(snap)
    table = dashboard.ranks_table.value
    assert "<td" in table and "rank 1 (straggler)" in table and "rank 0 (straggler)" not in table
    one = LoaderDashboard(clock=ManualClock())
    one.update(snapshot(10.0, loop(0, 10.0, [0.05] * 20, [0.05] * 19)))
    assert one.ranks_table.value == ""  # one rank: the main figures are its own
