"""The sidebar's logic as plain functions over a real embedded catalog (no server)."""

from __future__ import annotations

import datetime
import decimal
import doctest
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pyarrow as pa
import pytest

from uc_jupyter.catalog import CatalogError, InvalidName, NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.server import browse, handlers
from uc_jupyter.server.browse import (
    BadRequest,
    json_safe,
    list_catalogs,
    list_objects,
    list_schemas,
    parse_rows,
    pool_records,
    status_of,
    table_preview,
)
from uc_jupyter.testing.boards import pool_record

# The sidebar's catalog calls, on the embedded catalog and over uc-jupyter serve (tests/conftest.py).
pytestmark = pytest.mark.both_backends


def _volume_folder(catalog: LocalCatalog, name: str) -> Path:
    return Path(catalog.resolve_volume_path("/Volumes/" + name.replace(".", "/")).path)


@pytest.fixture
def shared(catalog: LocalCatalog) -> LocalCatalog:
    """Tables t1 (alice: MODIFY only) and t2 (alice: SELECT through the schema), hidden t3; volumes
    v1 (alice: WRITE VOLUME only), v2 (alice: READ VOLUME), hidden v3."""
    for name in ("t1", "t2", "t3"):
        catalog.create_table(f"main.ml.{name}", pa.table({"x": [1, 2]}), comment=f"table {name}")
    for name in ("v1", "v2", "v3"):
        catalog.create_volume(f"main.ml.{name}")
    catalog.create_principal("alice")
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    catalog.grant("main.ml.t1", "MODIFY", "alice")
    catalog.grant("main.ml.t2", "SELECT", "alice")
    catalog.grant("main.ml.v1", "WRITE VOLUME", "alice")
    catalog.grant("main.ml.v2", "READ VOLUME", "alice")
    return catalog


def test_listings_show_what_the_principal_may_see(shared: LocalCatalog) -> None:
    assert list_catalogs(shared) == {
        "items": [{"name": "main", "full_name": "main", "kind": "catalog", "comment": None}]
    }
    assert list_schemas(shared, "MAIN") == {
        "items": [{"name": "ml", "full_name": "main.ml", "kind": "schema", "comment": None}]
    }
    everything = list_objects(shared, "main.ml")
    assert [(t["full_name"], t["readable"]) for t in everything["tables"]] == [
        ("main.ml.t1", True),
        ("main.ml.t2", True),
        ("main.ml.t3", True),
    ]
    assert everything["tables"][0] == {
        "name": "t1",
        "full_name": "main.ml.t1",
        "kind": "table",
        "comment": "table t1",
        "readable": True,
    }
    assert [v["kind"] for v in everything["volumes"]] == ["volume"] * 3
    with shared.as_principal("alice"):
        theirs = list_objects(shared, "main.ml")
    assert [(t["name"], t["readable"]) for t in theirs["tables"]] == [("t1", False), ("t2", True)]
    assert [(v["name"], v["readable"]) for v in theirs["volumes"]] == [("v1", False), ("v2", True)]


def test_listing_errors_name_the_object(shared: LocalCatalog) -> None:
    with pytest.raises(InvalidName, match="expected 'catalog.schema'"):
        list_objects(shared, "main")
    with pytest.raises(NotFound, match="catalog nope does not exist"):
        list_schemas(shared, "nope")
    shared.create_catalog("other")
    shared.create_principal("bob")
    with shared.as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks USE CATALOG on main"):
        list_schemas(shared, "main")


def test_a_preview_reads_only_the_first_rows_of_a_many_file_table(catalog: LocalCatalog) -> None:
    catalog.create_table("main.ml.big", pa.table({"part": [0] * 500, "i": list(range(500))}))
    for part in range(1, 4):
        catalog.create_table("main.ml.big", pa.table({"part": [part] * 500, "i": list(range(500))}), mode="append")
    preview = table_preview(catalog, "main.ml.big", rows=100)
    assert preview["version"] == 3 and preview["full_name"] == "main.ml.big" and preview["rows"] == 2000
    assert preview["columns"] == [
        {"name": "part", "type": "long", "nullable": True},
        {"name": "i", "type": "long", "nullable": True},
    ]
    rows = preview["preview"]["rows"]
    assert len(rows) == 100 and len({r[0] for r in rows}) == 1  # all from one file
    assert [r[1] for r in rows] == list(range(100))
    assert len(table_preview(catalog, "main.ml.big", rows=7)["preview"]["rows"]) == 7
    assert table_preview(catalog, "main.ml.big", rows=0)["preview"] == {"columns": ["part", "i"], "rows": []}
    with pytest.raises(BadRequest, match="rows must be an integer from 0 to 100, got 101"):
        table_preview(catalog, "main.ml.big", rows=101)


def test_a_preview_of_awkward_types_is_strict_json(catalog: LocalCatalog) -> None:
    data = pa.table(
        {
            "f": pa.array([float("nan"), float("inf"), 1.25]),
            "big": pa.array([2**60, -(2**60), 3], pa.int64()),
            "ts": pa.array(
                [datetime.datetime(2024, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)] * 3, pa.timestamp("us", "UTC")
            ),
            "d": pa.array([datetime.date(2024, 1, 31)] * 3),
            "b": pa.array([b"\x00\x01", None, b"x" * 2000], pa.binary()),
            "dec": pa.array([decimal.Decimal("1.10")] * 3, pa.decimal128(5, 2)),
            "tags": pa.array([["a", "b"], [], None], pa.list_(pa.string())),
            "s": pa.array([{"k": 1, "v": "x"}] * 3, pa.struct([("k", pa.int32()), ("v", pa.string())])),
            "text": pa.array(["é" * 1500, "", None]),
        }
    )
    catalog.create_table("main.ml.odd", data)
    rows = table_preview(catalog, "main.ml.odd")["preview"]["rows"]
    json.dumps(rows, allow_nan=False)  # no NaN, no bytes, no datetimes
    first, second, third = rows
    assert first[:4] == ["NaN", "1152921504606846976", "2024-01-02T03:04:05+00:00", "2024-01-31"]
    assert (second[0], second[1], third[0], third[1]) == ("Infinity", "-1152921504606846976", 1.25, 3)
    assert (first[4], second[4]) == ("base64:AAE=", None) and third[4].endswith("…")
    assert first[5] == "1.10" and (first[6], second[6], third[6]) == (["a", "b"], [], None)
    assert first[7] == {"k": 1, "v": "x"}
    assert first[8] == "é" * 1000 + "…" and second[8] == ""


def test_a_preview_needs_select(shared: LocalCatalog) -> None:
    with shared.as_principal("alice"):
        assert table_preview(shared, "main.ml.t2", rows=1)["preview"]["rows"] == [[1]]
        with pytest.raises(PermissionDenied, match="^alice lacks SELECT on main.ml.t1$") as denied:
            table_preview(shared, "main.ml.t1")
    assert status_of(denied.value) == 403
    with pytest.raises(NotFound, match=r"^table main\.ml\.t does not exist; did you mean main\.ml\.t\d\?$"):
        table_preview(shared, "main.ml.t")
    with pytest.raises(InvalidName, match="that is a path"):
        table_preview(shared, "/Volumes/main/ml/v1")


def test_pool_records_keep_the_given_kernels_with_live_processes(isolated_home: Path) -> None:
    folder = isolated_home / "pools"
    folder.mkdir()

    def board(kernel: str | None, pid: int) -> dict[str, object]:
        record = pool_record(kernel, pid=pid, size=2, state="busy")
        (folder / f"{kernel or f'pid-{pid}'}.1.json").write_text(json.dumps(record))
        return record

    ours = board("k-1", os.getpid())
    board("k-2", os.getpid())  # another server's kernel
    board(None, os.getpid())  # a pool outside any kernel
    gone = subprocess.Popen([sys.executable, "-c", ""])
    gone.wait()
    board("k-3", gone.pid)  # a dead kernel: its file goes away
    (folder / "k-1.2.json").write_text("{not json")  # a file that is no status: skipped, the rest still listed
    assert pool_records(["k-1", "k-3"]) == {"pools": [ours]}
    assert pool_records([]) == {"pools": []}
    assert not (folder / "k-3.1.json").exists()


@pytest.mark.parametrize(("text", "rows"), [(None, 10), ("", 10), ("0", 0), ("100", 100), (" 7 ", 7)])
def test_parse_rows_accepts_0_to_100(text: str | None, rows: int) -> None:
    assert parse_rows(text) == rows


@pytest.mark.parametrize("text", ["101", "-1", "1.5", "ten", "1e2", "0x10", "٣"])
def test_parse_rows_refuses_anything_else(text: str) -> None:
    with pytest.raises(BadRequest, match=r"rows must be an integer from 0 to 100, got") as raised:
        parse_rows(text)
    assert status_of(raised.value) == 400


def test_status_of_maps_errors_to_http() -> None:
    assert status_of(InvalidName("x")) == 400
    assert status_of(EscapesVolume("x")) == 400
    assert status_of(PermissionDenied("a", "SELECT", "t")) == 403
    assert status_of(FileNotFoundError("x")) == 404
    assert status_of(CatalogError("table main.ml.t: cannot open version 3")) == 500
    assert status_of(ValueError("x")) is None and status_of(KeyError("x")) is None


def test_json_safe_leaves_plain_values_alone() -> None:
    values = [None, True, 0, -(2**53), 1.5, "text", [1, [2]], {"a": None}]
    assert json_safe(values) == values
    assert json_safe(datetime.timedelta(seconds=90)) == 90.0
    assert json_safe(datetime.time(1, 2, 3)) == "01:02:03"


@pytest.mark.parametrize("module", [browse, handlers], ids=lambda m: m.__name__)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_the_row_count_comes_from_the_log_less_what_deletion_vectors_delete(catalog: LocalCatalog) -> None:
    from uc_jupyter.testing.deletion_vectors import delete_with_deletion_vector

    catalog.create_table("main.ml.counted", pa.table({"i": list(range(40))}))
    catalog.create_table("main.ml.counted", pa.table({"i": list(range(40, 60))}), mode="append")
    assert table_preview(catalog, "main.ml.counted", rows=0)["rows"] == 60
    location = catalog.get_table("main.ml.counted").storage_location.removeprefix("file://")
    delete_with_deletion_vector(location, {0: [0, 1, 2, 3, 4]})
    assert table_preview(catalog, "main.ml.counted", rows=0)["rows"] == 55
