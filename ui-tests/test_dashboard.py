"""The loader dashboard in a real JupyterLab: one dashboard over two epochs of a monitored loader that waits
for its data, with its verdict, what to change and per-epoch rows, and its *Measure headroom* action
clicked; then a pass that fails, marked in red.

Screenshots of the dashboard during and after the passes land in ``ui-tests/artifacts/``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .conftest import ARTIFACTS, Lab

# A decoder slower than the training step (20 ms a file against 10 ms a batch of 4): input-bound, and with
# num_workers=0 the advice is to add workers. Two epochs of 151 files take about 7 s.
TWO_EPOCHS = """\
import time
from uc_jupyter.data import DataLoader, UCVolumeDataset

def slow_decode(path):
    time.sleep(0.02)
    with open(path, "rb") as file:
        return len(file.read())

def train_step(batch):
    time.sleep(0.01)

images = UCVolumeDataset("/Volumes/main/ml/images", recursive=True, transform=slow_decode)
loader = DataLoader(images, batch_size=4, num_workers=0, monitor=True)
for epoch in range(2):
    for batch in loader:
        train_step(batch)
"""

FAILING_PASS = """\
decoded = [0]

def fails_at_file_80(path):
    decoded[0] += 1
    if decoded[0] == 80:
        raise ValueError("cannot decode file 80")
    time.sleep(0.02)
    return 1

broken = DataLoader(UCVolumeDataset("/Volumes/main/ml/images", recursive=True, transform=fails_at_file_80),
                    batch_size=4, num_workers=0, monitor=True)
for batch in broken:
    time.sleep(0.01)
"""


def notebook(*sources: str) -> dict[str, Any]:
    return {
        "cells": [
            {"cell_type": "code", "execution_count": None, "id": f"d{i}", "metadata": {}, "outputs": [], "source": text}
            for i, text in enumerate(sources)
        ],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"}},
        "nbformat": 4,
        "nbformat_minor": 5,
    }


def cell(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def run(page: Any, index: int) -> None:
    cell(page, index).locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")


def snap_cell(page: Any, index: int, name: str) -> None:
    """Keep a screenshot of one cell (its code and the dashboard under it) as a test artifact."""
    ARTIFACTS.mkdir(exist_ok=True)
    no_news = page.locator(".jp-toast-button", has_text="No")  # JupyterLab's question about its news feed
    if no_news.count():
        no_news.first.click()
    target = cell(page, index)
    target.scroll_into_view_if_needed()
    target.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def output_text(page: Any, index: int) -> str:
    return str(cell(page, index).locator(".jp-OutputArea").inner_text())


def wait_for_output(page: Any, index: int, text: str, timeout: float = 90_000) -> None:
    page.wait_for_function(
        "([i, t]) => (document.querySelectorAll('.jp-Notebook .jp-Cell')[i]"
        "?.querySelector('.jp-OutputArea')?.innerText || '').includes(t)",
        arg=[index, text],
        timeout=timeout,
    )


def test_the_dashboard_tells_what_to_do_across_epochs_and_marks_a_failed_pass(lab: Lab, page: Any) -> None:
    (lab.root / "dashboard.ipynb").write_text(json.dumps(notebook("%load_ext uc_jupyter", TWO_EPOCHS, FAILING_PASS)))
    page.set_viewport_size({"width": 1400, "height": 1500})  # a whole dashboard in one screenshot
    page.goto(lab.open("dashboard.ipynb"))
    cell(page, 2).locator(".cm-content").wait_for()
    page.wait_for_function("() => document.querySelector('#jp-main-statusbar')?.innerText.includes('Idle')")
    run(page, 0)
    cell(page, 0).locator(".jp-InputPrompt", has_text="[1]").wait_for()

    # During the first epoch: the verdict and the advice are there while the cell still runs.
    run(page, 1)
    wait_for_output(page, 1, "input-bound: the loop waited for data")
    wait_for_output(page, 1, "epoch 0: running")
    assert "[*]" in cell(page, 1).locator(".jp-InputPrompt").inner_text()
    cell(page, 1).locator(".jp-OutputArea img").nth(1).wait_for()  # the shard chart and the latency chart
    snap_cell(page, 1, "dashboard-1-during-a-pass")
    text = output_text(page, 1)
    assert "raise num_workers to " in text
    assert "data loads inside the training loop" in text
    assert page.get_by_text("raise num_workers to ").first.is_visible()

    # After both epochs: one dashboard, its figures the last epoch's, a row per epoch and one for both.
    wait_for_output(page, 1, "epoch 1: done")
    cell(page, 1).locator(".jp-InputPrompt", has_text="[2]").wait_for()
    text = output_text(page, 1)
    assert text.count("DataLoader over /Volumes/main/ml/images") == 1  # not one panel per epoch
    assert re.search(r"epoch 1: \d+ batches, \d+ samples at ", text)
    rows = [row.split("\t")[:2] for row in cell(page, 1).locator("table tbody tr").all_inner_texts()]
    assert [[c.strip() for c in row] for row in rows] == [
        ["epoch 0", "done"],
        ["epoch 1", "done"],
        ["all epochs", "2 passes"],
    ]
    assert page.get_by_text("input-bound: the loop waited for data").first.is_visible()

    # The headroom action, clicked once the cell is done: the notebook's train_step, fed by the loader
    # (80 ms of decoding a batch) and then from memory (10 ms).
    cell(page, 1).get_by_role("button", name="Measure headroom").click()
    wait_for_output(page, 1, "with a perfect loader the loop would run", timeout=60_000)
    said = re.search(r"would run ([\d.]+)x faster: [\d.]+ ms a step fed by this loader", output_text(page, 1))
    assert said and float(said[1]) > 2, output_text(page, 1)
    snap_cell(page, 1, "dashboard-2-after-two-epochs")

    # A pass that fails says so, in red, on its own dashboard.
    run(page, 2)
    wait_for_output(page, 2, "epoch 0: failed: ", timeout=120_000)
    failed = cell(page, 2).get_by_text("epoch 0: failed: ").first
    assert failed.is_visible()
    assert "cannot decode file 80" in failed.inner_text()
    assert "rgb(198, 40, 40)" in failed.evaluate("node => getComputedStyle(node).color")
    snap_cell(page, 2, "dashboard-3-failed-pass")
