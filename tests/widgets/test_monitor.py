"""monitor(): nothing for quick work, a live dashboard for slow work, a text summary without a kernel."""

from __future__ import annotations

import itertools
import re
import textwrap
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.telemetry.collector import Collector
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.kernels import kernel_env, running_kernel
from uc_jupyter.testing.scripts import run_python
from uc_jupyter.testing.waits import wait_until
from uc_jupyter.widgets import LoaderMonitor, monitor, widgets_can_render
from uc_jupyter.widgets.charts import COLORS

from .conftest import CommLog, loop, recorded_run, worker

WAIT = 30.0  # seconds a test waits for the poll thread at most; it normally takes milliseconds


class Source:
    """A snapshot source the test steps through: ``source()`` returns the current one."""

    def __init__(self, snapshots: list[Snapshot]) -> None:
        self.snapshots = snapshots
        self.index = 0
        self.calls = 0
        self.polled = threading.Event()

    def __call__(self) -> Snapshot:
        self.calls += 1
        self.polled.set()
        return self.snapshots[self.index]

    def step(self, to: int) -> None:
        self.index = to


class Display:
    """Stands in for IPython's display: keeps what was shown, and says when."""

    def __init__(self) -> None:
        self.shown: list[Any] = []
        self.event = threading.Event()

    def __call__(self, widget: Any) -> None:
        self.shown.append(widget)
        self.event.set()


def monitor_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "uc_jupyter-monitor"]


def test_quick_work_shows_nothing_and_polls_nothing(comms: CommLog) -> None:
    source, display = Source(recorded_run(1.0)), Display()
    with monitor(source, interval=0.001, show_after=1.0, clock=ManualClock(), display=display) as m:
        threading.Event().wait(0.05)  # many poll intervals of real time, no time on the clock
    assert (display.shown, source.calls, m.shown, len(comms)) == ([], 0, False, 0)
    assert monitor_threads() == []


def test_slow_work_shows_the_dashboard_updates_it_and_ends_with_a_final_update(comms: CommLog) -> None:
    run = recorded_run(3.0)
    source, display, clock = Source(run), Display(), ManualClock()
    with monitor(source, title="epoch 0", interval=0.001, show_after=1.0, clock=clock, display=display) as m:
        clock.now = 0.9
        threading.Event().wait(0.02)
        assert not display.event.is_set()  # not yet a second of work
        clock.now = 1.0
        assert display.event.wait(WAIT)
        dashboard = m.dashboard
        assert dashboard is not None and display.shown == [dashboard.widget]
        assert dashboard.throughput_label.value.startswith("2 batches")  # filled before it appeared
        source.step(20)
        clock.now = 1.5
        wait_until(
            lambda: dashboard.throughput_label.value.startswith("42 batches"),
            "the poll thread to show 42 batches",
            WAIT,
            interval_s=0.005,
        )
        source.step(len(run) - 1)  # the last snapshot arrives right before the work ends: throttled
        clock.now = 1.6
    assert dashboard.throughput_label.value.startswith(f"{run[-1].batches} batches")
    assert "<b>epoch 0</b>" in dashboard.title.value
    assert len(display.shown) == 1
    assert monitor_threads() == []


def test_the_thread_stops_and_the_error_propagates_when_the_body_raises(comms: CommLog) -> None:
    run = recorded_run(1.0)
    source, display, clock = Source(run), Display(), ManualClock()
    watch = monitor(source, interval=0.001, clock=clock, display=display)

    def failing_work() -> None:
        with watch:
            clock.now = 2.0
            assert display.event.wait(WAIT)
            source.step(len(run) - 1)
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        failing_work()
    assert monitor_threads() == []
    assert watch.dashboard is not None
    assert watch.dashboard.throughput_label.value.startswith(f"{run[-1].batches} batches")
    assert watch.dashboard.status_label.value == (
        f'<span style="color:{COLORS["failed"]}"><b>failed: KeyError: &#x27;boom&#x27;</b></span>'
    )


def test_work_that_ends_between_polls_after_show_after_still_shows_its_end_state(comms: CommLog) -> None:
    run = recorded_run(1.0)
    source, display, clock = Source(run), Display(), ManualClock()
    with monitor(source, interval=600.0, show_after=1.0, clock=clock, display=display) as m:
        clock.now = 1.2  # the thread sleeps for minutes: only the exit can show it
    assert m.dashboard is not None and display.shown == [m.dashboard.widget]
    assert source.calls == 1  # the end state, drawn once, before it appeared


def test_without_a_kernel_a_summary_is_printed_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    assert not widgets_can_render()
    run = recorded_run(1.0)
    source, clock = Source(run), ManualClock()
    with monitor(source, title="epoch 3", clock=clock, show_after=1.0):
        pass
    assert capsys.readouterr().out == ""  # quick: nothing
    assert source.calls == 0

    with monitor(source, title="epoch 3", clock=clock, show_after=1.0):
        clock.advance(1.0)
        source.step(len(run) - 1)
    printed = capsys.readouterr().out
    assert printed.startswith(f"epoch 3: {run[-1].batches} batches, ")
    assert printed.count("\n") == 1
    assert source.calls == 1
    assert monitor_threads() == []  # no thread at all without widgets


def test_a_failing_source_gives_one_notice_and_leaves_the_work_alone(
    comms: CommLog, capsys: pytest.CaptureFixture[str]
) -> None:
    clock, display = ManualClock(), Display()

    def broken() -> Snapshot:
        raise OSError("telemetry queue closed")

    watch = monitor(broken, title="x", interval=0.001, clock=clock, display=display)

    def work() -> str:
        with watch:
            clock.now = 5.0
            wait_until(lambda: watch.error is not None, "the poll thread to meet the error", WAIT, interval_s=0.005)
            return "done"

    assert work() == "done"
    assert capsys.readouterr().err == (
        "uc_jupyter monitor 'x': telemetry failed and live updates stopped: OSError: telemetry queue closed\n"
    )
    assert monitor_threads() == []
    assert display.shown == []


def test_bad_arguments() -> None:
    with pytest.raises(ValueError, match="interval must be positive, got 0"):
        monitor(lambda: Snapshot({}, 0.0), interval=0)
    with pytest.raises(ValueError, match="show_after must be 0 or more, got -1"):
        monitor(lambda: Snapshot({}, 0.0), show_after=-1)
    m = monitor(lambda: Snapshot({}, 0.0), display=Display())
    with m, pytest.raises(RuntimeError, match="a monitor runs once"), m:
        pass


# Runs in a real kernel: a monitor over a snapshot that is there at once, shown with no delay.
KERNEL_CELL = """\
from uc_jupyter.widgets import monitor, widgets_can_render
from uc_jupyter.telemetry.model import Sample, Snapshot
snap = Snapshot({(0, 0): Sample(rank=0, worker=0, seq=1, time=1.0, shard_size=5)}, time=1.0)
with monitor(lambda: snap, show_after=0.0, interval=0.01) as m:
    pass
print(widgets_can_render(), m.shown)
"""


@pytest.mark.servers  # a Jupyter kernel
def test_kernels_render_widgets_terminals_do_not(tmp_path: Path) -> None:
    """Real shells: plain python and a terminal-style IPython shell in a fresh interpreter, and a real
    kernel (jupyter_client, as JupyterLab talks to it), where monitor() displays the dashboard through
    IPython's own display."""
    script = textwrap.dedent(
        """
        import json, sys
        from uc_jupyter.widgets import monitor, widgets_can_render
        from uc_jupyter.telemetry.model import Sample, Snapshot
        found = {"plain": widgets_can_render()}
        from IPython.core.interactiveshell import InteractiveShell
        InteractiveShell.instance()
        found["terminal"] = widgets_can_render()
        print(json.dumps(found))
        """
    )
    found, _ = run_python(script, timeout=300)
    assert found == {"plain": False, "terminal": False}
    with running_kernel(env=kernel_env(), cwd=tmp_path, timeout=300) as kernel:
        cell = kernel.run(KERNEL_CELL)
    assert cell.streams == [("stdout", "True True\n")]
    assert [sorted(data) for data in cell.displays] == [["application/vnd.jupyter.widget-view+json", "text/plain"]]
    assert cell.errors == []


# ------------------------------------------------------------------ one dashboard over a loader's passes


def passes_of(run: list[Snapshot], cuts: list[int]) -> list[tuple[Snapshot, Snapshot]]:
    """(start, end) snapshots of consecutive passes cut out of one cumulative run."""
    return [(run[a], run[b]) for a, b in itertools.pairwise(cuts)]


def test_one_dashboard_over_every_pass_with_per_epoch_and_cumulative_figures(comms: CommLog) -> None:
    run = recorded_run(3.0)  # 60 cumulative snapshots, 2 batches each
    clock, display = ManualClock(), Display()
    watch = LoaderMonitor(Source(run), title="DataLoader", interval=0.001, show_after=0.0, clock=clock, display=display)
    for epoch, (start, end) in enumerate(passes_of(run, [0, 20, 40, 59])):
        clock.now = start.time
        watch.begin(f"epoch {epoch}", start)
        clock.now = end.time
        watch.end(end)
    dashboard = watch.dashboard
    assert dashboard is not None
    assert display.shown == [dashboard.widget]  # one dashboard, shown once (one cell)
    assert dashboard.throughput_label.value.startswith("epoch 2: 38 batches, 1,216 samples at ")  # its own
    assert dashboard.latency_label.value.startswith("epoch 2: fetch p50 ")
    assert dashboard.status_label.value.endswith(">epoch 2: done</span>")
    assert "in epoch 2 " in dashboard.verdict_label.value
    table = dashboard.epochs_table.value
    for label, batches in (("epoch 0", 40), ("epoch 1", 40), ("epoch 2", 38), ("all epochs", 118)):
        assert re.search(rf"<td[^>]*>{label}</td><td[^>]*>[^<]*</td><td[^>]*>{batches}</td>", table), label
    assert [p.state for p in watch.passes] == ["done"] * 3
    assert monitor_threads() == []


def test_a_failed_pass_is_marked_red_and_the_next_pass_is_not_affected(
    comms: CommLog, capsys: pytest.CaptureFixture[str]
) -> None:
    run = recorded_run(2.0)
    clock, display = ManualClock(), Display()
    watch = LoaderMonitor(Source(run), title="DataLoader", interval=0.001, show_after=0.0, clock=clock, display=display)
    watch.begin("epoch 0", None)
    clock.now = 1.0
    watch.end(run[15], error=ValueError("Caught ValueError in DataLoader worker process 0.\nOriginal Traceback ..."))
    dashboard = watch.dashboard
    assert dashboard is not None
    failed = "epoch 0: failed: ValueError: Caught ValueError in DataLoader worker process 0."
    assert failed in dashboard.status_label.value and COLORS["failed"] in dashboard.status_label.value

    watch.begin("epoch 1", run[15])
    clock.now = 2.0
    watch.end(run[-1])
    assert dashboard.status_label.value.endswith(">epoch 1: done</span>")
    assert COLORS["failed"] not in dashboard.status_label.value
    assert f'title="failed: {failed.removeprefix("epoch 0: failed: ")}">failed</span>' in dashboard.epochs_table.value
    assert [p.state for p in watch.passes] == ["failed", "done"]
    assert display.shown == [dashboard.widget]
    assert watch.error is None and capsys.readouterr().err == ""  # nothing about telemetry
    assert monitor_threads() == []


def test_a_poll_stuck_in_source_never_fails_the_next_pass(comms: CommLog, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's report: a rerun after a failed pass stopped with 'TimeoutError: source() did not return
    within 5 s'. A poll that hangs (here: the second call of source() blocks) must neither raise into
    the end of its pass or the next one, nor draw its stale snapshot over a later pass's."""
    run = recorded_run(2.0)
    release, stuck = threading.Event(), threading.Event()
    calls = [0]
    position = [0]

    def source() -> Snapshot:
        calls[0] += 1
        if calls[0] == 2:
            stuck.set()
            release.wait(WAIT)
            return run[1]  # what it read before it hung: older than anything drawn since
        return run[position[0]]

    clock, display = ManualClock(), Display()
    watch = LoaderMonitor(source, title="DataLoader", interval=0.001, show_after=0.0, clock=clock, display=display)
    watch.begin("epoch 0", None)
    assert stuck.wait(WAIT)
    position[0] = 19
    watch.end(run[19], error=KeyError("label"))  # does not wait for the stuck poll, raises nothing
    dashboard = watch.dashboard
    assert dashboard is not None and "epoch 0: failed: KeyError: &#x27;label&#x27;" in dashboard.status_label.value

    position[0] = 30
    watch.begin("epoch 1", run[19])

    def live() -> bool:
        clock.advance(1.0)  # past the redraw throttle each time
        return str(dashboard.throughput_label.value).startswith("epoch 1: 22 batches")

    wait_until(live, "the new pass's polls to draw again", WAIT, interval_s=0.005)
    release.set()  # the old poll returns its stale snapshot now
    position[0] = len(run) - 1
    watch.end(run[-1])
    wait_until(lambda: monitor_threads() == [], "the poll thread to end", WAIT, interval_s=0.005)
    assert dashboard.throughput_label.value.startswith(f"epoch 1: {run[-1].batches - run[19].batches} batches")
    assert dashboard.status_label.value.endswith(">epoch 1: done</span>")
    assert watch.error is None and capsys.readouterr().err == ""


def test_a_pass_still_open_when_the_next_begins_is_stopped(comms: CommLog) -> None:
    run = recorded_run(1.0)
    watch = LoaderMonitor(Source(run), interval=600.0, show_after=0.0, clock=ManualClock(), display=Display())
    watch.begin("epoch 0", None)
    watch.begin("epoch 1", run[10])  # the loop of epoch 0 was abandoned without a word
    watch.end(run[-1])
    assert [(p.label, p.status) for p in watch.passes] == [("epoch 0", "stopped after 22 batches"), ("epoch 1", "done")]


def test_each_new_cell_shows_a_dashboard_of_its_own_passes_with_epochs_from_zero(comms: CommLog) -> None:
    run = recorded_run(1.0)
    cell, display = [1], Display()
    watch = LoaderMonitor(
        Source(run), interval=600.0, show_after=0.0, clock=ManualClock(), display=display, cell=lambda: cell[0]
    )
    shown = []
    for number, epoch in ((1, 0), (1, 1), (2, 2), (2, 3)):  # a loader reused: its epochs go on
        cell[0] = number
        watch.begin(f"epoch {epoch}", None, epoch=epoch)
        watch.end(run[-1])
        shown.append(watch.dashboard)
    first, second = shown[1], shown[3]
    assert first is not None and second is not None and first is not second
    assert display.shown == [first.widget, second.widget]  # cell 1's, then cell 2's
    # Cell 2's scope: its own passes, numbered from 0 (the loader's epochs 2 and 3), cell 1's unchanged.
    assert [p.label for p in watch.passes] == ["epoch 0", "epoch 1"]
    assert [p.epoch for p in watch.passes] == [2, 3]
    assert [p.label for p in first.passes] == ["epoch 0", "epoch 1"]


def test_a_loaded_checkpoints_epochs_are_shown_as_they_are(comms: CommLog) -> None:
    run = recorded_run(1.0)
    watch = LoaderMonitor(Source(run), interval=600.0, show_after=0.0, clock=ManualClock(), display=Display())
    watch.begin("epoch 3", None, epoch=3, positioned=True)  # load_state_dict set the loader to epoch 3
    watch.end(run[-1])
    watch.begin("epoch 4", run[-1], epoch=4)
    watch.end(run[-1])
    assert [p.label for p in watch.passes] == ["epoch 3", "epoch 4"]


def test_the_epochs_table_marks_the_epoch_a_checkpoint_resumed(comms: CommLog) -> None:
    run = recorded_run(2.0)
    resumed = [Snapshot({k: replace(s, resumed_epoch=3) for k, s in snap.samples.items()}, snap.time) for snap in run]
    clock, display = ManualClock(), Display()
    watch = LoaderMonitor(Source(run), interval=600.0, show_after=0.0, clock=clock, display=display)
    watch.begin("epoch 3", None, epoch=3, positioned=True)  # a checkpoint of epoch 3 loaded
    clock.now = 1.0
    watch.end(resumed[19])
    watch.begin("epoch 4", resumed[19], epoch=4)  # its workers still to report: their last samples say 3
    clock.now = 2.0
    watch.end(run[-1])
    dashboard = watch.dashboard
    assert dashboard is not None
    table = dashboard.epochs_table.value
    assert re.search(r"<td[^>]*>epoch 3 \(resumed\)</td><td[^>]*>done</td>", table)
    assert re.search(r"<td[^>]*>epoch 4</td><td[^>]*>done</td>", table)
    assert [p.epoch for p in watch.passes] == [3, 4]


def test_ranks_telemetry_in_the_kernel_shows_the_resumed_epoch(comms: CommLog) -> None:
    """%%uc_distributed --monitor: one pass over the cell, fed by the ranks' samples in the kernel's Collector."""
    collector, clock, display = Collector(clock=lambda: 1.0), ManualClock(), Display()
    with monitor(
        collector.snapshot, title="3 ranks", interval=600.0, show_after=0.0, clock=clock, display=display
    ) as m:
        for rank in range(3):
            collector.offer(replace(worker(rank, 0, 1.0, 40), resumed_epoch=1))
            collector.offer(loop(rank, 1.0, [0.01] * 5, [0.02] * 4))
        clock.now = 1.0
    assert m.dashboard is not None
    assert re.search(r"<td[^>]*>epoch 1 \(resumed\)</td><td[^>]*>done</td>", m.dashboard.epochs_table.value)


def test_a_pass_too_quick_for_a_dashboard_still_leaves_its_line(
    comms: CommLog, capsys: pytest.CaptureFixture[str]
) -> None:
    run = recorded_run(0.5)  # 10 snapshots, 2 batches each
    clock, display = ManualClock(), Display()
    watch = LoaderMonitor(Source(run), title="DataLoader", interval=600.0, show_after=1.0, clock=clock, display=display)
    watch.begin("epoch 0", run[4], epoch=0, total=12)
    watch.end(run[-1])  # 10 batches of 12 in 0.25 s: the loop stopped asking early, still a line
    assert capsys.readouterr().out == (
        "DataLoader: epoch 0: 10/12 batches in 250 ms, 1,280 samples/s, exposed wait 29%\n"
    )
    assert display.shown == [] and len(comms) == 0  # no widget for it
    watch.begin("epoch 1", run[0], epoch=1, total=None)
    clock.advance(1.0)  # long enough: the dashboard takes over, no line
    watch.end(run[-1])
    assert capsys.readouterr().out == "" and display.shown
    watch.begin("epoch 2", run[-1], epoch=2)
    watch.end(run[-1])  # quick again, but the dashboard's epochs table holds its row
    assert capsys.readouterr().out == ""
