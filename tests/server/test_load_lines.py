"""The lines "Insert %uc_load" writes: their shape for each kind of content, and that each one runs in
IPython through the real magic over the demo catalog and gives a full pass of what it loads."""

from __future__ import annotations

import doctest
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from IPython.core.error import UsageError
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.catalog import Catalog, NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.demo import init_demo
from uc_jupyter.jupyter.magics import LOAD_OPTIONS
from uc_jupyter.server import load_lines
from uc_jupyter.server.browse import status_of
from uc_jupyter.server.load_lines import (
    MAX_LISTINGS,
    MAX_SAMPLE,
    Sample,
    file_line,
    folder_line,
    load_line,
    sample_folder,
    table_line,
)

# The sidebar's catalog calls, on the embedded catalog and over uc-jupyter serve (tests/conftest.py).
pytestmark = pytest.mark.both_backends

IMAGES_PER_CLASS = 4


@pytest.fixture
def demo(catalog: LocalCatalog) -> LocalCatalog:
    """The demo catalog (main.ml.iris; /Volumes/main/ml/images: circle/, square/, triangle/, labels.csv)
    and volume main.ml.raw: top.txt, parquet/part-{0,1}.parquet, odd [name].csv, empty/."""
    init_demo(catalog, rows=30, images_per_class=IMAGES_PER_CLASS)
    catalog.create_volume("main.ml.raw")
    raw = Path(catalog.resolve_volume_path("/Volumes/main/ml/raw").path)
    (raw / "parquet").mkdir(parents=True)
    (raw / "empty").mkdir()
    (raw / "top.txt").write_text("top")
    (raw / "odd [name].csv").write_text("a,b\n1,2\n")
    for i in range(2):
        (raw / "parquet" / f"part-{i}.parquet").write_bytes(b"PAR1")
    return catalog


@pytest.fixture
def shell(demo: LocalCatalog) -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_line_magic("load_ext", "uc_jupyter")
    ip.run_line_magic("config", "UCMagics.monitor = False")  # the dashboard is not what is tested here
    yield ip
    ip.run_line_magic("unload_ext", "uc_jupyter")
    ip.run_line_magic("config", "UCMagics.monitor = True")  # the shell is the process's one: its default back


def run(shell: InteractiveShell, line: str) -> Any:
    """Run ``line`` as a cell; the value it assigned (the name left of ``=``)."""
    result = shell.run_cell(line)
    result.raise_error()
    return shell.user_ns[line.split(" = ", 1)[0]]


def test_the_table_line_is_a_pandas_frame_of_the_canonical_name(demo: LocalCatalog) -> None:
    from uc_jupyter.jupyter.args import parse

    answer = load_line(demo, "Main.ML.Iris")
    assert answer == {"source": "main.ml.iris", "line": "df = %uc_load main.ml.iris --to pandas"}
    # The magic reads it as load("main.ml.iris", to="pandas") (running it needs Spark: the README's lines
    # are run in a real kernel elsewhere).
    assert parse(answer["line"].split("%uc_load ", 1)[1], LOAD_OPTIONS) == (["main.ml.iris"], {"to": "pandas"})


def test_the_image_volume_line_yields_images_with_their_folder_labels(shell: InteractiveShell) -> None:
    answer = load_line(_catalog(), "/Volumes/main/ml/images")
    line = answer["line"]
    assert line == "loader = %uc_load /Volumes/main/ml/images --decode image --labels folder --shuffle"
    loader = run(shell, line)
    batches = list(loader)
    labels = [int(y) for _, ys in batches for y in ys]
    assert sorted(labels) == sorted([0, 1, 2] * IMAGES_PER_CLASS)  # labels.csv beside the folders is skipped
    images, _ = batches[0]
    assert images.ndim == 4  # (batch, channels, height, width)


def test_a_class_folder_line_yields_its_images(shell: InteractiveShell) -> None:
    line = load_line(_catalog(), "/Volumes/main/ml/images/circle")["line"]
    assert line == "loader = %uc_load /Volumes/main/ml/images/circle --decode image --shuffle"
    loader = run(shell, line)
    assert sum(len(batch) for batch in loader) == IMAGES_PER_CLASS


@pytest.mark.parametrize(
    ("path", "line", "count"),
    [
        ("/Volumes/main/ml/raw", "ds = %uc_load /Volumes/main/ml/raw --recursive --to dataset", 4),
        ("/Volumes/main/ml/raw/parquet", "ds = %uc_load /Volumes/main/ml/raw/parquet --to dataset", 2),
    ],
)
def test_other_folders_give_a_dataset_of_their_files(shell: InteractiveShell, path: str, line: str, count: int) -> None:
    assert load_line(_catalog(), path)["line"] == line
    paths = list(run(shell, line))
    assert len(paths) == count and all(Path(p).is_file() for p in paths)


def test_a_file_line_gives_that_file_only(shell: InteractiveShell) -> None:
    answer = load_line(_catalog(), "/Volumes/main/ml/raw/odd [name].csv")
    line = answer["line"]
    assert line == "paths = %uc_load /Volumes/main/ml/raw --to paths --include 'odd [[]name[]].csv'"
    [path] = run(shell, line)
    assert Path(path).read_text() == "a,b\n1,2\n"
    [labels] = run(shell, load_line(_catalog(), "/Volumes/main/ml/images/labels.csv")["line"])
    assert Path(labels).read_text().startswith("path")


def test_an_empty_folder_gets_the_line_for_files_to_come(shell: InteractiveShell) -> None:
    line = load_line(_catalog(), "/Volumes/main/ml/raw/empty")["line"]
    assert line == "ds = %uc_load /Volumes/main/ml/raw/empty --to dataset"
    result = shell.run_cell(line)  # until files arrive, running it says so in one line
    assert isinstance(result.error_in_exec, UsageError)
    assert str(result.error_in_exec) == "/Volumes/main/ml/raw/empty holds no files to read"


def test_errors_name_the_object(demo: LocalCatalog) -> None:
    with pytest.raises(NotFound, match="did you mean main.ml.iris") as missing:
        load_line(demo, "main.ml.irsi")
    assert status_of(missing.value) == 404
    with pytest.raises(NotFound, match="^/Volumes/main/ml/images/nope does not exist$"):
        load_line(demo, "/Volumes/main/ml/images/nope")
    demo.create_principal("bob")
    demo.grant("main", "USE CATALOG", "bob")
    demo.grant("main.ml", "USE SCHEMA", "bob")
    with demo.as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks READ VOLUME on main.ml.images"):
        load_line(demo, "/Volumes/main/ml/images")


@pytest.mark.parametrize(
    ("files", "has_folders", "line"),
    [
        (("a.png", "b.JPG"), False, "loader = %uc_load /Volumes/c/s/v --decode image --shuffle"),
        (("a.png", "x/b.png"), True, "loader = %uc_load /Volumes/c/s/v --recursive --decode image --shuffle"),
        (
            ("labels.csv", "cat/1.png", "dog/2.png"),
            True,
            "loader = %uc_load /Volumes/c/s/v --decode image --labels folder --shuffle",
        ),
        (
            ("train/cat/1.png", "val/dog/2.png"),
            True,
            "loader = %uc_load /Volumes/c/s/v --recursive --decode image --shuffle",
        ),
        (("a.csv", "b.csv", "c.png"), False, "ds = %uc_load /Volumes/c/s/v --to dataset"),
        (("x/a.txt",), True, "ds = %uc_load /Volumes/c/s/v --recursive --to dataset"),
        ((), True, "ds = %uc_load /Volumes/c/s/v --recursive --to dataset"),
        ((), False, "ds = %uc_load /Volumes/c/s/v --to dataset"),
    ],
)
def test_folder_lines_follow_what_the_sample_holds(files: tuple[str, ...], has_folders: bool, line: str) -> None:
    assert folder_line("/Volumes/c/s/v", Sample(files, has_folders)) == line


def test_names_the_magic_would_split_are_quoted() -> None:
    assert table_line("main.ml.iris") == "df = %uc_load main.ml.iris --to pandas"
    assert folder_line("/Volumes/c/s/v/my images", Sample(("a.png",))) == (
        "loader = %uc_load '/Volumes/c/s/v/my images' --decode image --shuffle"
    )
    quoted = "'it'\"'\"'s.txt'"
    assert file_line("/Volumes/c/s/v/it's.txt") == f"paths = %uc_load /Volumes/c/s/v --to paths --include {quoted}"


def test_the_look_into_a_big_tree_is_bounded(catalog: LocalCatalog) -> None:
    catalog.create_volume("main.ml.deep")
    root = Path(catalog.resolve_volume_path("/Volumes/main/ml/deep").path)
    for folder in range(20):
        for i in range(10):
            path = root / f"d{folder:02d}" / f"f{i}.png"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()
    sample = sample_folder(catalog, "/Volumes/main/ml/deep")
    assert sample.has_folders
    # The root's listing and then one listing per folder, until enough files are seen.
    assert len(sample.files) == min(MAX_SAMPLE, (MAX_LISTINGS - 1) * 10)
    assert sample.files[:2] == ("d00/f0.png", "d00/f1.png")


def test_docstring_examples() -> None:
    result = doctest.testmod(load_lines, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def _catalog() -> Catalog:
    from uc_jupyter.catalog import get_catalog

    return get_catalog()  # the test's backend: the embedded catalog, or RestCatalog over a served home
