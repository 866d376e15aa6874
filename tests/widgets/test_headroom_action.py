"""The dashboard's *Measure headroom* action, clicked on a real loader's dashboard in an IPython shell:
the notebook's step run fed by the loader and from memory, and each wrong input one red line."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]
import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.data import DataLoader
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.widgets import LoaderDashboard, LoaderMonitor
from uc_jupyter.widgets.headroom_action import HeadroomAction

from .conftest import CommLog

RED = "color:#c62828"


class SlowItems(torch.utils.data.Dataset[int]):
    """Items that take 5 ms each to load (a wait: it holds on a loaded machine)."""

    def __len__(self) -> int:
        return 48

    def __getitem__(self, index: int) -> int:
        time.sleep(0.005)
        return index


@pytest.fixture
def shell_with_dashboard(comms: CommLog) -> Iterator[tuple[InteractiveShell, DataLoader, HeadroomAction]]:
    """An IPython shell whose ``loader`` ran a pass shown on a dashboard with the headroom action."""
    shell = InteractiveShell.instance()
    try:
        loader = DataLoader(SlowItems(), batch_size=4, num_workers=0, monitor=True, mlflow=False)
        watch = LoaderMonitor(
            loader.live_stats,
            interval=600.0,
            show_after=0.0,
            clock=ManualClock(),
            display=lambda widget: None,
            headroom=loader.headroom,
        )
        loader.dashboard_monitor = watch
        shell.user_ns["loader"] = loader
        assert shell.run_cell("for batch in loader:\n    pass").success
        assert watch.dashboard is not None and watch.dashboard.headroom_action is not None
        assert watch.dashboard.headroom_action.widget in watch.dashboard.widget.children
        yield shell, loader, watch.dashboard.headroom_action
    finally:
        InteractiveShell.clear_instance()


def test_a_click_runs_the_notebooks_step_fed_by_the_loader_then_from_memory_and_says_what_it_is_worth(
    shell_with_dashboard: tuple[InteractiveShell, DataLoader, HeadroomAction],
) -> None:
    shell, loader, action = shell_with_dashboard
    # A 2 ms step against 20 ms to load each batch: a perfect loader would be worth several times over.
    assert shell.run_cell("import time\ndef train_step(batch):\n    time.sleep(0.002)").success
    assert action.step_name.value == "train_step"
    action.button.click()
    said = re.fullmatch(
        r"with a perfect loader the loop would run ([\d.]+)x faster: [\d.]+ ms a step fed by this loader, "
        r"[\d.]+ ms from memory, over 11 steps",
        action.result.value,
    )
    assert said and float(said[1]) > 3, action.result.value
    assert not action.button.disabled and not action.measuring
    assert loader.epoch == 1  # its pass was its own: the next epoch is still the one it would have been


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("nothing_here", "no function 'nothing_here' in this notebook: define your training step"),
        ("loader", "no function 'loader' in this notebook"),  # there, but not a function of a batch
        ("x); import os", "no function 'x); import os' in this notebook"),  # a name, never code to run
    ],
)
def test_a_name_that_is_not_a_function_of_the_notebook_is_one_red_line_and_runs_nothing(
    shell_with_dashboard: tuple[InteractiveShell, DataLoader, HeadroomAction], name: str, said: str
) -> None:
    _, loader, action = shell_with_dashboard
    before = loader.stats().batches
    action.step_name.value = name
    action.button.click()
    assert RED in action.result.value and said.replace("'", "&#x27;") in action.result.value, action.result.value
    assert loader.stats().batches == before


def test_a_step_that_fails_is_said_in_one_red_line_and_the_button_works_again(
    shell_with_dashboard: tuple[InteractiveShell, DataLoader, HeadroomAction],
) -> None:
    shell, _, action = shell_with_dashboard
    assert shell.run_cell("def broken(batch):\n    return 1 / 0").success
    action.step_name.value = "broken"
    action.button.click()
    assert action.result.value == f'<span style="{RED}">headroom failed: ZeroDivisionError: division by zero</span>'
    assert not action.button.disabled
    shell.user_ns["fine"] = lambda batch: None
    action.step_name.value = "fine"
    action.button.click()
    assert action.result.value.startswith("with a perfect loader the loop would run"), action.result.value


def buttons(widget: Any) -> list[str]:
    """The descriptions of every button in ``widget``'s tree."""
    if isinstance(widget, widgets.Button):
        return [widget.description]
    return [text for child in getattr(widget, "children", ()) for text in buttons(child)]


def test_a_dashboard_without_a_loaders_headroom_offers_no_action(comms: CommLog) -> None:
    bare = LoaderDashboard(clock=lambda: 0.0)  # a rank pool's: its ranks' loaders are elsewhere
    assert bare.headroom_action is None and buttons(bare.widget) == []
    offered = LoaderDashboard(clock=lambda: 0.0, headroom=lambda step: None)
    assert buttons(offered.widget) == ["Measure headroom"]
