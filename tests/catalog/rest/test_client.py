"""RestCatalog against a real in-process ``uc-jupyter serve`` (uc_jupyter.testing.served) on 127.0.0.1,
and against a scripted HTTP server where a server other than ours must be played (paging, no extensions)."""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from tests.catalog.rest.scripted_http import Scripted, scripted_server
from uc_jupyter.catalog import (
    AlreadyExists,
    Catalog,
    CatalogError,
    InvalidName,
    NotFound,
    PermissionDenied,
    Privilege,
    SecurableKind,
    Unauthenticated,
    as_principal,
    get_catalog,
)
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.catalog.rest.vended import Vended, VendedCache
from uc_jupyter.testing.served import ADMIN, Served, serving

_names = itertools.count()
T = TypeVar("T", bound=Any)


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with scripted_server() as server:
        yield server


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("rest_home")) as running:
        yield running


@pytest.fixture
def rest(served: Served) -> Iterator[RestCatalog]:
    cat = RestCatalog(served.url, served.admin_token, token_for=served.token_for)
    yield cat
    cat.close()


@pytest.fixture
def schema(rest: RestCatalog, served: Served) -> str:
    """A fresh catalog and schema of this test's own (the server is shared by the module)."""
    name = f"c{next(_names)}"
    rest.create_catalog(name)
    rest.create_schema(f"{name}.ml")
    return f"{name}.ml"


def _principal(served: Served, name: str) -> str:
    with as_principal(ADMIN):
        try:
            served.catalog.get_principal(name)
        except NotFound:
            served.catalog.create_principal(name)
    return name


def _reader(rest: RestCatalog, served: Served, schema: str, name: str) -> str:
    """``name`` registered, with USE CATALOG and USE SCHEMA on ``schema``."""
    _principal(served, name)
    rest.grant(schema.split(".")[0], "USE CATALOG", name)
    rest.grant(schema, "USE SCHEMA", name)
    return name


def _ms(info: T) -> T:
    """``info`` with its creation time to the millisecond, as UC's wire carries it."""
    at = info.created_at  # type: ignore[attr-defined]
    return dataclasses.replace(info, created_at=at.replace(microsecond=at.microsecond // 1000 * 1000))  # type: ignore[type-var]


def test_objects_round_trip_as_the_embedded_catalog_sees_them(rest: RestCatalog, served: Served, schema: str) -> None:
    catalog = schema.split(".")[0]
    volume = rest.create_volume(f"{schema}.raw", comment="files")
    table = rest.create_table(f"{schema}.iris", pa.table({"x": [1, 2], "name": ["a", "b"]}), comment="flowers")
    with as_principal(ADMIN):
        local = served.catalog
        assert rest.get_catalog_info(catalog) == _ms(local.get_catalog_info(catalog))
        assert rest.get_schema(schema) == _ms(local.get_schema(schema))
        assert volume == rest.get_volume(f"{schema}.raw") == _ms(local.get_volume(f"{schema}.raw"))
        assert table == rest.get_table(f"{schema}.iris") == _ms(local.get_table(f"{schema}.iris"))
        assert rest.list_tables(schema) == [_ms(t) for t in local.list_tables(schema)]
        assert rest.list_volumes(schema) == [_ms(v) for v in local.list_volumes(schema)]
        assert rest.list_schemas(catalog) == [_ms(x) for x in local.list_schemas(catalog)]
        assert rest.get_volume(f"{schema}.raw").id == local.get_volume(f"{schema}.raw").id is not None
    assert table.table_type == "MANAGED" and [(c.name, c.type_text) for c in table.columns] == [
        ("x", "long"),
        ("name", "string"),
    ]
    assert rest.current_principal() == ADMIN
    assert isinstance(rest, Catalog)


def test_managed_table_append_overwrite_and_read_back(rest: RestCatalog, schema: str) -> None:
    name = f"{schema}.t"
    rest.create_table(name, pa.table({"x": [1, 2]}))
    with pytest.raises(AlreadyExists, match="already exists; write with mode"):
        rest.create_table(name, pa.table({"x": [3]}))
    rest.create_table(name, pa.table({"x": [3]}), mode="append")
    resolved = rest.resolve_table(name)
    assert sorted(DeltaTable(resolved.storage_location).to_pyarrow_table()["x"].to_pylist()) == [1, 2, 3]
    changed = rest.create_table(name, pa.table({"z": ["new"]}), mode="overwrite")
    assert (
        [(c.name, c.type_text) for c in changed.columns]
        == [("z", "string")]
        == [(c.name, c.type_text) for c in rest.get_table(name).columns]
    )
    assert DeltaTable(rest.resolve_table(name).storage_location).to_pyarrow_table()["z"].to_pylist() == ["new"]


def test_external_table_written_and_registered_inside_a_location(
    rest: RestCatalog, schema: str, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    lake.mkdir()
    rest.create_external_location(f"lake{next(_names)}", str(lake))
    made = rest.create_table(f"{schema}.ext", pa.table({"y": [1]}), storage_location=str(lake / "ext"))
    assert made.table_type == "EXTERNAL" and DeltaTable(str(lake / "ext")).version() == 0
    rest.drop_table(f"{schema}.ext")
    again = rest.create_table(f"{schema}.ext", storage_location=str(lake / "ext"))  # registered as it is
    assert [c.name for c in again.columns] == ["y"]
    (lake / "used").mkdir()
    (lake / "used" / "f.txt").write_text("x")
    with pytest.raises(AlreadyExists, match="is not empty"):
        rest.create_table(f"{schema}.other", pa.table({"y": [1]}), storage_location=str(lake / "used"))
    assert (lake / "used" / "f.txt").read_text() == "x"  # nothing of the caller's removed


def test_storage_options_are_never_sent_to_the_server(rest: RestCatalog, schema: str) -> None:
    with pytest.raises(ValueError, match="storage options cannot be sent to a catalog server"):
        rest.create_volume(f"{schema}.v", "s3://b/v", storage_options={"key": "AKIA"})


def test_calls_run_as_the_as_principal_with_its_own_token(rest: RestCatalog, served: Served, schema: str) -> None:
    alice = _reader(rest, served, schema, "alice")
    with rest.as_principal(alice):
        assert rest.current_principal() == alice
        assert [s.full_name for s in rest.list_schemas(schema.split(".")[0])] == [schema]
        with pytest.raises(PermissionDenied) as denied:
            rest.create_volume(f"{schema}.mine")
    assert (denied.value.principal, denied.value.privilege) == (alice, "CREATE VOLUME")
    assert rest.current_principal() == ADMIN


def test_a_principal_without_a_token_is_refused_not_run_as_the_default(rest: RestCatalog, schema: str) -> None:
    with rest.as_principal("nobody-registered"), pytest.raises(CatalogError, match="set UC_JUPYTER_TOKEN") as caught:
        rest.drop_schema(schema)
    assert "\n" not in str(caught.value)
    assert rest.get_schema(schema).full_name == schema  # nothing was done as the admin


def test_grants_on_volumes_and_privileges_the_official_enum_lacks(
    rest: RestCatalog, served: Served, schema: str
) -> None:
    bob = _principal(served, "bob")
    rest.create_volume(f"{schema}.vol")
    rest.grant(f"{schema}.vol", "WRITE VOLUME", bob)
    rest.grant(f"{schema}.vol", Privilege.READ_VOLUME, bob)
    shown = rest.show_grants(f"{schema}.vol")
    assert [(g.principal, g.privilege, g.securable_kind) for g in shown] == [
        (bob, Privilege.READ_VOLUME, SecurableKind.VOLUME),
        (bob, Privilege.WRITE_VOLUME, SecurableKind.VOLUME),
    ]
    rest.revoke(f"{schema}.vol", "write_volume", bob)
    assert [g.privilege for g in rest.show_grants(f"{schema}.vol")] == [Privilege.READ_VOLUME]
    rest.grant("metastore", "CREATE CATALOG", bob, kind="metastore")
    assert (bob, Privilege.CREATE_CATALOG) in {
        (g.principal, g.privilege) for g in rest.show_grants("metastore", kind="metastore")
    }
    with pytest.raises(NotFound, match=r"^table or volume .*\.nothing does not exist$"):
        rest.grant(f"{schema}.nothing", "SELECT", bob)
    with pytest.raises(NotFound, match="schema .*nope does not exist"):
        rest.grant(f"{schema.split('.')[0]}.nope.t", "SELECT", bob)


def test_volume_access_through_vended_credentials_and_a_revoke_mid_session(
    rest: RestCatalog, served: Served, schema: str
) -> None:
    carol = _reader(rest, served, schema, "carol")
    dave = _reader(rest, served, schema, "dave")
    rest.create_volume(f"{schema}.files")
    rest.grant(f"{schema}.files", "READ VOLUME", carol)
    written = rest.resolve_volume_path(f"/Volumes/{schema.replace('.', '/')}/files/a.txt", write=True)
    written.fs.pipe_file(written.path, b"hello")
    path = f"/Volumes/{schema.replace('.', '/')}/files/a.txt"
    with rest.as_principal(carol):
        resolved = rest.resolve_volume_path(path)
        assert resolved.fs.cat_file(resolved.path) == b"hello"
        with pytest.raises(PermissionDenied, match="WRITE VOLUME"):
            rest.resolve_volume_path(path, write=True)
    with rest.as_principal(dave), pytest.raises(PermissionDenied, match="dave lacks READ VOLUME"):
        rest.resolve_volume_path(path)  # right after carol's answer: never served from carol's
    rest.revoke(f"{schema}.files", "READ VOLUME", carol)
    with rest.as_principal(carol), pytest.raises(PermissionDenied, match="carol lacks READ VOLUME"):
        rest.resolve_volume_path(path)


def test_volume_paths_that_escape_are_refused_before_any_request(rest: RestCatalog, schema: str) -> None:
    root = f"/Volumes/{schema.replace('.', '/')}"
    for bad in (f"{root}/v/../../other/v", f"{root}/v/%2e%2e/x\x00", "/etc/passwd", f"{root}"):
        with pytest.raises(InvalidName):
            rest.resolve_volume_path(bad)
    with pytest.raises(ValueError, match="forward slash"):
        rest.get_table(f"{schema}.`a/b`")
    with pytest.raises(ValueError, match="period"):
        rest.get_schema("`x.y`.ml")


def test_a_symlink_out_of_a_local_volume_is_refused(rest: RestCatalog, schema: str, tmp_path: Path) -> None:
    from uc_jupyter.catalog.embedded.local import EscapesVolume

    volume = rest.create_volume(f"{schema}.links")
    secret = tmp_path / "secret"
    secret.mkdir()
    (Path(volume.storage_location.removeprefix("file://")) / "out").symlink_to(secret)
    with pytest.raises(EscapesVolume, match="leads outside volume"):
        rest.resolve_volume_path(f"{volume.path}/out/x")


def test_storage_paths_through_path_credentials(rest: RestCatalog, served: Served, tmp_path: Path) -> None:
    area = tmp_path / "area"
    (area / "raw").mkdir(parents=True)
    (area / "raw" / "a.csv").write_text("x\n1\n")
    name = f"area{next(_names)}"
    rest.create_external_location(name, str(area))
    resolved = rest.resolve_storage_path(str(area / "raw" / "a.csv"))
    assert resolved.location.name == name and resolved.fs.cat_file(resolved.path) == b"x\n1\n"
    erin = _principal(served, "erin")
    with rest.as_principal(erin), pytest.raises(PermissionDenied, match="READ FILES"):
        rest.resolve_storage_path(str(area / "raw" / "a.csv"))


def test_principals_updates_and_drops(rest: RestCatalog, schema: str) -> None:
    made = rest.create_principal("svc-etl", "service_principal")
    assert made.kind == "service_principal" and not made.admin
    assert "svc-etl" in {p.name for p in rest.list_principals()}
    with pytest.raises(AlreadyExists):
        rest.create_principal("svc-etl")
    assert rest.update_schema(schema, comment="features", owner="svc-etl").owner == "svc-etl"
    assert rest.get_schema(schema).comment == "features"
    rest.drop_principal("svc-etl")
    with pytest.raises(NotFound):
        rest.drop_principal("svc-etl")
    rest.drop_catalog(schema.split(".")[0], cascade=True)
    with pytest.raises(NotFound, match="does not exist"):
        rest.get_schema(schema)


def test_a_revoked_token_is_unauthenticated_at_the_next_call(served: Served, schema: str) -> None:
    _principal(served, "frank")
    with as_principal(ADMIN):
        info, token = served.store.create("frank")
    cat = RestCatalog(served.url, token)
    assert cat.current_principal() == "frank"
    with as_principal(ADMIN):
        served.store.revoke(info.id)
    with pytest.raises(Unauthenticated):
        cat.list_catalogs()


def test_listings_follow_every_page_token(scripted: Scripted) -> None:
    page = {"name": "c", "owner": "o", "created_at": 0}
    scripted.script = [
        (200, {"catalogs": [{**page, "name": "a"}], "next_page_token": "t1"}, {}),
        (200, {"catalogs": [], "next_page_token": "t2"}, {}),  # an empty page with more to come
        (200, {"catalogs": [{**page, "name": "b"}]}, {}),
    ]
    cat = RestCatalog(scripted.url, "ucj_x")
    cat._whoami = lambda: "me"  # type: ignore[method-assign]  # not uc-jupyter serve: no whoami to ask
    assert [c.name for c in cat.list_catalogs()] == ["a", "b"]
    assert [s["path"] for s in scripted.seen] == [
        "/api/2.1/unity-catalog/catalogs",
        "/api/2.1/unity-catalog/catalogs?page_token=t1",
        "/api/2.1/unity-catalog/catalogs?page_token=t2",
    ]


def test_a_repeated_page_token_is_an_error_not_a_loop(scripted: Scripted) -> None:
    scripted.script = [(200, {"catalogs": [], "next_page_token": "same"}, {})]
    cat = RestCatalog(scripted.url, "ucj_x")
    cat._whoami = lambda: "me"  # type: ignore[method-assign]
    with pytest.raises(CatalogError, match="repeated a page token"):
        cat.list_catalogs()


def test_a_server_without_our_extensions(scripted: Scripted, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UC_JUPYTER_PRINCIPAL", "label-only")
    scripted.script = [(404, {"error_code": "NOT_FOUND", "message": "no such route"}, {})]
    cat = RestCatalog(scripted.url, "ucj_x")
    assert cat.current_principal() == "label-only"
    with pytest.raises(CatalogError, match="has no principals API"):
        cat.create_principal("x")


def test_vended_cache_per_token_refreshed_before_expiry() -> None:
    now = [1000.0]
    asked: list[tuple[str, str, str]] = []

    def fetch(token: str, what: str, operation: str) -> Vended:
        from uc_jupyter.catalog.rest.vended import AwsKeys

        asked.append((token, what, operation))
        return Vended("s3://b/v", now[0] + 1000, AwsKeys("AK", "S", "T"))

    cache = VendedCache(fetch, clock=lambda: now[0])
    cache.get("alice", "volume:1", "READ_VOLUME")
    cache.get("alice", "volume:1", "READ_VOLUME")
    cache.get("bob", "volume:1", "READ_VOLUME")  # another token: asked again, never alice's answer
    assert len(asked) == 2
    now[0] = 1000.0 + 899  # lifetime 1000 s: refreshed 100 s (10 %) before expiry
    cache.get("alice", "volume:1", "READ_VOLUME")
    assert len(asked) == 2
    now[0] = 1000.0 + 900
    cache.get("alice", "volume:1", "READ_VOLUME")
    assert len(asked) == 3


def test_answers_without_keys_are_not_cached() -> None:
    asked: list[str] = []

    def fetch(token: str, what: str, operation: str) -> Vended:
        asked.append(token)
        return Vended("file:///v", 10_000.0)

    cache = VendedCache(fetch, clock=lambda: 0.0)
    cache.get("t", "volume:1", "READ_VOLUME")
    cache.get("t", "volume:1", "READ_VOLUME")
    assert len(asked) == 2  # each resolve asks: the question is the privilege check


def test_get_catalog_selects_the_backend(served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(get_catalog(), LocalCatalog)
    monkeypatch.setenv("UC_JUPYTER_CATALOG_URL", served.url + "/api/2.1/unity-catalog/")
    with pytest.raises(CatalogError, match="UC_JUPYTER_TOKEN is not set"):
        get_catalog()
    monkeypatch.setenv("UC_JUPYTER_TOKEN", served.admin_token)
    chosen = get_catalog()
    assert isinstance(chosen, RestCatalog) and chosen is get_catalog()
    assert chosen.url == served.url + "/api/2.1/unity-catalog"
    assert get_catalog(token=served.token_for(_principal(served, "gina")) or "") is not chosen
    monkeypatch.delenv("UC_JUPYTER_CATALOG_URL")
    monkeypatch.setenv("DATABRICKS_HOST", "adb-1.example.net")
    with pytest.raises(CatalogError, match="DATABRICKS_TOKEN is not set"):
        get_catalog()
    monkeypatch.setenv("DATABRICKS_TOKEN", "dapi")
    databricks = get_catalog()
    assert isinstance(databricks, RestCatalog) and databricks.url == "https://adb-1.example.net/api/2.1/unity-catalog"


def test_only_metastore_admins_manage_principals(rest: RestCatalog, served: Served) -> None:
    henry = _principal(served, "henry")
    with rest.as_principal(henry):
        with pytest.raises(PermissionDenied, match="henry lacks METASTORE ADMIN"):
            rest.create_principal("mallory")
        with pytest.raises(PermissionDenied, match="henry lacks METASTORE ADMIN"):
            rest.drop_principal(ADMIN)
    assert "mallory" not in {p.name for p in rest.list_principals()}
    with pytest.raises(ValueError, match="last metastore admin"):
        rest.drop_principal(ADMIN)


def test_databricks_spellings(scripted: Scripted) -> None:
    scripted.script = [(200, {"privilege_assignments": [{"principal": "a", "privileges": ["USE_CATALOG"]}]}, {})]
    cat = RestCatalog(scripted.url, "dapi", dialect="databricks")
    cat._whoami = lambda: "me"  # type: ignore[method-assign]
    cat.grant("main", "USE CATALOG", "a")
    assert [(g.principal, g.privilege) for g in cat.show_grants("main")] == [("a", Privilege.USE_CATALOG)]
    patch = scripted.seen[0]
    assert patch["path"] == "/api/2.1/unity-catalog/permissions/CATALOG/main"
    assert b'"USE_CATALOG"' in patch["body"]


def test_errors_arrive_as_the_embedded_catalog_raises_them(
    rest: RestCatalog, served: Served, schema: str, tmp_path: Path
) -> None:
    from uc_jupyter.catalog import NoExternalLocation, NotEmpty

    with pytest.raises(NotEmpty, match="is not empty"):
        rest.drop_catalog(schema.split(".")[0])
    with pytest.raises(NoExternalLocation, match="no external location contains it") as caught:
        rest.create_volume(f"{schema}.outside", str(tmp_path / "nowhere"))
    assert caught.value.privilege == "CREATE EXTERNAL VOLUME"
    ivan = _reader(rest, served, schema, "ivan")
    rest.create_volume(f"{schema}.hidden")
    rest.create_table(f"{schema}.hidden_t", pa.table({"x": [1]}))
    with rest.as_principal(ivan):
        with pytest.raises(PermissionDenied, match=f"^ivan lacks WRITE VOLUME on {schema}.hidden$"):
            rest.resolve_volume_path(f"/Volumes/{schema.replace('.', '/')}/hidden/a", write=True)
        with pytest.raises(PermissionDenied, match=f"^ivan lacks MODIFY on {schema}.hidden_t$"):
            rest.create_table(f"{schema}.hidden_t", pa.table({"x": [2]}), mode="append")


def test_a_failed_managed_write_gives_its_staging_table_back(rest: RestCatalog, served: Served, schema: str) -> None:
    tables = served.home / "storage" / "tables"
    before = set(tables.iterdir()) if tables.exists() else set()
    bad = pa.table({"span": pa.array([pa.scalar((1, 2, 3), pa.month_day_nano_interval())])})
    with pytest.raises(CatalogError, match="writing Delta files failed"):
        rest.create_table(f"{schema}.bad", bad)
    assert set(tables.iterdir()) == before
    assert rest.list_tables(schema) == []
