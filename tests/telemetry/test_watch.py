"""The live-view hook: the loader and the rank pool (below the widgets) ask it for a view, and the
view registered by ``import uc_jupyter`` is the widgets' LoaderMonitor."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import uc_jupyter  # noqa: F401  (registers the dashboard)
from tests.data.loader.test_dataloader import Squares
from uc_jupyter.data import DataLoader
from uc_jupyter.telemetry.model import Snapshot
from uc_jupyter.telemetry.watch import Headroom, ViewMaker, show_passes_with, watch_passes, watching
from uc_jupyter.widgets import LoaderMonitor


class Recorded:
    """A view that writes down what it is told."""

    def __init__(self, source: Callable[[], Snapshot], title: str, headroom: Headroom | None) -> None:
        self.source, self.title, self.headroom = source, title, headroom
        self.calls: list[tuple[Any, ...]] = []

    def begin(
        self,
        label: str,
        start: Snapshot | None,
        *,
        epoch: int | None = None,
        total: int | None = None,
        positioned: bool = False,
    ) -> None:
        self.calls.append(("begin", label, epoch, total))

    def end(self, final: Snapshot | None, *, error: BaseException | str | None = None, stopped: bool = False) -> None:
        self.calls.append(("end", type(error).__name__ if error else None, stopped))


@pytest.fixture
def recorded() -> Iterator[list[Recorded]]:
    made: list[Recorded] = []

    def make(source: Callable[[], Snapshot], title: str, *, headroom: Headroom | None = None) -> Recorded:
        made.append(Recorded(source, title, headroom))
        return made[-1]

    previous = show_passes_with(make)
    try:
        yield made
    finally:
        show_passes_with(previous)


def test_import_uc_jupyter_registers_the_widgets_dashboard() -> None:
    view = watch_passes(lambda: Snapshot({}, time=0.0), "t")
    assert isinstance(view, LoaderMonitor)


def test_a_monitored_loader_shows_every_pass_in_one_view_from_the_hook(recorded: list[Recorded]) -> None:
    loader = DataLoader(Squares(4), batch_size=2, num_workers=0, monitor=True, mlflow=False)
    assert [len(b) for b in loader] == [2, 2]
    first = next(iter(loader))  # left early: the pass is stopped, not done
    assert len(first) == 2
    assert [len(b) for b in loader] == [2, 2]
    [view] = recorded  # one view over all its passes
    assert view.calls == [
        ("begin", "epoch 0", 0, 2),  # len(loader): 2 batches a pass
        ("end", None, False),
        ("begin", "epoch 1", 1, 2),
        ("end", None, True),
        ("begin", "epoch 2", 2, 2),
        ("end", None, False),
    ]
    assert loader.dashboard_monitor is view
    assert view.source().samples == loader.live_stats().samples  # the loader's own figures
    # Its headroom too, for the view to offer: a step run fed by the loader, then from memory.
    assert view.headroom is not None
    stepped: list[Any] = []
    report = view.headroom(stepped.append)
    assert "over 1 steps" in repr(report) and len(stepped) == 3  # 2 batches fed (the first untimed), 1 replayed
    assert loader.epoch == 3 and len(view.calls) == 6  # its own pass: no epoch used, nothing shown


def test_an_unmonitored_loader_asks_for_no_view(recorded: list[Recorded]) -> None:
    assert sum(len(b) for b in DataLoader(Squares(4), batch_size=2, num_workers=0, mlflow=False)) == 4
    assert recorded == []


def test_watching_a_block_ends_it_as_it_ended(recorded: list[Recorded]) -> None:
    with watching(watch_passes(lambda: Snapshot({}, time=0.0), "2 ranks")):
        pass
    with pytest.raises(KeyError), watching(watch_passes(lambda: Snapshot({}, time=0.0), "2 ranks")):
        raise KeyError("x")
    assert [v.calls for v in recorded] == [
        [("begin", "", None, None), ("end", None, False)],
        [("begin", "", None, None), ("end", "KeyError", False)],
    ]


def test_with_no_view_registered_a_monitored_loader_says_so_in_one_line() -> None:
    previous: ViewMaker | None = show_passes_with(None)
    try:
        with pytest.raises(RuntimeError, match=r"^no live view is registered: .* or use monitor=False$"):
            next(iter(DataLoader(Squares(2), batch_size=1, num_workers=0, monitor=True, mlflow=False)))
    finally:
        show_passes_with(previous)
