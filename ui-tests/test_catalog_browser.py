"""The JupyterLab extension in a real browser: browse the demo catalog, insert %uc_load lines, watch the
dashboard of a monitored loader, and see a 2-rank pool in the status bar; the sidebar's long names, pages
of a big folder and the lines it inserts for a table and the image volume. Each step leaves a screenshot."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from .conftest import Lab, _empty_notebook, shot

# A volume whose name does not fit the sidebar, holding more files than one page (200).
LONG_VOLUME = "satellite_scans_of_the_northern_hemisphere_at_full_resolution"
LONG_FILES = 450

MONITORED_LOOP = " --batch-size 4 --num-workers 0 --monitor\nimport time\nfor batch in loader: time.sleep(0.05)"


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


def open_sidebar(page: Any, lab: Lab, path: str) -> None:
    page.goto(lab.open(path))
    editor(page, 1).wait_for()
    page.wait_for_function("() => document.querySelector('#jp-main-statusbar')?.innerText.includes('Idle')")
    page.locator('li[data-id="uc-jupyter-catalog"]').click()


def test_browse_insert_monitor_and_pool_status(lab: Lab, page: Any) -> None:
    open_sidebar(page, lab, "tutorial.ipynb")
    row(page, "catalog:main").wait_for()
    # The panel says who lists the catalog, and which catalog it is.
    assert page.locator(".uc-CatalogBrowser-who").inner_text() == f"admin · embedded catalog in {lab.home.resolve()}"
    shot(page, "1-sidebar-lists-the-demo-catalog")

    # Expanding a table shows its columns; what is open stays open when the page is loaded again.
    row(page, "catalog:main").click()
    row(page, "schema:main.ml").click()
    row(page, "table:main.ml.iris").click()
    row(page, "column:main.ml.iris#species").wait_for()
    page.reload()
    editor(page, 1).wait_for()
    if not page.locator("#uc-jupyter-catalog").is_visible():  # the restored layout may have it open already
        page.locator('li[data-id="uc-jupyter-catalog"]').click()
    row(page, "column:main.ml.iris#species").wait_for()  # reopened, no click
    assert row(page, "column:main.ml.iris#sepal_length").is_visible()
    assert row(page, "table:main.ml.iris").get_attribute("aria-expanded") == "true"
    shot(page, "2-table-columns")

    # "Preview rows" on a table: how many rows it holds, and the first ten.
    row(page, "table:main.ml.iris").click(button="right")
    page.locator(".lm-Menu-item", has_text="Preview rows").click()
    dialog = page.locator(".jp-Dialog")
    dialog.locator(".uc-TablePreview-summary").wait_for()
    assert dialog.locator(".uc-TablePreview-summary").inner_text() == "300 rows, version 0; the first 10"
    assert dialog.locator(".uc-TablePreview tbody tr").count() == 10
    assert dialog.locator(".uc-TablePreview th").first.inner_text() == "sepal_length"
    shot(page, "2b-table-preview")
    dialog.get_by_role("button", name="Close").click()

    editor(page, 0).wait_for()
    run_cell(page, 0)  # %load_ext uc_jupyter
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt", has_text="[1]").wait_for()

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

    # With no notebook open, "Insert %uc_load" is greyed out and says why.
    page.locator(".jp-mod-current .lm-TabBar-tabCloseIcon").first.click()
    page.locator(".jp-Dialog").get_by_role("button", name="Discard").click()
    page.locator(".jp-Notebook").first.wait_for(state="detached")
    row(page, "table:main.ml.iris").click(button="right")
    item = page.locator(".lm-Menu-item", has_text="Insert %uc_load")
    assert item.inner_text().strip() == "Insert %uc_load (open a notebook first)"
    assert "lm-mod-disabled" in (item.get_attribute("class") or "")
    page.keyboard.press("Escape")


def long_file(i: int) -> str:
    return f"scan_{i:04d}_northern_hemisphere_full_resolution_band_07.json"


def make_long_volume(lab: Lab) -> str:
    """main.ml.<LONG_VOLUME> with LONG_FILES small files with long names, made through the catalog."""
    from uc_jupyter.catalog import as_principal
    from uc_jupyter.catalog.embedded.local import LocalCatalog

    with as_principal("admin"):
        catalog = LocalCatalog(lab.home)
        catalog.create_volume(f"main.ml.{LONG_VOLUME}", comment="scans in pages")
        root = Path(catalog.resolve_volume_path(f"/Volumes/main/ml/{LONG_VOLUME}").path)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(LONG_FILES):
        (root / long_file(i)).write_text("{}")
    return f"/Volumes/main/ml/{LONG_VOLUME}"


def label_state(page: Any, ident: str) -> dict[str, Any]:
    """What a row shows: its tooltip, its name's halves, whether both are cut (the middle is lost), and
    whether the tail's end lies inside the row (the name's end is visible)."""
    return page.evaluate(
        """(id) => {
            const row = document.querySelector(`.uc-CatalogTree-item[data-uc-id="${CSS.escape(id)}"]`);
            const head = row.querySelector('.uc-CatalogTree-labelHead');
            const tail = row.querySelector('.uc-CatalogTree-labelTail');
            const box = (el) => el.getBoundingClientRect();
            return {
                title: row.title,
                head: head.textContent,
                tail: tail ? tail.textContent : '',
                cut: head.scrollWidth > head.clientWidth && !!tail && tail.scrollWidth > tail.clientWidth,
                tailVisible: tail ? box(tail).right <= box(row).right + 0.5 && box(tail).width > 0 : false,
            };
        }""",
        ident,
    )


def file_rows(page: Any, folder: str) -> int:
    return page.locator(f'.uc-CatalogTree-item[data-uc-kind="file"][data-uc-id^="file:{folder}/"]').count()


def test_sidebar_names_pages_and_load_lines(lab: Lab, page: Any) -> None:
    folder = make_long_volume(lab)
    (lab.root / "sidebar.ipynb").write_text(json.dumps(_empty_notebook()))
    page.goto(lab.open("sidebar.ipynb"))
    editor(page, 1).wait_for()
    page.wait_for_function("() => document.querySelector('#jp-main-statusbar')?.innerText.includes('Idle')")
    run_cell(page, 0)  # %load_ext uc_jupyter
    page.locator(".jp-Notebook .jp-Cell").first.locator(".jp-InputPrompt", has_text="[1]").wait_for()
    page.locator('li[data-id="uc-jupyter-catalog"]').click()
    row(page, "catalog:main").click()
    row(page, "schema:main.ml").click()

    # A long name keeps its end visible, loses its middle, and shows whole in the tooltip.
    volume = f"volume:{folder}"
    row(page, volume).wait_for()
    state = label_state(page, volume)
    assert state["head"] + state["tail"] == LONG_VOLUME
    assert state["cut"] and state["tailVisible"], state
    assert state["title"] == f"{folder}\nscans in pages"
    shot(page, "6-sidebar-long-name-ellipsis")

    # A big folder comes 200 entries at a time, then "Show more".
    row(page, volume).click()
    more = page.locator(f'.uc-CatalogTree-more[data-uc-owner="{volume}"]')
    more.wait_for()
    assert file_rows(page, folder) == 200
    assert more.inner_text() == "Show 200 more (200 of 450)"
    last = f"file:{folder}/{long_file(199)}"
    file_state = label_state(page, last)
    assert file_state["head"] + file_state["tail"] == long_file(199)
    assert file_state["cut"] and file_state["tailVisible"], file_state
    assert file_state["title"] == f"{folder}/{long_file(199)} (2 B)"
    more.scroll_into_view_if_needed()
    shot(page, "7-sidebar-show-more")
    more.click()
    page.wait_for_function(
        "(n) => document.querySelectorAll('.uc-CatalogTree-item[data-uc-kind=\"file\"]').length >= n", arg=400
    )
    assert file_rows(page, folder) == 400 and more.inner_text() == "Show 50 more (400 of 450)"
    more.focus()  # from the keyboard: the focus moves on to the last entry once every entry is there
    page.keyboard.press("Enter")
    row(page, f"file:{folder}/{long_file(LONG_FILES - 1)}").wait_for()
    assert file_rows(page, folder) == LONG_FILES and more.count() == 0
    page.wait_for_function(
        "(id) => document.activeElement?.getAttribute('data-uc-id') === id",
        arg=f"file:{folder}/{long_file(LONG_FILES - 1)}",
    )
    row(page, f"file:{folder}/{long_file(LONG_FILES - 1)}").scroll_into_view_if_needed()
    shot(page, "8-sidebar-all-pages-loaded")
    row(page, volume).scroll_into_view_if_needed()
    row(page, volume).click()  # collapse it again

    # "Insert %uc_load" on a table writes a pandas line.
    editor(page, 1).click()
    insert_from_menu(page, "table:main.ml.iris")
    wait_for_text(page, 1, "df = %uc_load main.ml.iris --to pandas")
    shot(page, "9-inserted-table-line")

    # On the image volume it writes a labelled loader, which runs and yields (images, labels).
    editor(page, 1).click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    insert_from_menu(page, "volume:/Volumes/main/ml/images")
    image_line = "loader = %uc_load /Volumes/main/ml/images --decode image --labels folder --shuffle"
    wait_for_text(page, 1, image_line)
    assert editor(page, 1).inner_text().strip() == image_line
    shot(page, "10-inserted-image-volume-line")
    editor(page, 1).click()
    page.keyboard.press("Control+End")
    page.keyboard.insert_text(
        "\nseen = [(tuple(x.shape), int(y)) for images, labels in loader for x, y in zip(images, labels)]"
        "\nprint('pass', len(seen), sorted(set(seen)))"
    )
    run_cell(page, 1)
    output = (
        page.locator(".jp-Notebook .jp-Cell")
        .nth(1)
        .locator(
            '.jp-OutputArea-output[data-mime-type="application/vnd.jupyter.stdout"]',
            has_text=re.compile(r"^pass \d+", re.MULTILINE),  # the loop's line, not a notice's "pass num_workers="
        )
    )
    output.wait_for(timeout=120_000)
    *summary, text = output.inner_text().strip().splitlines()
    # The demo's 3 class folders of 50 images each (labels.csv beside them is skipped), in one full pass.
    assert text == "pass 150 [((3, 32, 32), 0), ((3, 32, 32), 1), ((3, 32, 32), 2)]", text
    # The pass was too quick for a dashboard: it left its line (batches, rate, exposed wait) instead,
    # after the loader's notices (information, on stdout: "using 2 workers instead of 6").
    (line,) = [line for line in summary if not line.startswith("uc_jupyter DataLoader: ")]
    assert line.startswith("DataLoader over /Volumes/main/ml/images: epoch 0: ") and " batches in " in line, line
    shot(page, "11-image-volume-line-runs")

    # In a notebook that does not load the extension, the line comes with %load_ext uc_jupyter above it.
    for index in (0, 1):
        editor(page, index).click()
        page.keyboard.press("Control+a")
        page.keyboard.press("Delete")
    insert_from_menu(page, "table:main.ml.iris")
    wait_for_text(page, 1, "df = %uc_load main.ml.iris --to pandas")
    assert editor(page, 1).inner_text().strip() == "%load_ext uc_jupyter\ndf = %uc_load main.ml.iris --to pandas"
    shot(page, "12-inserted-with-load-ext")
