"""The demo catalog's summary as a notebook shows it (uc_jupyter.demo)."""

from __future__ import annotations

from pathlib import Path

from IPython.lib.pretty import pretty

from uc_jupyter.demo import init_demo


def test_the_summary_reads_as_lines_not_as_a_dataclass(isolated_home: Path) -> None:
    built = init_demo(rows=30, images_per_class=4)
    assert pretty(built).splitlines() == built.lines()
    assert built.lines()[0] == "built table main.ml.iris: 30 rows" and "DemoSummary" not in pretty(built)
    assert pretty(init_demo(rows=30, images_per_class=4)).startswith("kept table main.ml.iris")
