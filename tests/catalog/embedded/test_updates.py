"""Updating catalogs, schemas and volumes in place: who may, what is stamped, and that a refused
update changes nothing."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from uc_jupyter.catalog import NotFound, PermissionDenied, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.storage import urls as st


@pytest.fixture
def cat(isolated_home: Path) -> LocalCatalog:
    """main.ml with volume raw, made by admin; principals alice and bob; alice may use main and main.ml."""
    catalog = LocalCatalog(isolated_home)
    catalog.create_catalog("main", comment="first")
    catalog.create_schema("main.ml")
    catalog.create_volume("main.ml.raw")
    for principal in ("alice", "bob"):
        catalog.create_principal(principal)
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    return catalog


def test_an_update_changes_what_it_names_and_is_stamped(cat: LocalCatalog) -> None:
    before = cat.get_catalog_info("main")
    after = cat.update_catalog("main", comment="team data")
    assert (after.comment, after.owner, after.id, after.created_at) == (
        "team data",
        "admin",
        before.id,
        before.created_at,
    )
    assert after.updated_at is not None and before.updated_at is not None and after.updated_at > before.updated_at
    assert after.updated_by == "admin" and after.created_by == "admin"
    assert cat.get_catalog_info("main") == after
    assert cat.update_catalog("main", comment="").comment is None  # "" clears
    assert cat.update_volume("main.ml.raw", comment="images").comment == "images"


def test_ownership_moves_with_its_rights(cat: LocalCatalog) -> None:
    moved = cat.update_schema("main.ml", owner="alice")
    assert (moved.owner, moved.updated_by) == ("alice", "admin")
    with as_principal("alice"):  # the new owner may now change and grant on it
        assert cat.update_schema("main.ml", comment="mine").updated_by == "alice"
        cat.grant("main.ml", "USE SCHEMA", "bob")
        cat.update_schema("main.ml", owner="bob")  # and give it away
        with pytest.raises(PermissionDenied):  # after which it may not any more
            cat.update_schema("main.ml", comment="still mine?")
        with pytest.raises(PermissionDenied):
            cat.grant("main.ml", "CREATE TABLE", "alice")
    assert cat.get_schema("main.ml").comment == "mine"


@pytest.mark.parametrize(
    ("who", "allowed"),
    [("admin", True), ("alice", False), ("bob", False), ("carol-catalog-owner", True), ("dave-schema-owner", False)],
)
def test_only_owners_of_it_or_a_container_and_admins_may_update(cat: LocalCatalog, who: str, allowed: bool) -> None:
    cat.create_principal("carol-catalog-owner")
    cat.create_principal("dave-schema-owner")
    cat.create_catalog("other")
    cat.create_schema("other.s")
    cat.create_volume("other.s.v")
    cat.grant("other", "USE CATALOG", "alice")
    cat.update_catalog("other", owner="carol-catalog-owner")
    cat.update_schema("other.s", owner="dave-schema-owner")
    with as_principal(who):
        for change in (
            lambda: cat.update_catalog("other", comment="x"),
            lambda: cat.update_catalog("other", owner=who),  # an attacker making itself the owner
        ):
            if allowed:
                change()
            else:
                with pytest.raises(PermissionDenied):
                    change()
        # A schema's owner may change the schema and what it holds, never its catalog.
        if who == "dave-schema-owner":
            assert cat.update_volume("other.s.v", comment="ok").comment == "ok"
    if not allowed:
        assert (cat.get_catalog_info("other").owner, cat.get_catalog_info("other").comment) == (
            "carol-catalog-owner",
            None,
        )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({}, "nothing to update on catalog main: give a comment or an owner"),
        ({"owner": "nobody", "comment": "x"}, "cannot make nobody the owner of catalog main: no such principal"),
        ({"owner": " admin"}, "invalid principal"),  # a look-alike of a real one
    ],
)
def test_a_refused_update_changes_nothing(cat: LocalCatalog, change: dict[str, str], message: str) -> None:
    before = cat.get_catalog_info("main")
    with pytest.raises(ValueError, match=message):
        cat.update_catalog("main", **change)
    after = cat.get_catalog_info("main")
    assert (after.comment, after.owner, after.updated_at) == (before.comment, before.owner, before.updated_at)


def test_updating_a_missing_object_is_not_found_with_its_kind(cat: LocalCatalog) -> None:
    with pytest.raises(NotFound, match="schema main.nope does not exist"):
        cat.update_schema("main.nope", comment="x")
    with pytest.raises(NotFound, match=r"volume main.ml.nope does not exist"):
        cat.update_volume("main.ml.nope", comment="x")


def test_refresh_table_reads_the_columns_a_remote_writer_changed(cat: LocalCatalog) -> None:
    table = cat.create_table("main.ml.t", pa.table({"a": [1]}))
    # A client with vended credentials rewrites it with another schema, outside the catalog.
    wider = pa.table({"a": [1], "b": ["x"]})
    deltalake.write_deltalake(st.delta_uri(table.storage_location), wider, mode="overwrite", schema_mode="overwrite")
    assert [c.name for c in cat.get_table("main.ml.t").columns] == ["a"]  # the catalog does not know yet
    with as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks"):
        cat.refresh_table("main.ml.t")
    cat.grant("main.ml.t", "MODIFY", "alice")
    cat.grant("main.ml.t", "SELECT", "alice")
    with as_principal("alice"):
        refreshed = cat.refresh_table("main.ml.t")
    assert [(c.name, c.type_text) for c in refreshed.columns] == [("a", "long"), ("b", "string")]
    assert (refreshed.id, refreshed.updated_by) == (table.id, "alice")
    assert cat.get_table("main.ml.t").columns == refreshed.columns


def test_a_write_through_the_catalog_stamps_the_table(cat: LocalCatalog) -> None:
    table = cat.create_table("main.ml.w", pa.table({"a": [1]}))
    assert (table.updated_at, table.updated_by) == (table.created_at, "admin")
    cat.grant("main.ml", "USE SCHEMA", "alice")
    cat.grant("main.ml.w", "MODIFY", "alice")
    with as_principal("alice"):
        appended = cat.create_table("main.ml.w", pa.table({"a": [2]}), mode="append")
    assert (
        appended.updated_by == "alice" and appended.updated_at is not None and appended.updated_at >= table.created_at
    )
    assert (appended.created_by, appended.owner) == ("admin", "admin")
