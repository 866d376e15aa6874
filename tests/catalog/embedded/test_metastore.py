"""uc_jupyter.catalog.embedded.metastore: the embedded metastore's rows and the checks every catalog call makes."""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from pathlib import Path

import pytest

from tests.catalog.conftest import home_with_main_ml, with_principals
from uc_jupyter.catalog import AlreadyExists, NotFound, PermissionDenied, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.metastore import KIND_BY_LEVEL, LEVEL_OF
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.catalog.rules.privileges import Action, SecurableKind

K = SecurableKind


@pytest.fixture
def cat(tmp_path: Path) -> LocalCatalog:
    """main.ml with volume v, and principals alice and bob (not admins)."""
    catalog = with_principals(home_with_main_ml(tmp_path / "home"), "alice", "bob")
    catalog.create_volume("main.ml.v")
    return catalog


def query(cat: LocalCatalog, sql: str, *args: object) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(cat.root / "metastore.db")) as conn:
        return conn.execute(sql, args).fetchall()


def test_levels_and_kinds_agree() -> None:
    assert KIND_BY_LEVEL == {1: K.CATALOG, 2: K.SCHEMA}
    assert all(LEVEL_OF[kind] == level for level, kind in KIND_BY_LEVEL.items())
    assert LEVEL_OF[K.TABLE] == LEVEL_OF[K.VOLUME] == 3


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nope", "catalog nope does not exist"),
        ("nope.ml.t", "catalog nope does not exist"),  # the outermost missing level is named
        ("main.nope.t", "schema main.nope does not exist"),
        ("main.ml.nope", "table or volume main.ml.nope does not exist"),
    ],
)
def test_a_missing_row_is_not_found_naming_its_first_missing_level(cat: LocalCatalog, name: str, message: str) -> None:
    with cat._transaction() as conn, pytest.raises(NotFound, match=f"^{message}$"):
        cat._existing_row(conn, parse_name(name))


def test_a_row_of_another_kind_is_not_found_saying_what_it_is(cat: LocalCatalog) -> None:
    with cat._transaction() as conn:
        assert cat._row_of_kind(conn, parse_name("main.ml.v"), K.VOLUME)["key"] == "main.ml.v"
        with pytest.raises(NotFound, match=r"^table main\.ml\.v does not exist \(main\.ml\.v is a volume\)$"):
            cat._row_of_kind(conn, parse_name("main.ml.v"), K.TABLE)
        with pytest.raises(NotFound, match="schema main.nope does not exist"):
            cat._row_of_kind(conn, parse_name("main.nope.v"), K.VOLUME)


def test_a_close_name_is_suggested_to_who_may_see_it(cat: LocalCatalog) -> None:
    with cat._transaction() as conn:
        assert cat._suggestion(conn, parse_name("main.ml.vv")) == "; did you mean main.ml.v?"
        assert cat._suggestion(conn, parse_name("mian")) == "; did you mean main?"
        assert cat._suggestion(conn, parse_name("zzzzzz")) == ""
    with as_principal("alice"), cat._transaction() as conn:
        assert cat._suggestion(conn, parse_name("mian")) == ""  # main is not hers to see, nor to learn of


def test_an_insert_is_owned_by_the_caller_and_gets_a_fresh_id(cat: LocalCatalog) -> None:
    with cat._transaction(write=True) as conn:
        first = cat._insert(conn, parse_name("one"), K.CATALOG, comment="c")
        given = cat._insert(conn, parse_name("two"), K.CATALOG, given_id="staging-id")
    assert uuid.UUID(first).version == 4 and given == "staging-id"
    assert query(cat, "SELECT key, owner, created_by, id, comment FROM securables WHERE key IN ('one', 'two')") == [
        ("one", "admin", "admin", first, "c"),
        ("two", "admin", "admin", "staging-id", None),
    ]


def test_an_insert_registers_an_unknown_owner_as_a_plain_user(cat: LocalCatalog) -> None:
    with as_principal("newcomer"), cat._transaction(write=True) as conn:
        cat._insert(conn, parse_name("theirs"), K.CATALOG)
    principal = cat.get_principal("newcomer")
    assert (principal.kind, principal.admin) == ("user", False)
    assert query(cat, "SELECT owner FROM securables WHERE key = 'theirs'") == [("newcomer",)]


def test_an_insert_takes_over_its_pending_storage_and_secret_records(cat: LocalCatalog) -> None:
    location = cat._new_managed_location("tables")
    with cat._transaction(write=True) as conn:
        cat._record_secret(conn, "id-new")
        cat._record_pending(conn, "file:///elsewhere")  # another create's record stays
        cat._insert(conn, parse_name("main.ml.t"), K.TABLE, storage_location=location, managed=True, given_id="id-new")
    assert query(cat, "SELECT location FROM pending_storage") == [("file:///elsewhere",)]
    assert query(cat, "SELECT id FROM pending_secrets") == []


def test_an_insert_refuses_a_taken_name_and_a_missing_parent(cat: LocalCatalog) -> None:
    with cat._transaction(write=True) as conn:
        with pytest.raises(AlreadyExists, match="^volume main.ml.v already exists$"):
            cat._insert(conn, parse_name("MAIN.ML.V"), K.TABLE)
        with pytest.raises(NotFound, match="schema main.nope does not exist"):
            cat._insert(conn, parse_name("main.nope.t"), K.TABLE)


def test_require_says_not_found_before_permission_and_names_the_missing_privilege(cat: LocalCatalog) -> None:
    with as_principal("alice"), cat._transaction() as conn:
        with pytest.raises(PermissionDenied, match="^alice lacks USE CATALOG on main$"):
            cat._require(conn, Action.READ_VOLUME, parse_name("main.ml.v"))
        with pytest.raises(NotFound):
            cat._require(conn, Action.READ_VOLUME, parse_name("main.ml.gone"))
    cat.grant("main", "USE CATALOG", "alice")
    cat.grant("main.ml", "USE SCHEMA", "alice")
    with (
        as_principal("alice"),
        cat._transaction() as conn,
        pytest.raises(PermissionDenied, match="^alice lacks READ VOLUME on main.ml.v$"),
    ):
        cat._require(conn, Action.READ_VOLUME, parse_name("main.ml.v"))
    cat.grant("main.ml.v", "READ VOLUME", "alice")
    with as_principal("alice"), cat._transaction() as conn:
        cat._require(conn, Action.READ_VOLUME, parse_name("main.ml.v"))


def test_only_the_metastores_first_principal_is_admin(cat: LocalCatalog) -> None:
    with cat._transaction() as conn:
        assert cat._is_admin(conn, "admin")
        assert not cat._is_admin(conn, "alice")
        assert not cat._is_admin(conn, "nobody")
        cat._require_admin(conn)
    with (
        as_principal("alice"),
        cat._transaction() as conn,
        pytest.raises(PermissionDenied, match="^alice lacks METASTORE ADMIN on the metastore$"),
    ):
        cat._require_admin(conn)


# Catalogs whose names begin like "a": the key range below "a" must hold none of their objects.
LOOK_ALIKES = ["a-b", "a_b", "ab", "a0"]


@pytest.fixture
def look_alikes(cat: LocalCatalog) -> LocalCatalog:
    """Catalog "a" (the admin's, nothing of alice's in it) and catalogs named like it, with alice
    owning a schema in each and holding SELECT on a table in each."""
    cat.create_catalog("a")
    cat.create_schema("a.s")
    for name in LOOK_ALIKES:
        cat.create_catalog(f"`{name}`")
        cat.create_schema(f"`{name}`.s")
        cat.create_volume(f"`{name}`.s.v")
        cat.update_schema(f"`{name}`.s", owner="alice")
        cat.grant(f"`{name}`.s.v", "READ VOLUME", "alice")
    return cat


def test_what_lies_under_a_look_alike_name_never_shows_another_catalog(look_alikes: LocalCatalog) -> None:
    with as_principal("alice"):
        assert sorted(c.name for c in look_alikes.list_catalogs()) == sorted(LOOK_ALIKES)
        with look_alikes._transaction() as conn:
            assert not look_alikes._is_visible(conn, parse_name("a"), K.CATALOG)
            assert not look_alikes._is_visible(conn, parse_name("a.s"), K.SCHEMA)
            with pytest.raises(PermissionDenied, match="^alice lacks USE CATALOG on a$"):
                look_alikes._require_visible(conn, parse_name("a"), K.CATALOG)
            subtree = look_alikes._subtree(
                conn, parse_name("a"), "alice", look_alikes._facts(conn, parse_name("a"), "alice")
            )
            assert not subtree.owned and not subtree.grants


def test_the_indexed_checks_agree_with_the_full_scan(look_alikes: LocalCatalog) -> None:
    rows = query(look_alikes, "SELECT key, kind FROM securables")
    for principal in ("admin", "alice", "bob"):
        with as_principal(principal), look_alikes._transaction() as conn:
            one_by_one = {k for k, kind in rows if look_alikes._is_visible(conn, parse_name(str(k)), K(kind))}
            assert one_by_one == look_alikes._visible_keys(conn), principal


def test_visible_children_are_those_the_caller_may_see(look_alikes: LocalCatalog) -> None:
    with as_principal("alice"), look_alikes._transaction() as conn:
        catalogs = conn.execute("SELECT key, kind, owner FROM securables WHERE parent IS NULL").fetchall()
        assert look_alikes._visible_children(conn, None, catalogs) == set(LOOK_ALIKES)
        inside = conn.execute("SELECT key, kind, owner FROM securables WHERE parent = 'ab'").fetchall()
        assert look_alikes._visible_children(conn, parse_name("ab"), inside) == {"ab.s"}
