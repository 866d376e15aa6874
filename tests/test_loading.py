"""load() without Spark: volumes as loaders, datasets and paths; tables as torch datasets; bad values."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.data import DataLoader, UCTableDataset, UCVolumeDataset
from uc_jupyter.data.decode import DecodeError
from uc_jupyter.loading import load

VOLUME = "/Volumes/main/ml/docs"
TABLE = "main.ml.t"


@pytest.fixture
def sources(catalog: LocalCatalog) -> LocalCatalog:
    """A volume of three text files and a table whose column names invite splitting ("ab", "a", "b")."""
    info = catalog.create_volume("main.ml.docs")
    folder = Path(info.storage_location.removeprefix("file://"))
    for i in range(3):
        (folder / f"d{i}.txt").write_text(f"doc {i}")
    catalog.create_table(TABLE, pa.table({"ab": [1, 2, 3], "a": [4, 5, 6], "b": [7, 8, 9]}))
    return catalog


def test_volumes_load_as_loader_dataset_or_paths(sources: LocalCatalog) -> None:
    loader = load(VOLUME, decode="text", batch_size=2, num_workers=0)
    assert isinstance(loader, DataLoader) and loader.batch_size == 2
    assert sorted(t for batch in loader for t in batch) == ["doc 0", "doc 1", "doc 2"]
    assert isinstance(load(VOLUME, to="dataset", shuffle=True, seed=3), UCVolumeDataset)
    assert [Path(p).read_text() for p in load(VOLUME, to="paths")] == ["doc 0", "doc 1", "doc 2"]


def test_a_table_loads_as_a_torch_dataset_with_one_str_as_one_column(sources: LocalCatalog) -> None:
    rows = load(TABLE, to="torch", columns="ab", batch_size=2)
    assert isinstance(rows, UCTableDataset) and rows.columns == ["ab"]
    assert next(iter(rows))["ab"].tolist() == [1, 2]
    assert load(TABLE, to="torch").batch_size == 1024  # left out: the default, only then


@pytest.mark.parametrize(
    ("source", "options", "error", "message"),
    [
        (VOLUME, {"batch_size": 0}, ValueError, "invalid batch_size 0: give a whole number >= 1"),
        (VOLUME, {"batch_size": -1}, ValueError, "invalid batch_size -1"),
        (VOLUME, {"batch_size": 1.5}, TypeError, "invalid batch_size 1.5"),
        (VOLUME, {"batch_size": False}, TypeError, "invalid batch_size False"),
        (VOLUME, {"shuffle": "no"}, TypeError, "invalid shuffle 'no': give True or False"),
        (VOLUME, {"recursive": "yes"}, TypeError, "invalid recursive 'yes'"),
        (VOLUME, {"monitor": 1}, TypeError, "invalid monitor 1"),
        (VOLUME, {"seed": -2}, ValueError, "invalid seed -2"),
        (VOLUME, {"num_workers": -1}, ValueError, "invalid num_workers -1"),
        (VOLUME, {"prefetch_factor": 0}, ValueError, "invalid prefetch_factor 0"),
        (VOLUME, {"num_workers": 0, "prefetch_factor": 2}, ValueError, "invalid prefetch_factor with num_workers=0"),
        (VOLUME, {"cache_dir": 5}, TypeError, "invalid cache_dir 5"),
        (VOLUME, {"decode": ""}, ValueError, "--decode must be one of image, text, bytes, none; got ''"),
        (VOLUME, {"to": ""}, ValueError, "--to for volumes must be one of loader, dataset, paths; got ''"),
        (VOLUME, {"labels": "folders"}, ValueError, "invalid labels 'folders'"),
        (VOLUME, {"include": []}, ValueError, "invalid include []: it would match nothing"),
        (VOLUME, {"exclude": 3}, TypeError, "invalid exclude 3: give a glob pattern (a str) or a list of them"),
        (TABLE, {"include": "*.png"}, ValueError, "--include applies to /Volumes paths only, not to main.ml.t"),
        (TABLE, {"labels": "folder"}, ValueError, "--labels applies to /Volumes paths only"),
        (TABLE, {"to": "torch", "batch_size": 0}, ValueError, "invalid batch_size 0"),
        (TABLE, {"to": "torch", "columns": []}, ValueError, "invalid columns []"),
        (TABLE, {"columns": []}, ValueError, "invalid columns []"),
        (TABLE, {"columns": ["a", 1]}, TypeError, "invalid columns ['a', 1]: 1 is not a str"),
        (TABLE, {"limit": -1}, ValueError, "invalid limit -1"),
        (TABLE, {"limit": True}, TypeError, "invalid limit True"),
        (TABLE, {"version": 1.0}, TypeError, "invalid version 1.0"),
        (TABLE, {"where": 5}, TypeError, "invalid where 5"),
        (
            TABLE,
            {"to": "pandas", "seed": 3},
            ValueError,
            "--seed applies to --to torch and to volumes, not to --to pandas",
        ),
    ],
)
def test_bad_values_are_one_line_errors_before_anything_is_read(
    sources: LocalCatalog, source: str, options: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)) as caught:
        load(source, **options)
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ the demo's image folder
IMAGES = "/Volumes/main/ml/images"


@pytest.fixture
def demo(isolated_home: Path) -> None:
    """The demo catalog, small: three class folders of 4 images (32x32 RGB PNGs) and labels.csv."""
    from uc_jupyter.demo import init_demo

    init_demo(rows=30, images_per_class=4)


@pytest.mark.usefixtures("demo")
def test_labels_folder_gives_image_and_label_batches_and_reads_sub_folders_itself() -> None:
    loader = load(IMAGES, decode="image", labels="folder", batch_size=5, shuffle=True)
    assert loader.dataset.classes == ("circle", "square", "triangle")
    batches = list(loader)
    x, y = batches[0]
    assert tuple(x.shape) == (5, 3, 32, 32) and tuple(y.shape) == (5,)
    assert sorted(int(label) for _, labels in batches for label in labels) == [0] * 4 + [1] * 4 + [2] * 4
    assert loader.stats().skipped == 1  # labels.csv
    both = load(IMAGES, decode="image", labels="folder", recursive=True, to="dataset")  # the README's form
    assert len(both) == 12 and both.skipped == 1


@pytest.mark.usefixtures("demo")
def test_decode_image_reads_images_only_and_says_when_recursive_is_missing() -> None:
    dataset = load(IMAGES, recursive=True, decode="image", to="dataset")
    assert len(dataset) == 12 and dataset.skipped == 1
    assert all(tuple(image.shape) == (3, 32, 32) for image in dataset)
    with pytest.raises(ValueError, match=re.escape(f"{IMAGES} holds no image files at its top, only in sub-folders")):
        load(IMAGES, decode="image")
    assert [Path(p).name for p in load(IMAGES, to="paths")] == ["labels.csv"]  # no decoder: every file


@pytest.mark.usefixtures("demo")
def test_include_and_exclude_pick_the_files() -> None:
    circles = load(IMAGES, recursive=True, include="circle/*", exclude=["*_00000.png"], to="paths")
    assert [Path(p).name for p in circles] == [f"circle_{i:05d}.png" for i in (1, 2, 3)]
    pairs = load(IMAGES, labels="folder", include=["square/*", "triangle/*"], to="paths")
    assert [label for _, label in pairs] == [0] * 4 + [1] * 4  # classes: the folders still read
    with pytest.raises(DecodeError, match=re.escape(f"{IMAGES}/labels.csv: decode_image could not decode it")):
        list(load(IMAGES, include="*.csv", decode="image", to="dataset"))  # include= overrides the image filter
