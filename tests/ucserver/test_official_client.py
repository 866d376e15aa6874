"""The official Unity Catalog client (``unitycatalog-client`` 0.7.0) against a real ``uc-jupyter serve``.

The client lives in ``.venv-ucclient`` (``make ucclient``; ``make test`` builds it first), because its
pins would downgrade packages in ``.venv``. This module runs ``official_client_driver.py`` with that
venv's Python, once, against the module's server (``conftest.py``: a real ``uc-jupyter serve`` on
127.0.0.1) with the admin's token, and checks every step the driver prints: that the client parsed
each response into its model (strict pydantic types: one wrong type or unknown enum value anywhere
and the whole response fails), that what it read back is what it sent, and that errors surface as
the client's exception classes with Unity Catalog's HTTP statuses and codes.

A missing ``.venv-ucclient`` fails the test rather than skipping it: CI runs ``make test``, which
builds it, so a skip could only ever hide a broken build step, and the failure names the one command
that fixes a bare ``pytest`` run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from tests.ucserver.conftest import ADMIN, Served
from uc_jupyter.catalog import as_principal
from uc_jupyter.storage.urls import resolve_location
from uc_jupyter.testing.catalogs import external_location

ROOT = Path(__file__).resolve().parents[2]
UCCLIENT_VERSION = "0.7.0"  # the Makefile's UCCLIENT_VERSION
UCCLIENT_PYTHON = ROOT / ".venv-ucclient" / "bin" / "python"
DRIVER = Path(__file__).with_name("official_client_driver.py")
# What the driver creates (it runs in the other venv, so nothing is imported from it).
CATALOG = "interop"
CATALOGS = ("interop", "interop_b", "interop_c")
COMMENT = "made by the official client"
SCHEMA_COMMENT = "features"
VOLUME_COMMENT = "images for training"
TABLE_CATALOG = "interop_tables"  # written here before the run: the server has no table create route yet
# Columns of every type the client's ColumnTypeName has a Delta counterpart for (nested ones too).
TABLE_ROWS = pa.table(
    {
        "id": pa.array([1], pa.int64()),
        "small": pa.array([1], pa.int16()),
        "flag": pa.array([True]),
        "score": pa.array([0.5], pa.float32()),
        "label": pa.array(["a"]),
        "blob": pa.array([b"x"]),
        "day": pa.array([0], pa.date32()),
        "at": pa.array([0], pa.timestamp("us", tz="UTC")),
        "price": pa.array([1], pa.decimal128(10, 2)),
        "tags": pa.array([["x"]], pa.list_(pa.string())),
        "point": pa.array([{"x": 1.0}]),
    }
)
OUTSIDER = "outsider"  # a principal with no grants at all
WRITER = "writer"  # holds ALL PRIVILEGES on TABLE_CATALOG.s.a, which the client's Privilege enum lacks

# step -> (the client's exception class, HTTP status, the error_codes Unity Catalog OSS may answer, and
# what the one-line message names: the object, and for a denial the principal and the privilege)
ERRORS: dict[str, tuple[str, int, set[str], str]] = {
    "get_missing_catalog": ("NotFoundException", 404, {"CATALOG_NOT_FOUND"}, "nope"),
    "create_duplicate_catalog": ("BadRequestException", 400, {"CATALOG_ALREADY_EXISTS"}, CATALOG),
    "get_missing_schema": ("NotFoundException", 404, {"SCHEMA_NOT_FOUND"}, f"{CATALOG}.nope"),
    "create_duplicate_schema": ("BadRequestException", 400, {"SCHEMA_ALREADY_EXISTS"}, f"{CATALOG}.ml"),
    "create_schema_in_missing_catalog": ("NotFoundException", 404, {"CATALOG_NOT_FOUND"}, "nope"),
    "list_catalogs_negative_max_results": ("BadRequestException", 400, {"INVALID_ARGUMENT"}, "max_results"),
    "delete_nonempty_catalog": ("BadRequestException", 400, {"FAILED_PRECONDITION"}, CATALOG),
    "get_deleted_schema": ("NotFoundException", 404, {"SCHEMA_NOT_FOUND"}, f"{CATALOG}.ml"),
    "get_deleted_catalog": ("NotFoundException", 404, {"CATALOG_NOT_FOUND"}, CATALOG),
    "get_schema_of_deleted_catalog": ("NotFoundException", 404, {"CATALOG_NOT_FOUND", "SCHEMA_NOT_FOUND"}, CATALOG),
    "other_get_catalog": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, f"{OUTSIDER} lacks USE CATALOG on"),
    "other_create_catalog": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, f"{OUTSIDER} lacks CREATE CATALOG"),
    "other_delete_catalog": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, f"{OUTSIDER} lacks"),
    "other_list_volumes": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, f"{OUTSIDER} lacks USE CATALOG on"),
    "other_get_table": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, f"{OUTSIDER} lacks USE CATALOG on"),
    "other_grants_update": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, f"{OUTSIDER} lacks"),
    "get_missing_volume": ("NotFoundException", 404, {"NOT_FOUND"}, f"{CATALOG}.raw.nope"),
    "create_duplicate_volume": ("BadRequestException", 400, {"RESOURCE_ALREADY_EXISTS"}, f"{CATALOG}.raw.images"),
    "get_deleted_volume": ("NotFoundException", 404, {"NOT_FOUND"}, f"{CATALOG}.raw.labels"),
    "get_missing_table": ("NotFoundException", 404, {"TABLE_NOT_FOUND"}, f"{TABLE_CATALOG}.s.nope"),
    "get_deleted_table": ("NotFoundException", 404, {"TABLE_NOT_FOUND"}, f"{TABLE_CATALOG}.s.b"),
    "rename_catalog": ("BadRequestException", 400, {"INVALID_ARGUMENT"}, "renaming a catalog is not supported"),
    "volume_credentials_missing_id": ("ForbiddenException", 403, {"PERMISSION_DENIED"}, "no credentials for volume id"),
    "volume_credentials_unknown_operation": (
        "BadRequestException",
        400,
        {"INVALID_ARGUMENT"},
        "UNKNOWN_VOLUME_OPERATION",
    ),
    "delete_credential_in_use": ("BadRequestException", 400, {"INVALID_ARGUMENT"}, "used by external location"),
    "get_deleted_credential": ("NotFoundException", 404, {"NOT_FOUND"}, "interop_cred"),
    "wrong_token": ("UnauthorizedException", 401, {"UNAUTHENTICATED"}, "token"),
    "no_token": ("UnauthorizedException", 401, {"UNAUTHENTICATED"}, "token"),
}
# Every line the driver prints, in order: a shorter run means it stopped early.
STEPS = (
    "client",
    "create_catalog",
    "create_catalog_b",
    "create_catalog_c",
    "get_catalog",
    "list_catalogs",
    "list_catalogs_max_results_zero",
    "list_catalogs_paged",
    "create_schema",
    "create_schema_b",
    "get_schema",
    "list_schemas",
    "list_schemas_paged",
    "create_volume",
    "create_volume_b",
    "create_external_volume",
    "get_volume",
    "list_volumes",
    "list_volumes_paged",
    "get_missing_volume",
    "create_duplicate_volume",
    "delete_volume",
    "get_deleted_volume",
    "get_table",
    "list_tables",
    "list_tables_paged",
    "get_missing_table",
    "create_table",
    "delete_table",
    "get_deleted_table",
    "update_catalog",
    "get_updated_catalog",
    "update_schema",
    "update_volume",
    "rename_catalog",
    "create_staging_table",
    "staging_table_credentials",
    "create_managed_table",
    "get_managed_table",
    "delete_managed_table",
    "create_credential",
    "get_credential",
    "list_credentials",
    "create_external_location",
    "get_external_location",
    "list_external_locations",
    "volume_credentials",
    "table_credentials",
    "path_credentials",
    "volume_credentials_missing_id",
    "volume_credentials_unknown_operation",
    "delete_credential_in_use",
    "delete_external_location",
    "delete_credential",
    "get_deleted_credential",
    "other_list_catalogs",
    "other_get_catalog",
    "other_create_catalog",
    "other_delete_catalog",
    "other_list_volumes",
    "other_get_table",
    "grants_update_add",
    "grants_get",
    "grants_get_principal",
    "grants_get_other_principal",
    "other_grants_update",
    "grants_update_remove",
    "grants_get_after_remove",
    "grants_get_unrepresentable",
    "get_missing_catalog",
    "create_duplicate_catalog",
    "get_missing_schema",
    "create_duplicate_schema",
    "create_schema_in_missing_catalog",
    "list_catalogs_negative_max_results",
    "delete_nonempty_catalog",
    "delete_schema",
    "get_deleted_schema",
    "delete_catalog_force",
    "get_deleted_catalog",
    "get_schema_of_deleted_catalog",
    "delete_catalog_b",
    "delete_catalog_c",
    "list_catalogs_after",
    "wrong_token",
    "no_token",
)


@pytest.fixture(scope="module")
def ucclient_python() -> Path:
    """The official client's venv's Python; the test fails (it does not skip) when it is missing."""
    if not UCCLIENT_PYTHON.is_file():
        pytest.fail(
            f"{UCCLIENT_PYTHON.parent.parent.name} is missing: run `make ucclient` (or `make test`, which builds it)",
            pytrace=False,
        )
    return UCCLIENT_PYTHON


@dataclass(frozen=True)
class Run:
    """The driver's lines by step, and the epoch-ms window it ran in (every created_at falls in it)."""

    steps: dict[str, dict[str, Any]]
    window: tuple[int, int]
    volume_url: str  # where the external volume went, as the server spells storage URLs


@pytest.fixture(scope="module")
def run(ucclient_python: Path, server: Served, tmp_path_factory: pytest.TempPathFactory) -> Run:
    """The driver's scenario, run once against the module's server (conftest.py) with the official
    client's venv (checked first: no server starts for a run that cannot happen), the admin's token and
    an outsider's. The tables it reads are written first, as the admin, on the server's home, and the
    one it registers inside an external location."""
    outside = tmp_path_factory.mktemp("external_tables")
    write_deltalake(str(outside / "c"), TABLE_ROWS)
    (outside / "v").mkdir()
    with as_principal(ADMIN):
        server.catalog.create_catalog(TABLE_CATALOG)
        server.catalog.create_schema(f"{TABLE_CATALOG}.s")
        for name in ("a", "b"):
            server.catalog.create_table(f"{TABLE_CATALOG}.s.{name}", TABLE_ROWS)
        external_location(server.catalog, str(outside))
        server.catalog.grant(f"{TABLE_CATALOG}.s.a", "ALL PRIVILEGES", server.principal(WRITER))
    env = {
        "PATH": os.environ.get("PATH", ""),
        "UC_TOKEN": server.admin_token,
        "UC_OTHER_TOKEN": server.token(OUTSIDER),
        "UC_TABLE_URL": (outside / "c").as_uri(),
        "UC_VOLUME_URL": (outside / "v").as_uri(),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    start = int(time.time() * 1000)
    command = [str(ucclient_python), str(DRIVER), server.url]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=240, check=False)
    window = (start, int(time.time() * 1000))
    assert done.returncode == 0, done.stderr.strip()[-2000:]
    results = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["step"] for r in results] == list(STEPS), done.stderr.strip()[-2000:]
    steps = {r["step"]: r for r in results}
    assert steps["client"]["value"] == UCCLIENT_VERSION, "rebuild it: make ucclient"
    return Run(steps, window, resolve_location(env["UC_VOLUME_URL"]))


def _ok(result: dict[str, Any], model: str) -> dict[str, Any]:
    assert result["ok"], f"{result['step']}: the client raised {result['exception']}: {result.get('message')}"
    assert result["type"] == model, result
    value: dict[str, Any] = result["value"]
    return value


def _check_times_and_owner(info: dict[str, Any], id_field: str, window: tuple[int, int]) -> None:
    """The fields UC OSS fills on every object: ids, owners and times as integer epoch milliseconds."""
    assert isinstance(info.get(id_field), str) and info[id_field], info
    assert info.get("owner") == ADMIN, info
    for field in ("created_at", "updated_at"):
        at = info.get(field)
        assert type(at) is int and window[0] <= at <= window[1], f"{field}={at!r} not epoch ms in {window}"
    if "created_by" in info:
        assert info["created_by"] == ADMIN, info


def _names_of_pages(result: dict[str, Any], listed: list[str]) -> None:
    """Pages of one follow their tokens to the same names, in the same order, as one unpaged list."""
    pages = _ok(result, "dict")["pages"]
    assert all(len(page["names"]) <= 1 for page in pages), pages
    assert [name for page in pages for name in page["names"]] == listed, pages
    assert all(page["next_page_token"] for page in pages[:-1]) and not pages[-1]["next_page_token"], pages


def test_catalogs_round_trip_through_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    created = _ok(steps["create_catalog"], "CatalogInfo")
    assert (created["name"], created.get("comment")) == (CATALOG, COMMENT)
    _check_times_and_owner(created, "id", run.window)
    ids = {created["id"]}
    for step, name in (("create_catalog_b", "interop_b"), ("create_catalog_c", "interop_c")):
        other = _ok(steps[step], "CatalogInfo")
        assert (other["name"], other.get("comment")) == (name, None)
        _check_times_and_owner(other, "id", run.window)
        ids.add(other["id"])
    assert len(ids) == len(CATALOGS)
    assert _ok(steps["get_catalog"], "CatalogInfo") == created

    listing = _ok(steps["list_catalogs"], "ListCatalogsResponse")
    names = [c["name"] for c in listing["catalogs"]]
    assert names == sorted(names) and set(CATALOGS) <= set(names), names
    assert next(c for c in listing["catalogs"] if c["name"] == CATALOG) == created
    assert "next_page_token" not in listing  # absent, not "", when there are no more pages
    assert _ok(steps["list_catalogs_max_results_zero"], "ListCatalogsResponse") == listing
    _names_of_pages(steps["list_catalogs_paged"], names)


def test_schemas_round_trip_through_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    schema = _ok(steps["create_schema"], "SchemaInfo")
    assert (schema["name"], schema["catalog_name"], schema["full_name"]) == ("ml", CATALOG, f"{CATALOG}.ml")
    assert schema.get("comment") == SCHEMA_COMMENT
    _check_times_and_owner(schema, "schema_id", run.window)
    raw = _ok(steps["create_schema_b"], "SchemaInfo")
    assert (raw["full_name"], raw.get("comment")) == (f"{CATALOG}.raw", None)
    _check_times_and_owner(raw, "schema_id", run.window)
    assert raw["schema_id"] != schema["schema_id"]
    assert _ok(steps["get_schema"], "SchemaInfo") == schema

    schemas = _ok(steps["list_schemas"], "ListSchemasResponse")
    assert [s["full_name"] for s in schemas["schemas"]] == [f"{CATALOG}.ml", f"{CATALOG}.raw"]
    assert schemas["schemas"] == [schema, raw] and "next_page_token" not in schemas
    _names_of_pages(steps["list_schemas_paged"], ["ml", "raw"])


def test_a_principal_without_grants_lists_none_of_the_catalogs(run: Run) -> None:
    listing = _ok(run.steps["other_list_catalogs"], "ListCatalogsResponse")
    assert not set(CATALOGS) & {c["name"] for c in listing.get("catalogs", [])}, listing


def test_deletes_answer_an_empty_json_object_and_the_objects_are_gone(run: Run) -> None:
    for step in ("delete_schema", "delete_catalog_force", "delete_catalog_b", "delete_catalog_c"):
        assert _ok(run.steps[step], "dict") == {}, step  # the body `{}` as application/json, like UC OSS
    after = _ok(run.steps["list_catalogs_after"], "ListCatalogsResponse")
    assert not set(CATALOGS) & {c["name"] for c in after.get("catalogs", [])}, after


def test_volumes_round_trip_through_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    images = _ok(steps["create_volume"], "VolumeInfo")
    assert {k: images.get(k) for k in ("catalog_name", "schema_name", "name", "full_name", "comment")} == {
        "catalog_name": CATALOG,
        "schema_name": "raw",
        "name": "images",
        "full_name": f"{CATALOG}.raw.images",
        "comment": VOLUME_COMMENT,
    }
    assert images["volume_type"] == "MANAGED" and images["storage_location"].startswith("file://")
    _check_times_and_owner(images, "volume_id", run.window)
    labels = _ok(steps["create_volume_b"], "VolumeInfo")
    assert labels.get("comment") is None and labels["volume_id"] != images["volume_id"]
    _check_times_and_owner(labels, "volume_id", run.window)
    shared = _ok(steps["create_external_volume"], "VolumeInfo")
    assert (shared["volume_type"], shared["storage_location"]) == ("EXTERNAL", run.volume_url)
    _check_times_and_owner(shared, "volume_id", run.window)
    assert _ok(steps["get_volume"], "VolumeInfo") == images
    listing = _ok(steps["list_volumes"], "ListVolumesResponseContent")
    assert listing["volumes"] == [images, labels, shared] and "next_page_token" not in listing
    _names_of_pages(steps["list_volumes_paged"], ["images", "labels", "shared"])
    assert _ok(steps["delete_volume"], "dict") == {}


def test_tables_and_their_columns_parse_in_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    table = _ok(steps["get_table"], "TableInfo")
    assert {k: table.get(k) for k in ("name", "catalog_name", "schema_name", "table_type", "data_source_format")} == {
        "name": "a",
        "catalog_name": TABLE_CATALOG,
        "schema_name": "s",
        "table_type": "MANAGED",
        "data_source_format": "DELTA",
    }
    _check_times_and_owner(table, "table_id", (0, run.window[1]))  # written before the run
    columns = table["columns"]
    assert [c["name"] for c in columns] == TABLE_ROWS.column_names
    assert [c["position"] for c in columns] == list(range(len(columns)))
    assert [c.get("type_name") for c in columns] == [
        *("LONG", "SHORT", "BOOLEAN", "FLOAT", "STRING", "BINARY", "DATE", "TIMESTAMP", "DECIMAL"),
        *("ARRAY", "STRUCT"),
    ]
    price = columns[TABLE_ROWS.column_names.index("price")]
    assert (price["type_precision"], price["type_scale"]) == (10, 2)
    listing = _ok(steps["list_tables"], "ListTablesResponse")
    assert [t["name"] for t in listing["tables"]] == ["a", "b"] and listing["tables"][0] == table
    _names_of_pages(steps["list_tables_paged"], ["a", "b"])
    registered = _ok(steps["create_table"], "TableInfo")
    assert (registered["name"], registered["table_type"], registered.get("comment")) == (
        "c",
        "EXTERNAL",
        "registered by the official client",
    )
    assert registered["storage_location"].endswith("/c") and registered["columns"] == columns  # the Delta log's
    _check_times_and_owner(registered, "table_id", run.window)
    assert _ok(steps["delete_table"], "dict") == {}


def test_permissions_parse_in_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    granted = {"privilege_assignments": [{"principal": OUTSIDER, "privileges": ["READ VOLUME"]}]}
    # The extension field uc_jupyter_privileges is not in the client's model: to_dict() leaves it out.
    assert _ok(steps["grants_update_add"], "PermissionsList") == granted
    assert _ok(steps["grants_get"], "PermissionsList") == granted
    assert _ok(steps["grants_get_principal"], "PermissionsList") == granted
    assert _ok(steps["grants_get_other_principal"], "PermissionsList") == {"privilege_assignments": []}
    assert _ok(steps["grants_update_remove"], "PermissionsList") == {"privilege_assignments": []}
    assert _ok(steps["grants_get_after_remove"], "PermissionsList") == {"privilege_assignments": []}
    # Listed, with the privilege the client cannot parse left out of privileges (our client reads it
    # from uc_jupyter_privileges): one unknown enum value would have failed the whole response.
    unrepresentable = _ok(steps["grants_get_unrepresentable"], "PermissionsList")
    assert unrepresentable == {"privilege_assignments": [{"principal": WRITER, "privileges": []}]}


@pytest.mark.parametrize("step", sorted(ERRORS))
def test_errors_surface_as_the_official_clients_exceptions_with_uc_codes(run: Run, step: str) -> None:
    exception, status, codes, named = ERRORS[step]
    result = run.steps[step]
    assert not result["ok"], f"expected {exception}, the client returned {result['value']}"
    got = (result["exception"], result["status"], result.get("error_code"))
    assert got[:2] == (exception, status) and got[2] in codes, f"{got}: {result.get('message') or result}"
    message = result["message"]
    assert isinstance(message, str) and named in message and "\n" not in message, repr(message)


UPDATED_COMMENT = "updated by the official client"


def test_updates_parse_in_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    created = _ok(steps["create_catalog"], "CatalogInfo")
    updated = _ok(steps["update_catalog"], "CatalogInfo")
    assert updated["comment"] == UPDATED_COMMENT
    assert {k: updated[k] for k in ("id", "created_at", "created_by", "owner")} == {
        k: created[k] for k in ("id", "created_at", "created_by", "owner")
    }
    assert updated["updated_at"] >= created["updated_at"] and updated["updated_by"] == ADMIN
    _check_times_and_owner(updated, "id", run.window)
    assert _ok(steps["get_updated_catalog"], "CatalogInfo") == updated
    schema = _ok(steps["update_schema"], "SchemaInfo")
    assert (schema["full_name"], schema["comment"]) == (f"{CATALOG}.ml", UPDATED_COMMENT)
    assert schema["schema_id"] == _ok(steps["create_schema"], "SchemaInfo")["schema_id"]
    volume = _ok(steps["update_volume"], "VolumeInfo")
    assert (volume["full_name"], volume["comment"]) == (f"{CATALOG}.raw.images", UPDATED_COMMENT)


def test_a_managed_table_is_made_through_a_staging_table_with_the_official_client(run: Run) -> None:
    steps = run.steps
    staged = _ok(steps["create_staging_table"], "StagingTableInfo")
    assert (staged["name"], staged["catalog_name"], staged["schema_name"]) == ("m", TABLE_CATALOG, "s")
    vended = _ok(steps["staging_table_credentials"], "TemporaryCredentials")
    assert vended["url"] == staged["staging_location"] and "aws_temp_credentials" not in vended  # file://
    table = _ok(steps["create_managed_table"], "TableInfo")
    assert (table["table_type"], table["table_id"], table["storage_location"]) == (
        "MANAGED",
        staged["id"],
        staged["staging_location"],
    )
    assert [(c["name"], c.get("type_name")) for c in table["columns"]] == [("id", "LONG")]  # the Delta log's
    _check_times_and_owner(table, "table_id", run.window)
    assert _ok(steps["get_managed_table"], "TableInfo") == table
    assert _ok(steps["delete_managed_table"], "dict") == {}


CREDENTIAL, LOCATION = "interop_cred", "interop_loc"  # the driver's names
ROLE_ARN = "arn:aws:iam::123456789012:role/interop"


def test_credentials_and_external_locations_parse_in_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    credential = _ok(steps["create_credential"], "CredentialInfo")
    assert {k: credential.get(k) for k in ("name", "full_name", "purpose", "comment", "aws_iam_role")} == {
        "name": CREDENTIAL,
        "full_name": CREDENTIAL,
        "purpose": "STORAGE",
        "comment": COMMENT,
        "aws_iam_role": {"role_arn": ROLE_ARN},
    }
    _check_times_and_owner(credential, "id", run.window)
    assert _ok(steps["get_credential"], "CredentialInfo") == credential
    assert credential in _ok(steps["list_credentials"], "ListCredentialsResponse")["credentials"]
    location = _ok(steps["create_external_location"], "ExternalLocationInfo")
    assert (location["name"], location["credential_name"], location["credential_id"]) == (
        LOCATION,
        CREDENTIAL,
        credential["id"],
    )
    assert location["url"].startswith("file:///") and location["url"].endswith("/interop_location")
    _check_times_and_owner(location, "id", run.window)
    assert _ok(steps["get_external_location"], "ExternalLocationInfo") == location
    assert location in _ok(steps["list_external_locations"], "ListExternalLocationsResponse")["external_locations"]
    assert steps["delete_external_location"]["ok"], steps["delete_external_location"]  # the client reads no body
    assert _ok(steps["delete_credential"], "dict") == {}


def test_temporary_credentials_parse_in_the_official_clients_models(run: Run) -> None:
    steps = run.steps
    volume = _ok(steps["volume_credentials"], "TemporaryCredentials")
    assert volume["url"] == run.volume_url and set(volume) == {"url", "expiration_time"}  # file://: no keys
    assert volume["expiration_time"] > run.window[1]
    table = _ok(steps["table_credentials"], "TemporaryCredentials")
    assert table["url"].startswith("file:///") and "aws_temp_credentials" not in table
    path = _ok(steps["path_credentials"], "TemporaryCredentials")
    assert path["url"].endswith("/interop_location/raw") and "aws_temp_credentials" not in path
