"""monitor(): nothing for quick work, a live dashboard for slow work, a text summary without a kernel."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from typing import Any

import pytest

from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.widgets import monitor, widgets_can_render

from .conftest import CommLog, FakeClock, recorded_run

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


def wait_for(condition: Callable[[], bool]) -> None:
    event = threading.Event()
    for _ in range(int(WAIT / 0.005)):
        if condition():
            return
        event.wait(0.005)
    raise AssertionError("the poll thread did not get there")


def test_quick_work_shows_nothing_and_polls_nothing(comms: CommLog) -> None:
    source, display = Source(recorded_run(1.0)), Display()
    with monitor(source, interval=0.001, show_after=1.0, clock=FakeClock(), display=display) as m:
        threading.Event().wait(0.05)  # many poll intervals of real time, no time on the clock
    assert (display.shown, source.calls, m.shown, len(comms)) == ([], 0, False, 0)
    assert monitor_threads() == []


def test_slow_work_shows_the_dashboard_updates_it_and_ends_with_a_final_update(comms: CommLog) -> None:
    run = recorded_run(3.0)
    source, display, clock = Source(run), Display(), FakeClock()
    with monitor(source, title="epoch 0", interval=0.001, show_after=1.0, clock=clock, display=display) as m:
        clock.set(0.9)
        threading.Event().wait(0.02)
        assert not display.event.is_set()  # not yet a second of work
        clock.set(1.0)
        assert display.event.wait(WAIT)
        dashboard = m.dashboard
        assert dashboard is not None and display.shown == [dashboard.widget]
        assert dashboard.throughput_label.value.startswith("2 batches")  # filled before it appeared
        source.step(20)
        clock.set(1.5)
        wait_for(lambda: dashboard.throughput_label.value.startswith("42 batches"))
        source.step(len(run) - 1)  # the last snapshot arrives right before the work ends: throttled
        clock.set(1.6)
    assert dashboard.throughput_label.value.startswith(f"{run[-1].batches} batches")
    assert "<b>epoch 0</b>" in dashboard.title.value
    assert len(display.shown) == 1
    assert monitor_threads() == []


def test_the_thread_stops_and_the_error_propagates_when_the_body_raises(comms: CommLog) -> None:
    run = recorded_run(1.0)
    source, display, clock = Source(run), Display(), FakeClock()
    watch = monitor(source, interval=0.001, clock=clock, display=display)

    def failing_work() -> None:
        with watch:
            clock.set(2.0)
            assert display.event.wait(WAIT)
            source.step(len(run) - 1)
            raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        failing_work()
    assert monitor_threads() == []
    assert watch.dashboard is not None
    assert watch.dashboard.throughput_label.value.startswith(f"{run[-1].batches} batches")


def test_work_that_ends_between_polls_after_show_after_still_shows_its_end_state(comms: CommLog) -> None:
    run = recorded_run(1.0)
    source, display, clock = Source(run), Display(), FakeClock()
    with monitor(source, interval=600.0, show_after=1.0, clock=clock, display=display) as m:
        clock.set(1.2)  # the thread sleeps for minutes: only the exit can show it
    assert m.dashboard is not None and display.shown == [m.dashboard.widget]
    assert source.calls == 2  # shown filled, then the final update (unchanged: nothing sent twice)


def test_without_a_kernel_a_summary_is_printed_at_the_end(capsys: pytest.CaptureFixture[str]) -> None:
    assert not widgets_can_render()
    run = recorded_run(1.0)
    source, clock = Source(run), FakeClock()
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


def test_a_failing_source_warns_once_and_leaves_the_work_alone(comms: CommLog) -> None:
    clock, display = FakeClock(), Display()

    def broken() -> Snapshot:
        raise OSError("telemetry queue closed")

    watch = monitor(broken, title="x", interval=0.001, clock=clock, display=display)

    def work() -> str:
        with watch:
            clock.set(5.0)
            wait_for(lambda: watch.error is not None)
            return "done"

    with pytest.warns(RuntimeWarning, match=r"monitor 'x': telemetry failed .*OSError: telemetry queue closed"):
        assert work() == "done"
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


def test_kernels_render_widgets_terminals_do_not() -> None:
    """Real shells in a fresh interpreter: plain python, a terminal-style IPython shell, and an
    in-process ipykernel, where monitor() displays the dashboard through IPython's own display."""
    script = textwrap.dedent(
        """
        import json, sys
        from uc_jupyter.widgets import monitor, widgets_can_render
        from uc_jupyter.telemetry.model import Sample, Snapshot
        found = {"plain": widgets_can_render()}
        from IPython.core.interactiveshell import InteractiveShell
        InteractiveShell.instance()
        found["terminal"] = widgets_can_render()
        InteractiveShell.clear_instance()
        from ipykernel.inprocess.manager import InProcessKernelManager
        manager = InProcessKernelManager()
        manager.start_kernel()
        client = manager.client()
        client.start_channels()
        client.execute(
            "from uc_jupyter.widgets import monitor, widgets_can_render\\n"
            "from uc_jupyter.telemetry.model import Sample, Snapshot\\n"
            "snap = Snapshot({(0, 0): Sample(rank=0, worker=0, seq=1, time=1.0, shard_size=5)}, time=1.0)\\n"
            "with monitor(lambda: snap, show_after=0.0, interval=0.01) as m:\\n"
            "    pass\\n"
            "print(widgets_can_render(), m.shown)\\n"
        )
        messages = client.iopub_channel.get_msgs()
        found["kernel"] = [m["content"]["text"] for m in messages if m["msg_type"] == "stream"]
        found["displayed"] = [
            sorted(m["content"]["data"]) for m in messages if m["msg_type"] == "display_data"
        ]
        found["errors"] = [m["content"]["evalue"] for m in messages if m["msg_type"] == "error"]
        print(json.dumps(found))
        """
    )
    done = subprocess.run(
        [sys.executable, "-Xfrozen_modules=off", "-c", script], capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {
        "plain": False,
        "terminal": False,
        "kernel": ["True True\n"],
        "displayed": [["application/vnd.jupyter.widget-view+json", "text/plain"]],
        "errors": [],
    }
