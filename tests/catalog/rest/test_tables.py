"""uc_jupyter.catalog.rest.tables: writing tables through a UC server, as RestCatalog calls it.

The server is a scripted HTTP double (tests/catalog/rest/scripted_http.py) that vends ``file://``
credentials (none: the local disk), so the Delta files are really written, in tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from tests.catalog.rest.scripted_http import Scripted, scripted_server
from uc_jupyter.catalog import AlreadyExists, CatalogError, NotFound, PermissionDenied
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.catalog.rest.tables import TABLE_ID_PROPERTY

API = "/api/2.1/unity-catalog"
Answer = tuple[int, Any, dict[str, str]]
OK: Answer = (200, {}, {})
NO_TABLE: Answer = (404, {"error_code": "TABLE_DOES_NOT_EXIST", "message": "table main.ml.t does not exist"}, {})


def table_body(location: str, table_type: str = "MANAGED", **extra: Any) -> dict[str, Any]:
    return {
        "name": "t",
        "catalog_name": "main",
        "schema_name": "ml",
        "table_type": table_type,
        "storage_location": location,
        "owner": "admin",
        "created_at": 1_700_000_000_000,
        "columns": [{"name": "x", "type_text": "long", "position": 0, "nullable": True}],
        **extra,
    }


def vended(location: str) -> Answer:
    return (200, {"url": location}, {})  # file://: no keys, the local filesystem


def xs(*values: int) -> pa.Table:
    return pa.table({"x": pa.array(values, pa.int64())})


def rows_at(location: str) -> list[int]:
    return sorted(DeltaTable(location.removeprefix("file://")).to_pyarrow_table()["x"].to_pylist())


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with scripted_server() as server:
        yield server


@pytest.fixture
def rest(scripted: Scripted) -> Iterator[RestCatalog]:
    """A RestCatalog of the scripted server that has already asked who its token is."""
    scripted.script = [(200, {"principal": "admin"}, {}), OK]
    cat = RestCatalog(scripted.url, "ucj_token")
    assert cat.current_principal() == "admin"
    scripted.seen.clear()
    yield cat
    cat.close()


def sent(scripted: Scripted) -> list[tuple[str, str, Any]]:
    return [
        (s["method"], s["path"].removeprefix(API), json.loads(s["body"]) if s["body"] else None) for s in scripted.seen
    ]


def calls(scripted: Scripted) -> list[str]:
    return [f"{method} {path}" for method, path, _ in sent(scripted)]


@pytest.fixture
def staging(tmp_path: Path) -> str:
    return f"file://{tmp_path.resolve()}/staging/s1"


# ----------------------------------------------------------------- managed tables


def test_a_managed_table_is_staged_written_then_registered_with_its_staging_id(
    rest: RestCatalog, scripted: Scripted, staging: str
) -> None:
    scripted.script = [
        NO_TABLE,
        (200, {"id": "s1", "staging_location": staging}, {}),
        vended(staging),
        (200, table_body(staging, table_id="s1"), {}),
    ]
    info = rest.create_table("main.ml.t", xs(1, 2), comment="made here")
    assert calls(scripted) == [
        "GET /tables/main.ml.t",
        "POST /staging-tables",
        "POST /temporary-table-credentials",
        "POST /tables",
    ]
    requests = sent(scripted)
    assert requests[1][2] == {"name": "t", "catalog_name": "main", "schema_name": "ml"}
    assert requests[2][2] == {"table_id": "s1", "operation": "READ_WRITE"}
    registration = requests[3][2]
    assert registration["table_type"] == "MANAGED" and registration["storage_location"] == staging
    assert registration["properties"] == {TABLE_ID_PROPERTY: "s1"} and registration["comment"] == "made here"
    assert registration["data_source_format"] == "DELTA"
    assert [(c["name"], c["type_text"], c["position"]) for c in registration["columns"]] == [("x", "long", 0)]
    assert rows_at(staging) == [1, 2]  # the client wrote the files itself, where the server staged them
    assert (info.full_name, info.id) == ("main.ml.t", "s1")


def test_a_refused_registration_gives_the_staging_table_back(
    rest: RestCatalog, scripted: Scripted, staging: str
) -> None:
    scripted.script = [
        NO_TABLE,
        (200, {"id": "s/1", "staging_location": staging}, {}),
        vended(staging),
        (400, {"error_code": "INVALID_ARGUMENT", "message": "columns do not agree"}, {}),
        OK,
    ]
    with pytest.raises(ValueError, match="columns do not agree"):
        rest.create_table("main.ml.t", xs(1))
    assert calls(scripted)[-1] == "DELETE /uc-jupyter/staging-tables/s%2F1"  # the id is one path segment


def test_a_failed_write_gives_the_staging_table_back_and_says_why_the_write_failed(
    rest: RestCatalog, scripted: Scripted, staging: str
) -> None:
    unwritable = pa.table({"span": pa.array([pa.scalar((1, 2, 3), pa.month_day_nano_interval())])})
    scripted.script = [
        NO_TABLE,
        (200, {"id": "s1", "staging_location": staging}, {}),
        vended(staging),
        (500, {"error_code": "INTERNAL", "message": "the cleanup failed too"}, {}),
    ]
    with pytest.raises(CatalogError, match="table main.ml.t: writing Delta files failed"):
        rest.create_table("main.ml.t", unwritable)
    assert "POST /tables" not in calls(scripted)
    assert calls(scripted)[-1] == "DELETE /uc-jupyter/staging-tables/s1"


def test_a_server_without_staging_tables_asks_for_a_storage_location(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [NO_TABLE, (404, {"error_code": "NOT_FOUND", "message": "no route POST /staging-tables"}, {})]
    with pytest.raises(
        CatalogError, match="has no route POST /staging-tables.*give table main.ml.t a storage_location"
    ):
        rest.create_table("main.ml.t", xs(1))


def test_a_staging_answer_without_a_location_writes_nothing(rest: RestCatalog, scripted: Scripted) -> None:
    # "" would be a relative path: the files would land in whatever folder the kernel runs in.
    scripted.script = [NO_TABLE, (200, {"id": "s1", "staging_location": ""}, {})]
    with pytest.raises(CatalogError, match="StagingTableInfo for main.ml.t has no staging_location"):
        rest.create_table("main.ml.t", xs(1))
    assert calls(scripted) == ["GET /tables/main.ml.t", "POST /staging-tables"]


def test_a_missing_schema_is_the_answer_before_anything_is_staged(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [(404, {"error_code": "SCHEMA_DOES_NOT_EXIST", "message": "schema main.nope does not exist"}, {})]
    with pytest.raises(NotFound, match="^schema main.nope does not exist$"):
        rest.create_table("main.nope.t", xs(1))
    assert calls(scripted) == ["GET /tables/main.nope.t"]


def test_bad_arguments_send_nothing(rest: RestCatalog, scripted: Scripted) -> None:
    with pytest.raises(ValueError, match="invalid mode 'replace'"):
        rest.create_table("main.ml.t", xs(1), mode="replace")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="storage options cannot be sent to a catalog server"):
        rest.create_table("main.ml.t", xs(1), storage_options={"key": "AK"})
    with pytest.raises(TypeError, match="got dict"):
        rest.create_table("main.ml.t", {"x": [1]})
    with pytest.raises(ValueError, match="invalid name"):
        rest.create_table("main.ml.t/../../x", xs(1))
    assert scripted.seen == []


def test_a_new_managed_table_needs_data(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [NO_TABLE]
    with pytest.raises(ValueError, match=r"table main.ml.t: pass data"):
        rest.create_table("main.ml.t")
    assert calls(scripted) == ["GET /tables/main.ml.t"]


# ----------------------------------------------------------------- existing tables


@pytest.fixture
def existing(tmp_path: Path) -> str:
    location = f"file://{tmp_path.resolve()}/tables/t"
    write_deltalake(location.removeprefix("file://"), xs(1))
    return location


def test_mode_error_refuses_an_existing_table_without_writing(
    rest: RestCatalog, scripted: Scripted, existing: str
) -> None:
    scripted.script = [(200, table_body(existing, table_id="tid"), {})]
    with pytest.raises(AlreadyExists, match="table main.ml.t already exists; write with mode 'overwrite' or 'append'"):
        rest.create_table("main.ml.t", xs(2))
    assert calls(scripted) == ["GET /tables/main.ml.t"] and rows_at(existing) == [1]


def test_an_append_writes_with_the_tables_credentials_then_asks_for_a_refresh(
    rest: RestCatalog, scripted: Scripted, existing: str
) -> None:
    scripted.script = [
        (200, table_body(existing, table_id="tid"), {}),
        vended(existing),
        (200, table_body(existing, table_id="tid", comment="refreshed"), {}),
    ]
    info = rest.create_table("main.ml.t", xs(2), mode="append")
    assert calls(scripted) == [
        "GET /tables/main.ml.t",
        "POST /temporary-table-credentials",
        "POST /uc-jupyter/tables/main.ml.t/refresh",
    ]
    assert sent(scripted)[1][2] == {"table_id": "tid", "operation": "READ_WRITE"}
    assert rows_at(existing) == [1, 2] and info.comment == "refreshed"


def test_a_server_without_the_refresh_route_is_asked_for_the_table_again(
    rest: RestCatalog, scripted: Scripted, existing: str
) -> None:
    scripted.script = [
        (200, table_body(existing, table_id="tid"), {}),
        vended(existing),
        (404, {"error_code": "NOT_FOUND", "message": "no route POST /uc-jupyter/tables/main.ml.t/refresh"}, {}),
        (200, table_body(existing, table_id="tid"), {}),
    ]
    rest.create_table("main.ml.t", xs(5), mode="overwrite")
    assert calls(scripted)[-1] == "GET /tables/main.ml.t"
    assert rows_at(existing) == [5]


def test_a_table_gone_before_its_refresh_is_not_found_not_asked_again(
    rest: RestCatalog, scripted: Scripted, existing: str
) -> None:
    scripted.script = [
        (200, table_body(existing, table_id="tid"), {}),
        vended(existing),
        NO_TABLE,
    ]
    with pytest.raises(NotFound, match="table main.ml.t does not exist"):
        rest.create_table("main.ml.t", xs(2), mode="append")
    assert calls(scripted)[-1] == "POST /uc-jupyter/tables/main.ml.t/refresh"


def test_changing_an_existing_table_needs_data(rest: RestCatalog, scripted: Scripted, existing: str) -> None:
    scripted.script = [(200, table_body(existing, table_id="tid"), {})]
    with pytest.raises(ValueError, match="table main.ml.t exists; pass data to append it"):
        rest.create_table("main.ml.t", None, mode="append")
    assert calls(scripted) == ["GET /tables/main.ml.t"]


def denied(privilege: str, securable: str = "main.ml.t") -> Answer:
    metadata = {"principal": "admin", "privilege": privilege, "securable": securable}
    return (403, {"error_code": "PERMISSION_DENIED", "message": "denied", "details": [{"metadata": metadata}]}, {})


def test_a_hidden_table_is_refused_naming_modify_for_a_change(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [denied("SELECT")]
    with pytest.raises(PermissionDenied, match="^admin lacks MODIFY on main.ml.t$"):
        rest.create_table("main.ml.t", xs(1), mode="append")
    assert calls(scripted) == ["GET /tables/main.ml.t"]


def test_a_hidden_table_is_left_to_the_server_to_refuse_for_a_create(
    rest: RestCatalog, scripted: Scripted, staging: str
) -> None:
    scripted.script = [denied("SELECT"), denied("CREATE TABLE", "main.ml")]
    with pytest.raises(PermissionDenied, match="^denied$") as refused:  # the server's own message
        rest.create_table("main.ml.t", xs(1))
    assert (refused.value.privilege, refused.value.securable) == ("CREATE TABLE", "main.ml")
    assert calls(scripted) == ["GET /tables/main.ml.t", "POST /staging-tables"]


# ----------------------------------------------------------------- external tables


def test_an_external_table_is_written_where_the_server_vends_then_registered(
    rest: RestCatalog, scripted: Scripted, tmp_path: Path
) -> None:
    asked, where = f"file://{tmp_path.resolve()}/ext/./t", f"file://{tmp_path.resolve()}/ext/t"
    scripted.script = [NO_TABLE, vended(where), (200, table_body(where, "EXTERNAL", table_id="e1"), {})]
    info = rest.create_table("main.ml.t", xs(3), storage_location=asked)
    requests = sent(scripted)
    assert calls(scripted) == ["GET /tables/main.ml.t", "POST /temporary-path-credentials", "POST /tables"]
    assert requests[1][2] == {"url": asked, "operation": "PATH_CREATE_TABLE"}
    assert requests[2][2]["table_type"] == "EXTERNAL" and requests[2][2]["storage_location"] == where
    assert "properties" not in requests[2][2]
    assert rows_at(where) == [3] and info.table_type == "EXTERNAL"


def test_a_refused_external_registration_removes_only_the_files_this_call_wrote(
    rest: RestCatalog, scripted: Scripted, tmp_path: Path
) -> None:
    (tmp_path / "ext").mkdir()
    (tmp_path / "ext" / "beside.txt").write_text("not ours to remove")
    where = f"file://{tmp_path.resolve()}/ext/t"
    scripted.script = [NO_TABLE, vended(where), (409, {"error_code": "TABLE_ALREADY_EXISTS", "message": "taken"}, {})]
    with pytest.raises(AlreadyExists, match="taken"):
        rest.create_table("main.ml.t", xs(3), storage_location=where)
    assert not (tmp_path / "ext" / "t").exists()
    assert (tmp_path / "ext" / "beside.txt").read_text() == "not ours to remove"


def test_a_vended_location_that_is_not_empty_is_refused_and_left_as_it_was(
    rest: RestCatalog, scripted: Scripted, tmp_path: Path
) -> None:
    busy = tmp_path / "ext" / "busy"
    busy.mkdir(parents=True)
    (busy / "data.csv").write_text("someone's")
    where = f"file://{busy.resolve()}"
    scripted.script = [NO_TABLE, vended(where)]
    with pytest.raises(AlreadyExists, match="is not empty; give an empty location"):
        rest.create_table("main.ml.t", xs(1), storage_location=where)
    assert [p.name for p in busy.iterdir()] == ["data.csv"]
    assert "POST /tables" not in calls(scripted)


def test_registering_a_delta_table_already_there_lets_the_server_read_its_columns(
    rest: RestCatalog, scripted: Scripted, existing: str
) -> None:
    scripted.script = [NO_TABLE, (200, table_body(existing, "EXTERNAL", table_id="e1"), {})]
    rest.create_table("main.ml.t", storage_location=existing, comment="c")
    assert calls(scripted) == ["GET /tables/main.ml.t", "POST /tables"]  # no credentials: nothing is written
    body = sent(scripted)[1][2]
    assert (body["table_type"], body["storage_location"], body["columns"], body["comment"]) == (
        "EXTERNAL",
        existing,
        [],
        "c",
    )
