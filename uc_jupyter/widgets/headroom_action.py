"""The dashboard's headroom action: measure what a perfect loader would be worth to the notebook's step.

A loader's dashboard offers it when the loader can measure headroom (``DataLoader.headroom``): the
user names the training step (a function of a batch defined in the notebook, ``train_step`` unless
told otherwise) and clicks *Measure headroom*; the loader runs that step over a pass of its own and
then over the same batches replayed from memory, and the answer (``with a perfect loader the loop
would run 1.80x faster: ...``) replaces the button's line. A widget's click reaches the kernel when it
is free, so a click during a training cell is measured as that cell ends, never in the middle of its
pass.

Whatever goes wrong is one line in red under the button (a name that is not a function of the
notebook, a loader that delivered too few batches, the step's own error); the dashboard stays.

Example:
    >>> action = HeadroomAction(loader.headroom, namespace=lambda: {"train_step": train_step})  # doctest: +SKIP
    >>> action.button.click()                                                                 # doctest: +SKIP
    >>> action.result.value                                                                   # doctest: +SKIP
    'with a perfect loader the loop would run 1.80x faster: 52.0 ms a step fed by this loader, ...'
"""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from typing import Any

import ipywidgets as widgets  # type: ignore[import-untyped]

from uc_jupyter.telemetry.watch import Headroom
from uc_jupyter.widgets.passes import error_line

__all__ = ["DEFAULT_STEP", "HeadroomAction"]

DEFAULT_STEP = "train_step"
_ERROR_COLOR = "#c62828"


class HeadroomAction:
    """A step's name, a *Measure headroom* button and the answer's line (see the module docstring).

    Args:
        measure: the loader's ``headroom`` (called on the kernel's thread, when the click arrives); its
            report's repr is ``Headroom(<what it found>)``.
        namespace: where the step's name is looked up (the notebook's: IPython's ``user_ns``).

    Attributes:
        widget: the ``VBox`` the dashboard shows.
        step_name, button, result: its parts (a ``Text``, a ``Button``, an ``HTML``).
        measuring: True while a measurement runs (the button is disabled).
    """

    def __init__(self, measure: Headroom, *, namespace: Callable[[], Mapping[str, Any]]) -> None:
        self._measure, self._namespace = measure, namespace
        self.measuring = False
        self.step_name = widgets.Text(value=DEFAULT_STEP, description="step", layout=widgets.Layout(width="16em"))
        self.button = widgets.Button(
            description="Measure headroom",
            tooltip="run the step fed by this loader, then on the same batches from memory: what a perfect loader "
            "would be worth",
        )
        self.result = widgets.HTML("")
        self.button.on_click(lambda _: self.run())
        self.widget = widgets.VBox([widgets.HBox([self.step_name, self.button]), self.result])

    def run(self) -> None:
        """Measure with the step named in :attr:`step_name` and show the answer (what a click does)."""
        if self.measuring:
            return
        name = self.step_name.value.strip() or DEFAULT_STEP
        step = self._namespace().get(name) if name.isidentifier() else None
        if not callable(step):
            self._show_error(
                f"no function {name!r} in this notebook: define your training step (a function of a batch) "
                "and give its name"
            )
            return
        self.measuring, self.button.disabled = True, True
        self.result.value = html.escape(f"measuring headroom with {name}: a pass of this loader, then from memory...")
        try:
            report = self._measure(step)
        except Exception as exc:
            self._show_error(f"headroom failed: {error_line(exc)}")
        else:
            self.result.value = html.escape(_said(report))
        finally:
            self.measuring, self.button.disabled = False, False

    def _show_error(self, text: str) -> None:
        self.result.value = f'<span style="color:{_ERROR_COLOR}">{html.escape(text)}</span>'


def _said(report: object) -> str:
    """'with a perfect loader ...' from 'Headroom(with a perfect loader ...)'."""
    text = repr(report)
    prefix = f"{type(report).__name__}("
    return text[len(prefix) : -1] if text.startswith(prefix) and text.endswith(")") else text
