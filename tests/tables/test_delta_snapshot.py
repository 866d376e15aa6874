"""The one Delta snapshot opener: one-line errors for each cause, and the same line from every reader."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from uc_jupyter.catalog import CatalogError, NotFound
from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.data import UCTableDataset
from uc_jupyter.tables.delta import open_delta, read_arrow
from uc_jupyter.tables.delta_snapshot import SnapshotError, SnapshotMissing, open_snapshot


def test_a_version_is_opened_and_the_latest_by_default(tmp_path: Path) -> None:
    write_deltalake(tmp_path / "t", pa.table({"x": [1]}))
    write_deltalake(tmp_path / "t", pa.table({"x": [2]}), mode="append")
    assert open_snapshot(str(tmp_path / "t"), table="main.ml.t").version() == 1
    assert open_snapshot(str(tmp_path / "t"), table="main.ml.t", version=0).version() == 0


@pytest.mark.parametrize("made", ["nothing", "an empty folder"])
def test_no_table_at_the_location_is_snapshot_missing(tmp_path: Path, made: str) -> None:
    where = tmp_path / "t"
    if made == "an empty folder":
        where.mkdir()
    with pytest.raises(SnapshotMissing) as caught:
        open_snapshot(str(where), table="main.ml.t")
    assert str(caught.value) == f"table main.ml.t: no Delta table at {where}"
    assert isinstance(caught.value, LookupError)


def test_a_version_the_table_does_not_have_is_snapshot_missing(tmp_path: Path) -> None:
    write_deltalake(tmp_path / "t", pa.table({"x": [1]}))
    with pytest.raises(SnapshotMissing, match="^table main.ml.t: cannot open version 7: ") as caught:
        open_snapshot(str(tmp_path / "t"), table="main.ml.t", version=7)
    assert "\n" not in str(caught.value)


def test_a_broken_log_is_one_line_naming_the_table_and_where(tmp_path: Path) -> None:
    log = tmp_path / "t" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("{not json\n")
    with pytest.raises(SnapshotError) as caught:
        open_snapshot(str(tmp_path / "t"), table="main.ml.t")
    message = str(caught.value)
    assert message.startswith("table main.ml.t: ") and str(tmp_path / "t") in message
    assert "\n" not in message and "\x1b" not in message


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
    from uc_jupyter.catalog.names import parse_name

    name = parse_name("main.ml.t")
    with pytest.raises(NotFound, match=f"^table main.ml.t: no Delta table at {tmp_path / 'none'}$"):
        delta_columns(name, str(tmp_path / "none"), {})
    log = tmp_path / "broken" / "_delta_log"
    log.mkdir(parents=True)
    (log / "00000000000000000000.json").write_text("{not json\n")
    with pytest.raises(CatalogError, match="^table main.ml.t: ") as caught:
        delta_columns(name, str(tmp_path / "broken"), {})
    assert not isinstance(caught.value, NotFound) and "\n" not in str(caught.value)
