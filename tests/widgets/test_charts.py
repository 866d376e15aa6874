"""The charts: PNG bytes of the right size, drawn without pyplot, showing what the snapshot holds."""

from __future__ import annotations

import io
import subprocess
import sys
import textwrap

import numpy as np
from PIL import Image

from uc_jupyter.widgets import latency_chart, shard_chart
from uc_jupyter.widgets.charts import COLORS
from uc_jupyter.widgets.view import HistoryPoint

from .conftest import loop, snapshot, worker


def pixels(png: bytes) -> np.ndarray:  # type: ignore[type-arg]
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))


def count(png: bytes, color: str) -> int:
    rgb = [int(color[i : i + 2], 16) for i in (1, 3, 5)]
    return int(np.all(pixels(png) == rgb, axis=-1).sum())


def test_charts_are_small_pngs_and_deterministic() -> None:
    snap = snapshot(1.0, loop(0, 1.0, [0.01, 0.02, 0.5], [0.01, 0.01]), worker(0, 0, 1.0, 100))
    history = [HistoryPoint(1.0, 0.01, 0.02, 2), HistoryPoint(1.25, 0.03, 0.02, 1)]
    assert pixels(shard_chart(snap)).shape == (280, 340, 3)  # 3.4 x 2.8 inches at 100 dpi
    assert pixels(latency_chart(snap, history)).shape == (280, 580, 3)  # side by side: 920 px, a notebook's width
    assert shard_chart(snap) == shard_chart(snap)
    assert latency_chart(snap, history) == latency_chart(snap, history)
    assert latency_chart(snap, history) != latency_chart(snap)
    assert pixels(shard_chart(snap, size=(2, 1), dpi=50)).shape == (50, 100, 3)


def test_charts_of_an_empty_snapshot_say_so() -> None:
    empty = snapshot(0.0)
    assert count(shard_chart(empty), COLORS["normal"]) == 0
    assert count(latency_chart(empty), COLORS["fetch"]) == 0


def test_uneven_and_empty_shards_use_the_warning_colours() -> None:
    even = snapshot(1.0, worker(0, 0, 1.0, 50), worker(1, 0, 1.0, 50))
    uneven = snapshot(1.0, worker(0, 0, 1.0, 50), worker(1, 0, 1.0, 40))
    assert count(shard_chart(even), COLORS["uneven"]) == 0
    assert count(shard_chart(even), COLORS["normal"]) > 1000
    assert count(shard_chart(uneven), COLORS["uneven"]) > 1000
    # 200 streams: one bar per rank keeps the chart readable
    many = snapshot(1.0, *(worker(r, w, 1.0, 10) for r in range(25) for w in range(8)))
    assert count(shard_chart(many), COLORS["normal"]) > 1000


def test_the_histogram_shows_every_bucket_with_batches() -> None:
    """Columns holding histogram bars: one bucket's worth for one value, three separate groups for
    values a decade apart (the log-spaced buckets between them are empty)."""

    def bar_columns(png: bytes) -> list[int]:
        left_panel = pixels(png)[:, :290]
        rgb = [int(COLORS["fetch"][i : i + 2], 16) for i in (1, 3, 5)]
        return [int(x) for x in np.flatnonzero(np.all(left_panel == rgb, axis=-1).any(axis=0))]

    def groups(columns: list[int]) -> int:
        return sum(
            1 for a, b in zip([-10, *columns], columns, strict=False) if b - a > 5
        )  # a percentile line splits a bar by a pixel or two

    one = bar_columns(latency_chart(snapshot(1.0, loop(0, 1.0, [0.01] * 2, []))))
    three = bar_columns(latency_chart(snapshot(1.0, loop(0, 1.0, [0.001, 0.01, 0.1] * 30, []))))
    assert len(one) < 290 / 2  # not the whole panel
    assert groups(one) == 1
    assert groups(three) == 3


def test_no_pyplot_no_backend_switch_and_a_lazy_package() -> None:
    script = textwrap.dedent(
        """
        import sys
        import uc_jupyter.widgets
        heavy = [m for m in ("matplotlib", "ipywidgets", "torch", "IPython") if m in sys.modules]
        assert not heavy, heavy
        import matplotlib
        backend = matplotlib.rcParams._get("backend")
        from uc_jupyter.telemetry.model import Sample, Snapshot
        from uc_jupyter.widgets import latency_chart, shard_chart
        snap = Snapshot({(0, 0): Sample(rank=0, worker=0, seq=1, time=1.0, shard_size=3)}, time=1.0)
        shard_chart(snap), latency_chart(snap)
        assert "matplotlib.pyplot" not in sys.modules
        assert matplotlib.rcParams._get("backend") == backend, matplotlib.rcParams._get("backend")
        print("ok")
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.stdout.strip() == "ok", done.stderr
