"""uc_jupyter.jupyter.completer: what Tab offers on a ``%uc_load`` line, straight from ``complete_line``.

What the notebook's completer shows end to end (names, paths, options through IPython) is in test_magics.py.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.jupyter.completer import complete_line

OPTIONS = ("--to", "--columns", "--limit", "--monitor", "--no-monitor")
VALUES = {"--to": ("pandas", "paths", "arrow"), "--labels": ("folder",)}


def complete(line: str, catalog: LocalCatalog, default_catalog: str = "main") -> list[str]:
    return complete_line(line, catalog, default_catalog=default_catalog, options=OPTIONS, values=VALUES)


def docs_folder(catalog: LocalCatalog) -> Path:
    """The local folder of the volume main.ml.docs (tests/jupyter/conftest.py)."""
    return Path(catalog.get_volume("main.ml.docs").storage_location.removeprefix("file://"))


# ---------------------------------------------------------------- options and their values
def test_an_options_values_complete_after_it_even_before_a_letter_is_typed(catalog: LocalCatalog) -> None:
    assert complete("%uc_load main.ml.points --to ", catalog) == ["arrow", "pandas", "paths"]
    assert complete("%uc_load main.ml.points --to pa", catalog) == ["pandas", "paths"]
    assert complete("%uc_load main.ml.points --to x", catalog) == []


def test_option_names_complete_from_a_dash_sorted(catalog: LocalCatalog) -> None:
    assert complete("%uc_load main.ml.points -", catalog) == sorted(OPTIONS)
    assert complete("%uc_load main.ml.points --no", catalog) == ["--no-monitor"]
    assert complete("%uc_load --l", catalog) == ["--limit"]  # options before the source, too


def test_nothing_completes_once_the_source_is_given(catalog: LocalCatalog) -> None:
    assert complete("%uc_load main.ml.points ma", catalog) == []
    assert complete("%uc_load main.ml.points --to pandas ma", catalog) == []
    assert complete("%uc_load /Volumes/main/ml/docs /Vol", catalog) == []


# ---------------------------------------------------------------- dotted names
def test_one_word_offers_catalogs_and_the_default_catalogs_schemas(catalog: LocalCatalog) -> None:
    catalog.create_catalog("other")
    catalog.create_schema("other.features")
    assert complete("%uc_load ", catalog) == ["main.", "ml.", "other."]
    assert complete("%uc_load ", catalog, default_catalog="other") == ["features.", "main.", "other."]
    assert complete("%uc_load o", catalog) == ["other."]


def test_two_parts_offer_the_catalogs_schemas_and_the_default_schemas_tables(catalog: LocalCatalog) -> None:
    assert complete("%uc_load main.", catalog) == ["main.ml."]
    assert complete("%uc_load ml.", catalog) == ["ml.points"]  # ml is a schema of main, the default
    assert complete("%uc_load main.ml.", catalog) == ["main.ml.points"]


def test_names_that_are_no_catalog_or_schema_complete_nothing_and_raise_nothing(catalog: LocalCatalog) -> None:
    for line in ("%uc_load nope.", "%uc_load main.nope.", "%uc_load nope.ml.", "%uc_load a.b.c.d", "%uc_load ma in"):
        assert complete(line, catalog) == [], line


def test_a_principal_without_grants_is_offered_no_names(catalog: LocalCatalog) -> None:
    catalog.create_principal("carol")
    with catalog.as_principal("carol"):
        assert complete("%uc_load ", catalog) == []
        assert complete("%uc_load main.ml.", catalog) == []


# ---------------------------------------------------------------- /Volumes paths
def test_volumes_paths_complete_level_by_level_with_folders_ending_in_a_slash(catalog: LocalCatalog) -> None:
    assert complete("%uc_load /", catalog) == ["/Volumes/"]
    assert complete("%uc_load /Volumes/", catalog) == ["/Volumes/main/"]
    assert complete("%uc_load /Volumes/main/", catalog) == ["/Volumes/main/ml/"]
    assert complete("%uc_load /Volumes/main/ml/", catalog) == ["/Volumes/main/ml/docs/"]
    assert complete("%uc_load /Volumes/main/ml/docs/", catalog) == [
        "/Volumes/main/ml/docs/cats/",
        "/Volumes/main/ml/docs/dogs/",
    ]
    assert complete("%uc_load /Volumes/main/ml/docs/dogs/doc0", catalog) == [
        f"/Volumes/main/ml/docs/dogs/doc0{i}.txt" for i in (0, 2, 4, 6, 8)
    ]


def test_hidden_files_are_not_offered_as_the_datasets_skip_them_too(catalog: LocalCatalog) -> None:
    folder = docs_folder(catalog)
    (folder / ".DS_Store").write_text("x")
    (folder / "cats" / ".partial").mkdir()
    assert complete("%uc_load /Volumes/main/ml/docs/", catalog) == [
        "/Volumes/main/ml/docs/cats/",
        "/Volumes/main/ml/docs/dogs/",
    ]
    assert complete("%uc_load /Volumes/main/ml/docs/.", catalog) == []
    assert ".partial" not in str(complete("%uc_load /Volumes/main/ml/docs/cats/", catalog))


def test_paths_that_are_not_under_volumes_list_nothing_of_this_machine(catalog: LocalCatalog, tmp_path: Path) -> None:
    (tmp_path / "private.txt").write_text("x")
    for line in ("%uc_load /x", f"%uc_load {tmp_path}/", "%uc_load /etc/", "%uc_load /Volumesx/"):
        assert complete(line, catalog) == [], line


def test_climbing_out_of_a_volume_lists_nothing(catalog: LocalCatalog) -> None:
    beside = docs_folder(catalog).parent
    (beside / "neighbour.txt").write_text("another volume's file")
    for line in (
        "%uc_load /Volumes/main/ml/docs/../",
        "%uc_load /Volumes/main/ml/docs/cats/../../",
        "%uc_load /Volumes/main/ml/docs/../../../../",
        "%uc_load /Volumes/main/ml/../ml/docs/",
    ):
        assert complete(line, catalog) == [], line


def test_a_symlink_inside_a_volume_is_not_followed_out_of_it(catalog: LocalCatalog, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not in any volume")
    os.symlink(outside, docs_folder(catalog) / "escape")
    assert complete("%uc_load /Volumes/main/ml/docs/escape/", catalog) == []
    assert complete("%uc_load /Volumes/main/ml/docs/escape/s", catalog) == []


def test_a_principal_without_read_volume_is_offered_no_paths(catalog: LocalCatalog) -> None:
    catalog.create_principal("carol")
    catalog.grant("main", "USE CATALOG", "carol")
    catalog.grant("main.ml", "USE SCHEMA", "carol")
    with catalog.as_principal("carol"):
        assert complete("%uc_load /Volumes/main/ml/", catalog) == []
        assert complete("%uc_load /Volumes/main/ml/docs/", catalog) == []
    catalog.grant("main.ml.docs", "READ VOLUME", "carol")
    with catalog.as_principal("carol"):
        assert complete("%uc_load /Volumes/main/ml/docs/c", catalog) == ["/Volumes/main/ml/docs/cats/"]


def test_the_value_of_an_option_after_the_source_still_completes_a_volume_path(catalog: LocalCatalog) -> None:
    # --resume /Volumes/.../RUN: a word after an option is its value, not a second source.
    line = "%uc_load /Volumes/main/ml/docs --resume /Volumes/main/ml/d"
    assert complete(line, catalog) == ["/Volumes/main/ml/docs/"]


def test_a_folder_swapped_for_a_symlink_after_the_resolve_checked_it_is_not_listed(
    catalog: LocalCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The swap lands at the worst moment: right after the resolve looked at the folder's real path."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("not in any volume")
    cats = docs_folder(catalog) / "cats"
    realpath = os.path.realpath

    def looked_then_swapped(path: str, *args: Any, **kwargs: Any) -> str:
        found = realpath(path, *args, **kwargs)
        if os.fspath(path) == str(cats) and not cats.is_symlink():
            cats.rename(tmp_path / "moved")
            cats.symlink_to(outside, target_is_directory=True)
        return found

    monkeypatch.setattr(os.path, "realpath", looked_then_swapped)
    assert complete("%uc_load /Volumes/main/ml/docs/cats/", catalog) == []
    assert cats.is_symlink()  # the swap happened, after the check
