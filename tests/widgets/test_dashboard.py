"""LoaderDashboard state and the messages it sends, driven by recorded Snapshots under a fake clock."""

from __future__ import annotations

import io
import itertools
import os
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest
from PIL import Image

from uc_jupyter.telemetry.collector import Collector
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.widgets import LoaderDashboard
from uc_jupyter.widgets.charts import COLORS, pass_times
from uc_jupyter.widgets.view import format_seconds

from .conftest import CommLog, loop, recorded_run, snapshot, worker

PNG = b"\x89PNG\r\n\x1a\n"


def colored_pixels(png: bytes, color: str) -> int:
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    pixels = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    return int(np.all(pixels == rgb, axis=-1).sum())


def test_first_update_shows_cache_throughput_latency_and_charts(comms: CommLog) -> None:
    cache = {"used": 25_000_000, "budget": 100_000_000, "evictions": 3, "hits": 30}
    snap = snapshot(
        2.0,
        loop(0, 2.0, [0.01] * 9 + [0.2], [0.02] * 9),
        worker(0, 0, 2.0, 40, **cache),
        worker(0, 1, 2.0, 40, **cache),
    )
    dashboard = LoaderDashboard(title="epoch 0", clock=ManualClock())
    assert dashboard.update(snap) is True

    assert (dashboard.cache_bar.value, dashboard.cache_bar.max) == (25e6, 100e6)
    assert dashboard.cache_label.value == "cache 25.0 MB of 100 MB (25%), hit rate 75%, 3 evictions"
    assert dashboard.throughput_label.value == "10 batches, 320 samples at 160 samples/s"
    p = snap.percentiles()
    assert dashboard.latency_label.value == (
        f"fetch p50 {format_seconds(p['p50'])}, p95 {format_seconds(p['p95'])}, p99 {format_seconds(p['p99'])}"
    )
    assert p["p50"] < 0.012 < 0.15 < p["p99"]
    # 0.29 s waiting for data against 0.18 s of compute
    assert "input-bound: the loop waited for data 62% of the time" in dashboard.verdict_label.value
    assert dashboard.shard_label.value == "shards: 1 rank x 2 workers, 80 items"
    assert dashboard.flagged_ranks == ()
    assert bytes(dashboard.shard_image.value).startswith(PNG)
    assert bytes(dashboard.latency_image.value).startswith(PNG)
    assert "<b>epoch 0</b>" in dashboard.title.value
    assert dashboard.text().startswith("10 batches, 320 samples")


def test_uneven_and_empty_shards_are_flagged(comms: CommLog) -> None:
    def shards(t: float, last: int) -> list:  # type: ignore[type-arg]
        return [worker(0, 0, t, 50), worker(0, 1, t, 50), worker(1, 0, t, 50), worker(1, 1, t, last)]

    clock = ManualClock()
    dashboard = LoaderDashboard(clock=clock)
    dashboard.update(snapshot(0.0, *shards(0.0, 50)))
    even_png = bytes(dashboard.shard_image.value)
    assert dashboard.flagged_ranks == ()
    assert dashboard.shard_label.value == "shards: 2 ranks x 2 workers, 100 items each"
    assert colored_pixels(even_png, COLORS["uneven"]) == 0

    clock.now = 1.0
    dashboard.update(snapshot(1.0, *shards(1.0, 49)))
    assert dashboard.flagged_ranks == (1,)
    assert "uneven: rank 1 has 99 of 100" in dashboard.shard_label.value
    assert COLORS["uneven"] in dashboard.shard_label.value  # the warning colour
    assert bytes(dashboard.shard_image.value) != even_png
    assert colored_pixels(bytes(dashboard.shard_image.value), COLORS["uneven"]) > 100

    clock.now = 2.0
    dashboard.update(snapshot(2.0, *shards(2.0, 0)))
    assert dashboard.flagged_ranks == (1,)
    assert dashboard.shard_label.value.endswith("uneven: rank 1 has 50 of 100; rank 1 worker 1</span>")
    assert colored_pixels(bytes(dashboard.shard_image.value), COLORS["uneven"]) > 100

    clock.now = 3.0
    dashboard.update(snapshot(3.0, worker(0, 0, 3.0, 50), worker(1, 0, 3.0, 0)))
    assert dashboard.flagged_ranks == (1,)
    assert "empty: rank 1" in dashboard.shard_label.value
    assert colored_pixels(bytes(dashboard.shard_image.value), COLORS["empty"]) == 0  # an empty bar has no height
    assert colored_pixels(bytes(dashboard.shard_image.value), COLORS["normal"]) > 100


def test_latency_labels_hint_and_time_series_follow_a_recorded_run(comms: CommLog) -> None:
    run = recorded_run(seconds=3.0, per_second=20)
    clock = ManualClock()
    dashboard = LoaderDashboard(clock=clock)
    hints = []
    for snap in run:
        clock.now = snap.time
        if dashboard.update(snap):
            hints.append(dashboard.verdict_label.value)
    assert dashboard.flush() is True  # the last snapshot came 0.2 s after the last redraw: kept, now drawn

    last = run[-1]
    p = last.percentiles()
    assert dashboard.latency_label.value == (
        f"fetch p50 {format_seconds(p['p50'])}, p95 {format_seconds(p['p95'])}, p99 {format_seconds(p['p99'])}"
    )
    assert dashboard.throughput_label.value.startswith(f"{last.batches:,} batches, {last.samples_delivered:,} samples")
    # The fetch time grows past the 10 ms of compute: the hint turns from compute- to input-bound.
    assert "<b>compute-bound: " in hints[0] and "<b>input-bound: " in hints[-1]
    # Windows between drawn snapshots add up to every batch, fetch means rise, compute stays at 10 ms.
    history = dashboard.history
    assert sum(point.batches for point in history) == last.batches
    assert [point.time for point in history] == sorted(point.time for point in history)
    assert all(a.fetch < b.fetch for a, b in itertools.pairwise(history))
    assert all(point.compute == pytest.approx(0.01) for point in history[1:])
    assert dashboard.cache_label.value == "cache 60.0 MB of 100 MB (60%), hit rate 86%, 5 evictions"


def test_at_most_four_redraws_per_second_and_one_chart_render_per_second(comms: CommLog) -> None:
    run = recorded_run(seconds=3.0, per_second=20)  # every snapshot differs from the one before
    clock = ManualClock()
    dashboard = LoaderDashboard(clock=clock)
    widgets = len({m.comm_id for m in comms.messages if m.msg_type == "comm_open"})
    redraws: list[float] = []
    renders: dict[str, list[float]] = {dashboard.shard_image.model_id: [], dashboard.latency_image.model_id: []}
    for snap in run:
        clock.now = snap.time
        before = len(comms)
        dashboard.update(snap)
        sent = comms.updates(before)
        assert len(comms) - before == len(sent)  # nothing but state updates
        if sent:
            redraws.append(snap.time)
            assert len({m.comm_id for m in sent}) == len(sent) <= widgets  # one message per widget changed
            for m in sent:
                renders.get(m.comm_id, []).append(snap.time)

    per_second = Counter(int(t) for t in redraws)
    assert set(per_second) == {0, 1, 2}
    assert all(3 <= n <= 4 for n in per_second.values()), per_second
    assert min(b - a for a, b in itertools.pairwise(redraws)) >= 0.25
    assert dashboard.redraws == len(redraws)
    shard, latency = renders.values()
    assert shard == [0.0]  # the shards never change
    assert latency[0] == 0.0 and len(latency) == 3
    assert all(b - a >= 1.0 for a, b in itertools.pairwise(latency))  # chart_interval


def test_an_unchanged_snapshot_sends_nothing(comms: CommLog) -> None:
    clock = ManualClock()
    collector = Collector(clock=clock)
    for sample in (loop(0, 1.0, [0.01, 0.02], [0.03]), worker(0, 0, 1.0, 64, used=10, budget=100)):
        collector.offer(sample)
    dashboard = LoaderDashboard(clock=clock)
    assert dashboard.update(collector.snapshot()) is True
    drawn = dashboard.redraws

    for step in range(1, 6):
        clock.now = step * 2.0  # well past the throttle and the chart interval
        again = collector.snapshot()  # a new Snapshot object, a new time, the same content
        before = len(comms)
        assert dashboard.update(again) is False
        assert dashboard.update(again, force=True) is False
        assert len(comms) == before  # not one message
    assert dashboard.redraws == drawn


def test_a_throttled_snapshot_is_kept_until_flush(comms: CommLog) -> None:
    clock = ManualClock()
    dashboard = LoaderDashboard(clock=clock)
    dashboard.update(snapshot(0.0, loop(0, 0.0, [0.01], [])))
    clock.now = 0.1
    before = len(comms)
    assert dashboard.update(snapshot(0.1, loop(0, 0.1, [0.01] * 5, [0.01] * 4))) is False
    assert len(comms) == before
    assert dashboard.throughput_label.value.startswith("1 batches")
    assert dashboard.flush() is True
    assert dashboard.throughput_label.value.startswith("5 batches")
    assert dashboard.flush() is False  # nothing left


def test_display_shows_the_widget(comms: CommLog) -> None:
    dashboard = LoaderDashboard()
    bundle = dashboard._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == dashboard.widget.model_id


def test_only_the_process_that_made_it_may_update_it(comms: CommLog) -> None:
    dashboard = LoaderDashboard()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            dashboard.update(snapshot(0.0))
            os.write(write, b"updated")
        except RuntimeError as error:
            os.write(write, str(error).encode())
        finally:
            os._exit(0)
    os.close(write)
    os.waitpid(pid, 0)
    message = os.read(read, 10_000).decode()
    os.close(read)
    assert message.startswith(f"LoaderDashboard.update called in process {pid}; widgets live in the kernel process")


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="max_redraws must be positive, got 0"):
        LoaderDashboard(max_redraws=0)


def test_skipped_files_verdict_and_advice_are_shown(comms: CommLog) -> None:
    skipping = [replace(worker(0, w, 2.0, 40), skipped=n) for w, n in ((0, 1), (1, 2))]
    snap = snapshot(2.0, loop(0, 2.0, [0.05] * 10, [0.01] * 9), *skipping)
    dashboard = LoaderDashboard(clock=ManualClock(), cpus=2)
    dashboard.update(snap)
    assert dashboard.skipped_label.value == "3 files skipped (not images, or outside include/exclude)"
    assert dashboard.verdict_label.value.startswith(f'<span style="color:{COLORS["uneven"]}"><b>input-bound: ')
    assert dashboard.advice_label.value == (
        '<ul style="margin:0 0 0 1.2em;padding:0"><li>raise num_workers to 2: data loads inside the training loop, '
        "between its steps</li></ul>"
    )
    text = dashboard.text()
    assert "3 files skipped" in text and "to do: raise num_workers to 2" in text


def test_the_timeline_leaves_out_the_time_between_passes_and_marks_where_each_begins(comms: CommLog) -> None:
    run = recorded_run(seconds=1.0, per_second=20)
    later = [Snapshot(snap.samples, snap.time + 600.0) for snap in run]  # the same work, 10 minutes on
    clock = ManualClock()
    dashboard = LoaderDashboard(clock=clock)
    dashboard.begin_pass("epoch 0", None)
    for snap in run[:10]:
        clock.now = snap.time
        dashboard.update(snap, force=True)
    dashboard.end_pass(run[9])
    dashboard.begin_pass("epoch 1", run[9])
    for snap in later[10:]:
        clock.now = snap.time
        dashboard.update(snap, force=True)
    labels = [point.pass_label for point in dashboard.history]
    assert labels[0] == "epoch 0" and labels[-1] == "epoch 1" and sorted(labels) == labels
    times, starts = pass_times(dashboard.history)
    assert [label for _, label in starts] == ["epoch 1"]
    assert times[-1] < 1.0  # the passes' own second, not the 600 s between them
