"""read_arrow and open_delta: catalog tables straight from their Delta files, no Spark; on both catalog
backends (the embedded catalog, and RestCatalog + a served home: tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog import CatalogError, NotFound
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import UCTableDataset
from uc_jupyter.storage.delta_snapshot import SnapshotMissing
from uc_jupyter.tables.delta import open_delta, read_arrow

pytestmark = pytest.mark.both_backends


def test_columns_and_versions_are_read(catalog: LocalCatalog) -> None:
    assert read_arrow("main.ml.points", columns=["id", "tag"]).column_names == ["id", "tag"]
    assert read_arrow("main.ml.points", columns="tag").column_names == ["tag"]  # one str: one column
    assert open_delta("main.ml.points", version=0).version() == 0


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"columns": []}, ValueError, r"invalid columns \[\]: give at least one column name"),
        (
            {"columns": "idx"},
            ValueError,
            "table main.ml.points has no column 'idx'; did you mean 'id'\\? Its columns are id, x, tag",
        ),
        ({"columns": ["id", 3]}, TypeError, "3 is not a str"),
        ({"version": True}, TypeError, "invalid version True"),
        ({"version": -1}, ValueError, "invalid version -1"),
    ],
)
def test_bad_values_are_one_line_errors(
    catalog: LocalCatalog, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message) as caught:
        read_arrow("main.ml.points", **kwargs)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)


def test_every_reader_says_the_same_line_for_a_missing_version(catalog: LocalCatalog) -> None:
    """main.ml.points: the tables' conftest makes it (one version)."""
    with pytest.raises(SnapshotMissing) as direct:
        UCTableDataset("main.ml.points", version=7)
    with pytest.raises(NotFound) as opened:
        open_delta("main.ml.points", version=7)
    with pytest.raises(NotFound) as read:
        read_arrow("main.ml.points", version=7)
    assert str(direct.value) == str(opened.value) == str(read.value)
    assert str(direct.value).startswith("table main.ml.points: cannot open version 7: ")


def test_the_catalogs_schema_probe_says_the_openers_line(catalog: LocalCatalog, tmp_path: Path) -> None:
    """delta_columns (behind create_table over existing files) raises the catalog's NotFound and
    CatalogError with the opener's line."""
    from uc_jupyter.catalog.delta_files import delta_columns
    from uc_jupyter.catalog.rules.names import parse_name

    name = parse_name("main.ml.t")
    with pytest.raises(NotFound, match=f"^table main.ml.t: no Delta table at {tmp_path / 'none'}$"):
        delta_columns(name, str(tmp_path / "none"), {})
    log = tmp_path / "broken" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("{not json\n")
    with pytest.raises(CatalogError, match="^table main.ml.t: ") as caught:
        delta_columns(name, str(tmp_path / "broken"), {})
    assert not isinstance(caught.value, NotFound) and "\n" not in str(caught.value)
