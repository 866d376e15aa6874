"""The JupyterLab extension in a real browser: browse the demo catalog, insert %uc_load lines, watch the
dashboard of a monitored loader, and see a 2-rank pool in the status bar. Each step leaves a screenshot."""

from __future__ import annotations

from typing import Any

from .conftest import Lab, shot

MONITORED_LOOP = (
    " --recursive --decode bytes --batch-size 4 --num-workers 0 --monitor\n"
    "import time\n"
    "for batch in loader: time.sleep(0.05)"
)


def editor(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".cm-content")


def wait_for_text(page: Any, index: int, text: str) -> None:
    page.wait_for_function(
        "([i, t]) => document.querySelectorAll('.jp-Notebook .jp-Cell .cm-content')[i].innerText.includes(t)",
        arg=[index, text],
    )


def row(page: Any, ident: str) -> Any:
    return page.locator(f'.uc-CatalogTree-item[data-uc-id="{ident}"]')


def insert_from_menu(page: Any, ident: str) -> None:
    row(page, ident).click(button="right")
    page.locator(".lm-Menu-item", has_text="Insert %uc_load").click()


def run_cell(page: Any, index: int) -> None:
    editor(page, index).click()
    page.keyboard.press("Shift+Enter")


def test_browse_insert_monitor_and_pool_status(lab: Lab, page: Any) -> None:
    page.goto(lab.open("tutorial.ipynb"))
    editor(page, 1).wait_for()
    page.wait_for_function("() => document.querySelector('#jp-main-statusbar')?.innerText.includes('Idle')")
    run_cell(page, 0)  # %load_ext uc_jupyter
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt", has_text="[1]").wait_for()
    page.locator('li[data-id="uc-jupyter-catalog"]').click()
    row(page, "catalog:main").wait_for()
    shot(page, "1-sidebar-lists-the-demo-catalog")

    # Expanding a table shows its columns.
    row(page, "catalog:main").click()
    row(page, "schema:main.ml").click()
    row(page, "table:main.ml.iris").click()
    row(page, "column:main.ml.iris#species").wait_for()
    assert row(page, "column:main.ml.iris#sepal_length").is_visible()
    shot(page, "2-table-columns")

    # "Insert %uc_load" puts the line into the active cell.
    editor(page, 1).click()
    insert_from_menu(page, "table:main.ml.iris")
    wait_for_text(page, 1, "%uc_load main.ml.iris")
    shot(page, "3-inserted-table-line")

    # The volume's line, run as a monitored loader, renders the live dashboard.
    editor(page, 1).click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    insert_from_menu(page, "volume:/Volumes/main/ml/images")
    wait_for_text(page, 1, "%uc_load /Volumes/main/ml/images")
    editor(page, 1).click()
    page.keyboard.press("Control+Home")
    page.keyboard.insert_text("loader = ")
    page.keyboard.press("Control+End")
    page.keyboard.insert_text(MONITORED_LOOP)
    run_cell(page, 1)
    output = page.locator(".jp-Notebook .jp-Cell").nth(1).locator(".jp-OutputArea-output")
    output.locator("img").nth(1).wait_for(timeout=60_000)  # the shard chart and the latency chart
    output.locator("[class*=progress]").first.wait_for(state="attached")  # the cache bar
    text = output.first.inner_text()
    assert "cache" in text and "batches" in text and "fetch p50" in text and "shards:" in text
    shot(page, "4-live-dashboard")

    # A 2-rank pool appears in the status bar.
    page.keyboard.press("Escape")
    page.keyboard.press("b")  # a new cell below
    page.keyboard.press("Enter")
    page.keyboard.insert_text("%%uc_distributed -n 2\nworld_size")
    page.keyboard.press("Shift+Enter")
    status = page.locator(".uc-PoolStatus")
    page.wait_for_function(
        "() => (document.querySelector('.uc-PoolStatus')?.innerText || '').includes('Ranks: 2')", timeout=90_000
    )
    assert "cpu" in status.inner_text()
    shot(page, "5-pool-status")
