"""Progress lines for waits: the clock and the output are the test's; the ticker thread only where
its own behaviour is tested."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.progress import (
    LineCallback,
    PlainLines,
    TerminalLine,
    WidgetLine,
    auto_output,
    format_duration,
    waiting,
)
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.kernels import kernel_env, running_kernel


class Recorder:
    """An output that keeps every call, redraws included."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def show(self, text: str) -> None:
        self.calls.append(("show", text))

    def finish(self, text: str) -> None:
        self.calls.append(("finish", text))


def test_a_wait_under_a_second_shows_nothing() -> None:
    clock, out = ManualClock(now=100.0), Recorder()
    with waiting("starting Spark Connect", output=out, clock=clock, interval=None) as wait:
        clock.advance(0.9)
        wait.tick()
    assert out.calls == []
    assert not wait.shown


def test_a_long_wait_says_what_it_waits_for_and_how_long() -> None:
    clock, out = ManualClock(now=100.0), Recorder()
    with waiting("starting Spark Connect (first use: about 20 s)", output=out, clock=clock, interval=None) as wait:
        for _ in range(6):
            clock.advance(1.0)
            wait.tick()
        clock.advance(8.2)
    assert out.calls[0] == ("show", "starting Spark Connect (first use: about 20 s) ... 1 s")
    assert out.calls[5] == ("show", "starting Spark Connect (first use: about 20 s) ... 6 s")
    assert out.calls[-1] == ("finish", "starting Spark Connect (first use: about 20 s): done in 14 s")


def test_a_failed_wait_says_so_and_the_error_goes_on() -> None:
    clock, out = ManualClock(now=100.0), Recorder()

    def start_ranks() -> None:
        with waiting("waiting for 2 ranks", output=out, clock=clock, interval=None) as wait:
            clock.advance(3)
            wait.tick()
            raise TimeoutError("rank 1 did not start")

    with pytest.raises(TimeoutError, match="rank 1 did not start"):
        start_ranks()
    assert out.calls[-1] == ("finish", "waiting for 2 ranks: failed after 3 s")


def test_a_new_label_names_the_next_step_with_the_time_of_the_whole_wait() -> None:
    clock, out = ManualClock(now=100.0), Recorder()
    with waiting("starting Spark Connect", output=out, clock=clock, interval=None) as wait:
        clock.advance(4)
        wait.label = "connecting to Spark Connect"
    assert out.calls == [
        ("show", "connecting to Spark Connect ... 4 s"),
        ("finish", "connecting to Spark Connect: done in 4 s"),
    ]


def test_the_ticker_thread_redraws_while_the_block_blocks() -> None:
    clock, out = ManualClock(now=100.0), Recorder()
    released = threading.Event()
    with waiting("reading main.ml.iris", output=out, clock=clock, interval=0.01):
        clock.advance(5)
        # The block blocks until the ticker has drawn a line (bounded, so a broken ticker fails, not hangs).
        for _ in range(1000):
            if out.calls:
                released.set()
                break
            released.wait(0.01)
    assert released.is_set()
    assert out.calls[0] == ("show", "reading main.ml.iris ... 5 s")
    assert out.calls[-1] == ("finish", "reading main.ml.iris: done in 5 s")


def test_a_terminal_gets_one_line_rewritten_in_place() -> None:
    stream = io.StringIO()
    line = TerminalLine(stream)
    line.show("starting Spark Connect ... 9 s")
    line.show("starting Spark Connect ... 10 s")
    line.finish("done in 10 s")
    assert stream.getvalue() == (
        "\rstarting Spark Connect ... 9 s"
        "\rstarting Spark Connect ... 10 s"
        "\rdone in 10 s" + " " * (len("starting Spark Connect ... 10 s") - len("done in 10 s")) + "\n"
    )


def test_a_log_gets_the_first_and_the_last_line_only() -> None:
    stream = io.StringIO()
    plain = PlainLines(stream)
    for second in (1, 2, 3):
        plain.show(f"starting ... {second} s")
    plain.finish("starting: done in 3 s")
    assert stream.getvalue() == "starting ... 1 s\nstarting: done in 3 s\n"
    lines: list[str] = []
    callback = LineCallback(lines.append)
    callback.show("a ... 1 s")
    callback.show("a ... 2 s")
    callback.finish("a: done in 2 s")
    assert lines == ["a ... 1 s", "a: done in 2 s"]


def test_a_kernel_gets_one_widget_updated_in_place() -> None:
    shown: list[Any] = []
    line = WidgetLine(display=shown.append)
    line.show("starting Spark Connect ... 1 s")
    line.show("starting Spark Connect ... 2 s")
    line.finish("starting Spark Connect: done in 2 s <fast>")
    assert len(shown) == 1
    assert shown[0].value == "<code>starting Spark Connect: done in 2 s &lt;fast&gt;</code>"


def test_auto_output_follows_the_stream() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert isinstance(auto_output(Tty()), TerminalLine)
    assert isinstance(auto_output(io.StringIO()), PlainLines)  # no kernel in a test process


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.4, "0 s"), (59.9, "59 s"), (60, "1 min"), (125, "2 min 5 s"), (3600, "1 h"), (5400, "1 h 30 min"), (-2, "0 s")],
)
def test_durations_read_as_people_say_them(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


@pytest.mark.servers  # a Jupyter kernel
def test_in_a_real_kernel_the_wait_is_one_widget_updated_in_place(tmp_path: Path) -> None:
    """jupyter_client talks to a real IPython kernel as JupyterLab does: one widget is displayed, its
    value is updated by comm messages, and nothing goes to the cell's streams."""
    code = (
        "import time\n"
        "from uc_jupyter.progress import waiting\n"
        "with waiting('starting Spark Connect (first use: about 20 s)', delay=0, interval=0.05):\n"
        "    time.sleep(1.2)\n"
    )
    with running_kernel(env=kernel_env(UC_JUPYTER_HOME=str(tmp_path)), cwd=tmp_path, timeout=120) as kernel:
        cell = kernel.run(code)
    assert cell.failure is None, cell.failure
    assert len(cell.displays) == 1 and "application/vnd.jupyter.widget-view+json" in cell.displays[0]
    assert cell.values, "the widget was never updated"
    assert cell.values[-1].startswith("<code>starting Spark Connect (first use: about 20 s): done in ")
    assert all("starting Spark Connect" in value for value in cell.values)
    assert cell.streams == []


def test_a_wait_inside_a_wait_is_a_step_of_the_outer_line(capsys: pytest.CaptureFixture[str]) -> None:
    clock = ManualClock(now=100.0)
    with waiting("loading main.ml.iris", clock=clock, interval=None) as outer:
        clock.advance(1)
        outer.tick()
        with waiting("starting Spark Connect (first use: about 20 s)", clock=clock, interval=None) as inner:
            assert inner is outer  # one line, relabelled
            clock.advance(11)
            inner.tick()
        clock.advance(13)
        outer.tick()
    assert capsys.readouterr().err.splitlines() == [
        "loading main.ml.iris ... 1 s",
        "starting Spark Connect (first use: about 20 s) ... 1 s",  # a new step: a line in a log
        "loading main.ml.iris ... 12 s",  # back to the outer step (the redraw at 12 s is not logged)
        "loading main.ml.iris: done in 25 s",
    ]
