"""``uc_jupyter.ray.read_volume`` and ``write_volume`` on the session's 2-node Ray cluster, on the embedded
catalog and over ``uc-jupyter serve``: a volume's images by class folder, its text files line by line,
its bytes and its Parquet files, exactly the files the folder holds (hidden ones and what ``exclude``
names left out), READ VOLUME checked; a Dataset written into a folder, visible by one commit, a write
that fails half-way leaving the previous one whole and nothing of its own; every refusal one line
before a task runs."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import uc_jupyter.ray as ucray
from tests.ray.conftest import fails_late, with_readers
from uc_jupyter.catalog import AlreadyExists, Catalog, NotFound, PermissionDenied, as_principal
from uc_jupyter.storage import urls as st
from uc_jupyter.testing.ray_cluster import RayTestCluster

ray_data = pytest.importorskip("ray.data")

pytestmark = pytest.mark.both_backends

COLOURS = {"red": (255, 0, 0), "green": (0, 255, 0)}


def png(colour: tuple[int, int, int], size: tuple[int, int]) -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture
def volume(catalog: Catalog) -> Catalog:
    """main.ml.files: images/{red,green}/ (2 and 3 PNGs of different sizes), a stray file beside them and a
    hidden one; docs/ (two text files); rows/ (two Parquet files). alice may read it, bob may not."""
    catalog.create_volume("main.ml.files")
    root = Path(st.local_path(catalog.get_volume("main.ml.files").storage_location))
    for colour, count in (("red", 2), ("green", 3)):
        (root / "images" / colour).mkdir(parents=True)
        for i in range(count):
            (root / "images" / colour / f"{i}.png").write_bytes(png(COLOURS[colour], (4 + i, 3)))
    (root / "images" / "README.txt").write_text("beside the class folders")
    (root / "images" / "red" / ".hidden.png").write_bytes(png((0, 0, 255), (2, 2)))
    (root / "docs").mkdir()
    (root / "docs" / "a.txt").write_text("one\ntwo\n")
    (root / "docs" / "b.txt").write_text("three\n")
    (root / "docs" / "skip.md").write_text("not text we asked for\n")
    (root / "rows").mkdir()
    pq.write_table(pa.table({"x": [1, 2]}), root / "rows" / "p0.parquet")
    pq.write_table(pa.table({"x": [3]}), root / "rows" / "p1.parquet")
    with_readers(catalog)
    catalog.grant("main.ml.files", "READ VOLUME", "alice")
    return catalog


def xs(rows: list[dict[str, Any]]) -> list[Any]:
    return sorted(r["x"] for r in rows)


def test_images_come_labelled_by_their_class_folder(volume: Catalog, ray_driver: RayTestCluster) -> None:
    with as_principal("alice"):
        rows = ucray.read_volume("/Volumes/main/ml/files/images", files="images", labels="folder").take_all()
    got = sorted((r["path"].rsplit("/", 2)[1:][0], r["label"], r["image"].shape) for r in rows)
    assert got == [
        ("green", 0, (3, 4, 3)),
        ("green", 0, (3, 5, 3)),
        ("green", 0, (3, 6, 3)),
        ("red", 1, (3, 4, 3)),
        ("red", 1, (3, 5, 3)),
    ]
    for row in rows:  # each pixel is its folder's colour
        colour = "green" if row["label"] == 0 else "red"
        assert np.all(row["image"] == np.array(COLOURS[colour], dtype=np.uint8))


def test_text_binary_and_parquet_files_read_as_rows(volume: Catalog, ray_driver: RayTestCluster) -> None:
    with as_principal("alice"):
        lines = ucray.read_volume("/Volumes/main/ml/files/docs", files="text", exclude="*.md").take_all()
        raw = ucray.read_volume("/Volumes/main/ml/files/docs", files="binary", include="*.txt").take_all()
        table = ucray.read_volume("/Volumes/main/ml/files/rows", files="parquet").take_all()
    assert sorted((r["text"], r["path"]) for r in lines) == [
        ("one", "/Volumes/main/ml/files/docs/a.txt"),
        ("three", "/Volumes/main/ml/files/docs/b.txt"),
        ("two", "/Volumes/main/ml/files/docs/a.txt"),
    ]
    assert sorted(r["bytes"] for r in raw) == [b"one\ntwo\n", b"three\n"]
    assert sorted((r["x"], r["path"].rsplit("/", 1)[1]) for r in table) == [
        (1, "p0.parquet"),
        (2, "p0.parquet"),
        (3, "p1.parquet"),
    ]


@pytest.mark.parametrize(
    ("who", "path", "kwargs", "error", "line"),
    [
        ("bob", "/Volumes/main/ml/files/docs", {}, PermissionDenied, r"bob lacks READ VOLUME on main\.ml\.files"),
        ("alice", "/Volumes/main/ml/nope/docs", {}, NotFound, r"volume main\.ml\.nope does not exist"),
        ("alice", "/Volumes/main/ml/files/none", {}, NotFound, r".*/Volumes/main/ml/files/none.*"),
        ("alice", "/Volumes/main/ml/files/docs", {"files": "video"}, ValueError, r"invalid files 'video': .*"),
        ("alice", "/Volumes/main/ml/files/docs", {"files": "images"}, ValueError, r".*holds no images files.*"),
    ],
)
def test_a_refused_read_is_one_line(
    volume: Catalog,
    ray_driver: RayTestCluster,
    who: str,
    path: str,
    kwargs: dict[str, object],
    error: type[Exception],
    line: str,
) -> None:
    with pytest.raises(error) as raised, as_principal(who):
        ucray.read_volume(path, **kwargs)
    assert "\n" not in str(raised.value) and re.fullmatch(line, str(raised.value)), str(raised.value)


def test_a_written_folder_is_read_whole_and_a_failed_write_leaves_the_last_one(
    volume: Catalog, ray_driver: RayTestCluster
) -> None:
    volume.grant("main.ml.files", "WRITE VOLUME", "alice")
    root = Path(st.local_path(volume.get_volume("main.ml.files").storage_location)) / "out"
    with as_principal("alice"):
        first = ray_data.from_items([{"x": i} for i in range(8)], override_num_blocks=4)
        assert ucray.write_volume(first, "/Volumes/main/ml/files/out") == "/Volumes/main/ml/files/out"
        assert xs(ucray.read_volume("/Volumes/main/ml/files/out", files="parquet").take_all()) == list(range(8))
        second = ray_data.from_items([{"x": 10 + i} for i in range(3)])
        ucray.write_volume(second, "/Volumes/main/ml/files/out")
        after_second = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
        with pytest.raises(Exception, match="task killed mid-write"):
            ucray.write_volume(
                ray_data.from_items([{"x": i} for i in range(8)], override_num_blocks=4).map(fails_late),
                "/Volumes/main/ml/files/out",
            )
        assert xs(ucray.read_volume("/Volumes/main/ml/files/out", files="parquet").take_all()) == [10, 11, 12]
    # One export's files, its manifest, and nothing of the first write or of the failed one.
    assert sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == after_second
    assert len({p.split("/", 1)[0] for p in after_second if p.startswith(".uc-export-")}) == 1


@pytest.mark.parametrize(
    ("who", "path", "mode", "error", "line"),
    [
        (
            "bob",
            "/Volumes/main/ml/files/out",
            "overwrite",
            PermissionDenied,
            r"bob lacks WRITE VOLUME on main\.ml\.files",
        ),
        ("alice", "/Volumes/main/ml/files", "overwrite", ValueError, r"/Volumes/main/ml/files is a whole volume; .*"),
        ("alice", "/Volumes/main/ml/files/docs", "error", AlreadyExists, r"/Volumes/main/ml/files/docs exists; .*"),
    ],
)
def test_a_refused_volume_write_is_one_line_and_writes_nothing(
    volume: Catalog, ray_driver: RayTestCluster, who: str, path: str, mode: Any, error: type[Exception], line: str
) -> None:
    volume.grant("main.ml.files", "WRITE VOLUME", "alice")
    root = Path(st.local_path(volume.get_volume("main.ml.files").storage_location))
    before = sorted(p for p in root.rglob("*"))
    with pytest.raises(error) as raised, as_principal(who):
        ucray.write_volume(ray_data.from_items([{"x": 1}]), path, mode=mode)
    assert "\n" not in str(raised.value) and re.fullmatch(line, str(raised.value)), str(raised.value)
    assert sorted(p for p in root.rglob("*")) == before
