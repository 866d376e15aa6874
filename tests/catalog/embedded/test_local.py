"""The catalog through its public surface: real SQLite, real Delta tables, real files.

Every test runs on both backends (the embedded catalog, and RestCatalog + a served home: see
tests/conftest.py), except those marked ``embedded_only``, which test the embedded store itself.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pytest

from uc_jupyter.catalog import (
    AlreadyExists,
    Catalog,
    CatalogError,
    InvalidName,
    NoExternalLocation,
    NotEmpty,
    NotFound,
    PermissionDenied,
    Privilege,
    SecurableKind,
    as_principal,
    current_principal,
    get_catalog,
)
from uc_jupyter.catalog.embedded.local import EscapesVolume, LocalCatalog
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.catalogs import external_location

ADMIN = "admin"
pytestmark = pytest.mark.both_backends


@pytest.fixture
def cat(home_catalog: LocalCatalog, tmp_path: Path) -> LocalCatalog:
    """The catalog with main.ml, principals alice and bob, and an external location over tmp_path."""
    catalog = home_catalog
    catalog.create_catalog("main")
    catalog.create_schema("main.ml")
    for principal in ("alice", "bob"):
        catalog.create_principal(principal)
    external_location(catalog, str(tmp_path), name="tmp")
    return catalog


def rows(n: int = 3) -> pa.Table:
    return pa.table({"x": list(range(n)), "name": [f"r{i}" for i in range(n)]})


def home() -> Path:
    """The test's home: the embedded catalog's root, and the served home on the rest backend."""
    return Path(os.environ["UC_JUPYTER_HOME"])


def managed_dirs(cat: LocalCatalog, kind: str) -> list[str]:
    folder = home() / "storage" / kind
    return sorted(os.listdir(folder)) if folder.exists() else []


# ------------------------------------------------------------------ objects


def test_created_objects_are_listed_and_described(cat: LocalCatalog) -> None:
    table = cat.create_table("main.ml.iris", rows(), comment="flowers")
    volume = cat.create_volume("main.ml.images", comment="pictures")
    assert volume.comment == "pictures"
    assert [c.name for c in cat.list_catalogs()] == ["main"]
    assert [s.full_name for s in cat.list_schemas("main")] == ["main.ml"]
    assert [t.full_name for t in cat.list_tables("main.ml")] == ["main.ml.iris"]
    assert [v.full_name for v in cat.list_volumes("main.ml")] == ["main.ml.images"]
    assert table.owner == ADMIN and table.table_type == "MANAGED" and table.comment == "flowers"
    assert [(c.name, c.type_text) for c in table.columns] == [("x", "long"), ("name", "string")]
    assert table.created_at.tzinfo is not None
    assert volume.path == "/Volumes/main/ml/images" and volume.volume_type == "MANAGED"
    assert cat.get_table("main.ml.iris") == table
    assert cat.get_volume("main.ml.images") == volume
    assert cat.get_schema("main.ml").owner == ADMIN
    assert cat.get_catalog_info("main").owner == ADMIN


def test_names_are_case_insensitive_and_stored_lower_case(cat: LocalCatalog) -> None:
    cat.create_schema("MAIN.`Feature-Store`")
    assert cat.get_schema("main.feature-store".replace("feature-store", "`FEATURE-store`")).name == "feature-store"
    with pytest.raises(AlreadyExists, match="schema main.`feature-store` already exists"):
        cat.create_schema("main.`feature-STORE`")


@pytest.mark.parametrize(
    ("create", "message"),
    [
        (lambda c: c.create_catalog("main"), "catalog main already exists"),
        (lambda c: c.create_schema("main.ml"), "schema main.ml already exists"),
        (lambda c: c.create_volume("main.ml.t"), "table main.ml.t already exists"),
        (
            lambda c: c.create_table("main.ml.t", rows()),
            "table main.ml.t already exists; write with mode 'overwrite'",
        ),
        (
            lambda c: c.create_table("main.ml.v", rows(), mode="overwrite"),
            "main.ml.v already exists as a volume",
        ),
        (lambda c: c.create_principal("alice"), "principal alice already exists"),
    ],
)
def test_existing_names_raise_already_exists(cat: LocalCatalog, create: Any, message: str) -> None:
    cat.create_table("main.ml.t", rows())
    cat.create_volume("main.ml.v")
    tables, volumes = managed_dirs(cat, "tables"), managed_dirs(cat, "volumes")
    with pytest.raises(AlreadyExists, match=message):
        create(cat)
    assert (managed_dirs(cat, "tables"), managed_dirs(cat, "volumes")) == (tables, volumes)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda c: c.get_catalog_info("mian"), "catalog mian does not exist; did you mean main?"),
        (lambda c: c.get_schema("main.ml2"), "schema main.ml2 does not exist; did you mean main.ml?"),
        (lambda c: c.get_schema("main.ml_data"), "schema main.ml_data does not exist; did you mean main.ml?"),
        (lambda c: c.get_table("main.ml_data.iris"), "schema main.ml_data does not exist; did you mean main.ml?"),
        (
            lambda c: c.get_table("main.ml.irsi"),
            "table main.ml.irsi does not exist; did you mean main.ml.iris?",
        ),
        (lambda c: c.get_table("main.nope.iris"), "schema main.nope does not exist"),
        (
            lambda c: c.get_volume("main.ml.iris"),
            r"volume main.ml.iris does not exist \(main.ml.iris is a table\)",
        ),
        (lambda c: c.create_schema("other.ml"), "catalog other does not exist"),
        (lambda c: c.create_table("main.x.t", rows()), "schema main.x does not exist"),
        (lambda c: c.drop_table("main.ml.zzz"), "table main.ml.zzz does not exist"),
        (lambda c: c.list_tables("main.zzz"), "schema main.zzz does not exist"),
        (lambda c: c.grant("main.ml.zzz", "SELECT", "alice"), "main.ml.zzz does not exist"),
        (lambda c: c.grant("main", "USE CATALOG", "carol"), "principal carol does not exist; create it"),
        (
            lambda c: c.resolve_volume_path("/Volumes/main/ml/imgs/a.png"),
            "volume main.ml.imgs does not exist",
        ),
        (lambda c: c.drop_principal("carol"), "principal carol does not exist"),
    ],
)
def test_unknown_objects_raise_not_found_naming_them(cat: LocalCatalog, call: Any, message: str) -> None:
    cat.create_table("main.ml.iris", rows())
    with pytest.raises(NotFound, match=message) as caught:
        call(cat)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("call", "bad_part"),
    [
        (lambda c: c.create_catalog("a.b"), "'a.b'"),
        (lambda c: c.create_schema("main..x"), "part 2 is empty"),
        (lambda c: c.create_table("main.ml", rows()), "expected 'catalog.schema.object'"),
        (lambda c: c.create_volume("main.ml.`has space`"), "'has space' contains a space"),
        (lambda c: c.resolve_volume_path("/Volumes/main/ml/v/../../etc"), "'..' may not climb out"),
        (lambda c: c.resolve_volume_path("/tmp/file.txt"), "must start with '/Volumes/"),
        (lambda c: c.grant("main", "USE EVERYTHING", "alice"), "unknown privilege 'USE EVERYTHING'"),
        (
            lambda c: c.grant("main.ml", "USE CATALOG", "alice"),
            "USE CATALOG cannot be granted on schema main.ml",
        ),
        (lambda c: c.create_table("main.ml.t", rows(), mode="upsert"), "invalid mode 'upsert'"),
        (lambda c: c.create_volume("main.ml.v", "relative/dir"), "must be an absolute path"),
    ],
)
def test_malformed_input_raises_value_error_naming_the_bad_part(cat: LocalCatalog, call: Any, bad_part: str) -> None:
    with pytest.raises(ValueError, match=bad_part):
        call(cat)


def test_invalid_name_is_a_value_error() -> None:
    assert issubclass(InvalidName, ValueError)


# ------------------------------------------------------------------ tables


def test_table_modes_overwrite_and_append(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.t", rows(3))
    cat.create_table("main.ml.t", rows(2), mode="append")
    assert read_arrow("main.ml.t", catalog=cat).num_rows == 5
    replaced = cat.create_table("main.ml.t", pa.table({"y": [1.5]}), mode="overwrite")
    assert [c.name for c in replaced.columns] == ["y"]
    assert read_arrow("main.ml.t", catalog=cat).to_pydict() == {"y": [1.5]}


def test_append_creates_a_missing_table_and_accepts_pandas(cat: LocalCatalog) -> None:
    info = cat.create_table("main.ml.p", pd.DataFrame({"a": [1, 2], "b": [True, False]}), mode="append")
    assert [(c.name, c.type_text) for c in info.columns] == [("a", "long"), ("b", "boolean")]
    assert read_arrow("main.ml.p", catalog=cat).num_rows == 2


def test_append_with_other_columns_fails_and_keeps_the_table(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.t", rows(3))
    with pytest.raises(ValueError, match="table main.ml.t: the data's columns do not match"):
        cat.create_table("main.ml.t", pa.table({"z": [1]}), mode="append")
    assert read_arrow("main.ml.t", catalog=cat).num_rows == 3


def test_a_failed_delta_write_leaves_no_entry_and_no_storage(cat: LocalCatalog) -> None:
    bad = pa.table({"span": pa.array([pa.scalar((1, 2, 3), pa.month_day_nano_interval())])})
    with pytest.raises(CatalogError, match=r"table main.ml.bad: writing Delta files failed") as caught:
        cat.create_table("main.ml.bad", bad)
    assert "\n" not in str(caught.value)
    assert cat.list_tables("main.ml") == []
    assert managed_dirs(cat, "tables") == []


def test_wrong_data_type_is_refused_before_anything_is_written(cat: LocalCatalog) -> None:
    with pytest.raises(TypeError, match="pyarrow Table or a pandas DataFrame, got list"):
        cat.create_table("main.ml.t", [1, 2, 3])  # type: ignore[arg-type]
    assert managed_dirs(cat, "tables") == []


def test_external_table_is_written_registered_and_kept_on_drop(cat: LocalCatalog, tmp_path: Path) -> None:
    location = tmp_path / "ext" / "events"
    info = cat.create_table("main.ml.events", rows(4), storage_location=str(location))
    assert info.table_type == "EXTERNAL" and info.storage_location == f"file://{location}"
    cat.drop_table("main.ml.events")
    assert (location / "_delta_log").is_dir()
    again = cat.create_table("main.ml.events_again", storage_location=f"file://{location}")
    assert read_arrow(again.full_name, catalog=cat).num_rows == 4


def test_external_table_needs_an_empty_location_or_an_existing_delta_table(cat: LocalCatalog, tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "keep.txt").write_text("user data")
    with pytest.raises(AlreadyExists, match="is not empty"):
        cat.create_table("main.ml.t", rows(), storage_location=str(tmp_path / "busy"))
    assert (tmp_path / "busy" / "keep.txt").read_text() == "user data"
    with pytest.raises(NotFound, match="no Delta table at"):
        cat.create_table("main.ml.t", storage_location=str(tmp_path / "busy"))


def test_storage_locations_may_not_overlap(cat: LocalCatalog, tmp_path: Path) -> None:
    cat.create_volume("main.ml.raw", str(tmp_path / "raw"))
    for location in (tmp_path / "raw", tmp_path / "raw" / "inner", tmp_path):
        with pytest.raises(AlreadyExists, match="overlaps volume main.ml.raw"):
            cat.create_volume("main.ml.other", str(location))
    with pytest.raises(NoExternalLocation, match="no external location contains it"):
        cat.create_volume("main.ml.sneaky", str(home() / "storage" / "volumes"))


# ------------------------------------------------------------------ drop


def test_drop_managed_objects_deletes_their_storage(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.t", rows())
    volume = cat.create_volume("main.ml.v")
    Path(volume.storage_location.removeprefix("file://"), "f.txt").write_text("x")
    cat.drop_table("main.ml.t")
    cat.drop_volume("main.ml.v")
    assert managed_dirs(cat, "tables") == managed_dirs(cat, "volumes") == []
    cat.create_table("main.ml.t", rows(1))  # the name is free again
    assert read_arrow("main.ml.t", catalog=cat).num_rows == 1


def test_drop_refuses_non_empty_containers_unless_cascade(cat: LocalCatalog, tmp_path: Path) -> None:
    cat.create_table("main.ml.t", rows())
    cat.create_volume("main.ml.v")
    cat.create_volume("main.ml.ext", str(tmp_path / "ext"))
    (tmp_path / "ext" / "keep.bin").write_bytes(b"1")
    cat.grant("main.ml.t", "SELECT", "alice")
    with pytest.raises(NotEmpty, match=r"schema main.ml is not empty \(1 table, 2 volumes\)"):
        cat.drop_schema("main.ml")
    with pytest.raises(NotEmpty, match="catalog main is not empty"):
        cat.drop_catalog("main")
    cat.drop_catalog("main", cascade=True)
    assert cat.list_catalogs() == []
    assert managed_dirs(cat, "tables") == managed_dirs(cat, "volumes") == []
    assert (tmp_path / "ext" / "keep.bin").exists()  # external data is never deleted
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    cat.create_table("main.ml.t", rows())
    assert cat.show_grants("main.ml.t") == []  # grants went with the dropped table


def test_only_metastore_admins_manage_principals(cat: LocalCatalog) -> None:
    assert [(p.name, p.admin) for p in cat.list_principals()] == [
        ("admin", True),
        ("alice", False),
        ("bob", False),
    ]
    with as_principal("alice"):
        with pytest.raises(PermissionDenied, match="alice lacks METASTORE ADMIN on the metastore"):
            cat.create_principal("mallory")
        with pytest.raises(PermissionDenied, match="alice lacks METASTORE ADMIN"):
            cat.drop_principal("admin")
    with pytest.raises(ValueError, match="principal admin is the last metastore admin"):
        cat.drop_principal("admin")
    cat.create_principal("etl-bot", "service_principal")
    assert ("etl-bot", "service_principal") in {(p.name, p.kind) for p in cat.list_principals()}


def test_get_principal_reads_one_principal(cat: LocalCatalog) -> None:
    assert cat.get_principal("alice") == next(p for p in cat.list_principals() if p.name == "alice")
    assert cat.get_principal("admin").admin
    with pytest.raises(NotFound, match="^principal carol does not exist$"):
        cat.get_principal("carol")


def test_drop_principal_removes_its_grants(cat: LocalCatalog) -> None:
    cat.grant("main", "USE CATALOG", "alice")
    cat.drop_principal("alice")
    assert cat.show_grants("main") == []
    assert "alice" not in {p.name for p in cat.list_principals()}


# ------------------------------------------------------------------ governance


READ_TABLE_CHAIN = [("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.t", "SELECT")]
READ_VOLUME_CHAIN = [("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.v", "READ VOLUME")]
WRITE_VOLUME_CHAIN = [("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.v", "WRITE VOLUME")]
WRITE_TABLE_CHAIN = [("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.t", "MODIFY")]


def read_table(c: Catalog) -> object:
    return read_arrow("main.ml.t", catalog=c)


def read_volume(c: Catalog) -> object:
    return c.resolve_volume_path("/Volumes/main/ml/v/a.txt")


def write_volume(c: Catalog) -> object:
    return c.resolve_volume_path("/Volumes/main/ml/v/a.txt", write=True)


def write_table(c: Catalog) -> object:
    return c.create_table("main.ml.t", rows(1), mode="append")


ACCESSES = [
    pytest.param(read_table, READ_TABLE_CHAIN, id="read-table"),
    pytest.param(write_table, WRITE_TABLE_CHAIN, id="write-table"),
    pytest.param(read_volume, READ_VOLUME_CHAIN, id="read-volume"),
    pytest.param(write_volume, WRITE_VOLUME_CHAIN, id="write-volume"),
]


@pytest.fixture
def objects(cat: LocalCatalog) -> LocalCatalog:
    cat.create_table("main.ml.t", rows())
    cat.create_volume("main.ml.v")
    return cat


@pytest.mark.parametrize(("access", "chain"), ACCESSES)
def test_each_missing_privilege_is_named(objects: LocalCatalog, access: Any, chain: list[tuple[str, str]]) -> None:
    for missing in range(len(chain)):
        for securable, privilege in chain:
            objects.revoke(securable, privilege, "alice")
        for securable, privilege in chain[:missing] + chain[missing + 1 :]:
            objects.grant(securable, privilege, "alice")
        with as_principal("alice"), pytest.raises(PermissionDenied) as caught:
            access(objects)
        securable, privilege = chain[missing]
        assert str(caught.value) == f"alice lacks {privilege} on {securable}"
        assert (caught.value.principal, caught.value.privilege) == ("alice", privilege)


@pytest.mark.parametrize(("access", "chain"), ACCESSES)
def test_granted_then_revoked(objects: LocalCatalog, access: Any, chain: list[tuple[str, str]]) -> None:
    for securable, privilege in chain:
        objects.grant(securable, privilege, "alice")
    with as_principal("alice"):
        access(objects)
    objects.revoke(*chain[-1], "alice")
    with as_principal("alice"), pytest.raises(PermissionDenied, match=f"alice lacks {chain[-1][1]}"):
        access(objects)


@pytest.mark.parametrize("level", ["main", "main.ml"])
@pytest.mark.parametrize(("access", "chain"), ACCESSES)
def test_privileges_are_inherited_downward(
    objects: LocalCatalog, access: Any, chain: list[tuple[str, str]], level: str
) -> None:
    objects.grant("main", "USE CATALOG", "alice")
    objects.grant(level, "USE SCHEMA", "alice")
    objects.grant(level, chain[-1][1], "alice")
    with as_principal("alice"):
        access(objects)
    with as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks USE CATALOG on main"):
        access(objects)


@pytest.mark.parametrize(("access", "chain"), ACCESSES)
def test_all_privileges_and_ownership_cover_everything(
    objects: LocalCatalog, access: Any, chain: list[tuple[str, str]]
) -> None:
    objects.grant("main", "ALL PRIVILEGES", "alice")
    with as_principal("alice"):
        access(objects)
    objects.create_principal("carol")
    objects.grant("metastore", "CREATE CATALOG", "carol", kind="metastore")
    with as_principal("carol"):  # owns a catalog of its own, nothing here
        objects.create_catalog("carols")
        with pytest.raises(PermissionDenied):
            access(objects)
    with as_principal(ADMIN):
        access(objects)


def test_privileges_do_not_flow_up(objects: LocalCatalog) -> None:
    objects.grant("main", "USE CATALOG", "alice")
    objects.grant("main.ml", "USE SCHEMA", "alice")
    objects.grant("main.ml.v", "READ VOLUME", "alice")
    objects.create_table("main.ml.t2", rows())
    with as_principal("alice"):
        with pytest.raises(PermissionDenied, match="alice lacks SELECT on main.ml.t"):
            objects.resolve_table("main.ml.t")
        assert [v.name for v in objects.list_volumes("main.ml")] == ["v"]
        assert objects.list_tables("main.ml") == []


@pytest.mark.parametrize(
    ("create", "privilege", "on"),
    [
        (lambda c: c.create_schema("main.new"), "CREATE SCHEMA", "main"),
        (lambda c: c.create_table("main.ml.new", rows()), "CREATE TABLE", "main.ml"),
        (lambda c: c.create_volume("main.ml.new"), "CREATE VOLUME", "main.ml"),
    ],
)
def test_creating_needs_the_create_privilege(cat: LocalCatalog, create: Any, privilege: str, on: str) -> None:
    cat.grant("main", "USE CATALOG", "alice")
    cat.grant("main", "USE SCHEMA", "alice")
    with as_principal("alice"), pytest.raises(PermissionDenied, match=f"alice lacks {privilege} on {on}"):
        create(cat)
    assert managed_dirs(cat, "tables") == managed_dirs(cat, "volumes") == []
    cat.grant(on, privilege, "alice")
    with as_principal("alice"):
        created = create(cat)
    assert created.owner == "alice"


def test_only_owners_grant_drop_and_modify_grants(objects: LocalCatalog) -> None:
    objects.grant("main", "ALL PRIVILEGES", "alice")
    with as_principal("alice"):
        with pytest.raises(PermissionDenied, match="alice lacks OWNERSHIP on main.ml.t"):
            objects.grant("main.ml.t", "SELECT", "bob")
        with pytest.raises(PermissionDenied, match="alice lacks OWNERSHIP on main.ml.t"):
            objects.drop_table("main.ml.t")
        objects.create_schema("main.alices")
        objects.grant("main.alices", "USE SCHEMA", "bob")  # owner of what she created
    assert {(g.principal, g.privilege) for g in objects.show_grants("main.alices")} == {("bob", Privilege.USE_SCHEMA)}


def test_show_grants_lists_direct_grants(objects: LocalCatalog) -> None:
    objects.grant("main.ml.t", "select", "bob")
    objects.grant("main.ml.t", "MODIFY", "alice")
    objects.grant("main.ml.t", "SELECT", "bob")  # granting twice keeps one grant
    grants = objects.show_grants("main.ml.t")
    assert [(g.principal, g.privilege.value, g.securable_kind) for g in grants] == [
        ("alice", "MODIFY", SecurableKind.TABLE),
        ("bob", "SELECT", SecurableKind.TABLE),
    ]


def test_non_owners_see_only_their_own_grants_on_what_they_may_see(objects: LocalCatalog) -> None:
    objects.grant("main", "USE CATALOG", "alice")
    objects.grant("main", "USE CATALOG", "bob")
    objects.create_catalog("hidden")
    with as_principal("alice"):
        assert [g.principal for g in objects.show_grants("main")] == ["alice"]
        with pytest.raises(PermissionDenied, match="alice lacks USE CATALOG on hidden"):
            objects.show_grants("hidden")
    assert [g.principal for g in objects.show_grants("main")] == ["alice", "bob"]


def test_lists_show_only_what_the_principal_may_see(objects: LocalCatalog) -> None:
    objects.create_catalog("hidden")
    objects.create_schema("main.private")
    objects.grant("main", "USE CATALOG", "alice")
    objects.grant("main.ml", "USE SCHEMA", "alice")
    objects.grant("main.ml.t", "SELECT", "alice")
    with as_principal("alice"):
        assert [c.name for c in objects.list_catalogs()] == ["main"]
        assert [s.name for s in objects.list_schemas("main")] == ["ml"]
        assert [t.name for t in objects.list_tables("main.ml")] == ["t"]
        assert objects.list_volumes("main.ml") == []
        with pytest.raises(PermissionDenied, match="alice lacks READ VOLUME on main.ml.v"):
            objects.get_volume("main.ml.v")
        with pytest.raises(PermissionDenied, match="alice lacks USE CATALOG on hidden"):
            objects.list_schemas("hidden")
    with as_principal("bob"):
        assert objects.list_catalogs() == []


def test_as_principal_is_scoped_to_the_block_and_the_thread(cat: LocalCatalog) -> None:
    seen: list[str] = []
    with cat.as_principal("alice"):
        assert cat.current_principal() == "alice"
        worker = threading.Thread(target=lambda: seen.append(current_principal()))
        worker.start()
        worker.join()
        with as_principal("bob"):
            assert current_principal() == "bob"
        assert current_principal() == "alice"
    assert current_principal() == ADMIN
    assert seen == [ADMIN]


def test_get_catalog_follows_uc_jupyter_home(
    isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = get_catalog()
    assert get_catalog() is first and isinstance(first, Catalog)
    monkeypatch.setenv("UC_JUPYTER_HOME", str(tmp_path / "other"))
    assert get_catalog() is not first
    assert (tmp_path / "other" / "metastore.db").exists()


# ------------------------------------------------------------------ volumes


def test_resolve_volume_path_maps_to_storage(cat: LocalCatalog) -> None:
    volume = cat.create_volume("main.ml.v")
    resolved = cat.resolve_volume_path("/Volumes/Main/ML/v/cats/./1.png", write=True)
    root = volume.storage_location.removeprefix("file://")
    assert resolved.path == f"{root}/cats/1.png"
    assert resolved.url == f"{volume.storage_location}/cats/1.png"
    assert resolved.volume_path == "/Volumes/main/ml/v/cats/1.png"
    resolved.fs.makedirs(f"{root}/cats", exist_ok=True)
    resolved.fs.pipe_file(resolved.path, b"png")
    assert Path(root, "cats", "1.png").read_bytes() == b"png"
    assert cat.resolve_volume_path("/Volumes/main/ml/v/").path == root


@pytest.mark.embedded_only("memory:// lives in one process; the server vends file:// and s3:// only")
def test_external_volume_on_another_filesystem(cat: LocalCatalog) -> None:
    external_location(cat, "memory://uc-test/bucket")
    cat.create_volume("main.ml.mem", "memory://uc-test/bucket/prefix")
    resolved = cat.resolve_volume_path("/Volumes/main/ml/mem/a/b.txt", write=True)
    resolved.fs.pipe_file(resolved.path, b"hello")
    assert resolved.url == "memory://uc-test/bucket/prefix/a/b.txt"
    assert resolved.fs.cat_file(resolved.path) == b"hello"


def test_symlinks_out_of_a_volume_are_refused(cat: LocalCatalog, tmp_path: Path) -> None:
    volume = cat.create_volume("main.ml.v", str(tmp_path / "vol"))
    root = Path(volume.storage_location.removeprefix("file://"))
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("s3cr3t")
    (root / "inside").mkdir()
    (root / "inside" / "ok.txt").write_text("fine")
    os.symlink(tmp_path / "secret", root / "escape")
    os.symlink(root / "inside", root / "alias")
    with pytest.raises(EscapesVolume, match="/Volumes/main/ml/v/escape/key leads outside volume main.ml.v"):
        cat.resolve_volume_path("/Volumes/main/ml/v/escape/key")
    with pytest.raises(EscapesVolume):
        cat.resolve_volume_path("/Volumes/main/ml/v/escape")
    alias = cat.resolve_volume_path("/Volumes/main/ml/v/alias/ok.txt")
    assert Path(alias.path).read_text() == "fine"


# ------------------------------------------------------------------ processes


def _create_schemas(home: str, prefix: str, count: int) -> None:
    os.environ["UC_JUPYTER_PRINCIPAL"] = ADMIN
    catalog = LocalCatalog(home)
    for i in range(count):
        catalog.create_schema(f"main.{prefix}_{i}")
        catalog.grant(f"main.{prefix}_{i}", "USE SCHEMA", "alice")
        catalog.create_table(f"main.{prefix}_{i}.t", rows(1))


@pytest.mark.embedded_only("processes sharing one home's SQLite metastore")
def test_two_processes_write_the_metastore_at_once(cat: LocalCatalog) -> None:
    context = multiprocessing.get_context("spawn")
    workers = [context.Process(target=_create_schemas, args=(str(cat.root), name, 12)) for name in ("p", "q")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert [w.exitcode for w in workers] == [0, 0]
    schemas = {s.name for s in cat.list_schemas("main")}
    assert schemas == {"ml"} | {f"{p}_{i}" for p in "pq" for i in range(12)}
    assert all(len(cat.show_grants(f"main.{s}")) == 1 for s in schemas - {"ml"})
    assert len(managed_dirs(cat, "tables")) == 24


def _race_create(home: str, barrier: Any, results: Any) -> None:
    os.environ["UC_JUPYTER_PRINCIPAL"] = ADMIN
    catalog = LocalCatalog(home)
    barrier.wait()
    try:
        catalog.create_table("main.ml.contended", rows(2))
        results.put("created")
    except AlreadyExists:
        results.put("exists")


@pytest.mark.embedded_only("processes racing on one home's entry locks and managed storage")
def test_racing_creators_leave_one_table_and_no_stray_storage(cat: LocalCatalog) -> None:
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(3), context.Queue()
    workers = [context.Process(target=_race_create, args=(str(cat.root), barrier, results)) for _ in range(3)]
    for w in workers:
        w.start()
    outcomes = sorted(results.get(timeout=120) for _ in workers)
    for w in workers:
        w.join(timeout=60)
    assert outcomes == ["created", "exists", "exists"]
    assert len(managed_dirs(cat, "tables")) == 1


def test_importing_the_catalog_stays_light() -> None:
    code = (
        "import sys, uc_jupyter, uc_jupyter.catalog, uc_jupyter.catalog.embedded.local, uc_jupyter.demo, "
        "uc_jupyter.tables.delta\n"
        "heavy = {'torch', 'pyspark', 'pandas', 'pyarrow', 'deltalake', 'mlflow', 'matplotlib', 'datasets'}\n"
        "print(sorted(heavy & set(sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
