"""The one Delta snapshot opener: one-line errors for each cause, and the same line from every reader."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from uc_jupyter.storage.delta_snapshot import SnapshotError, SnapshotMissing, open_snapshot


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
