"""What each principal may see through the embedded catalog, checked against the pure model's
:func:`uc_jupyter.catalog.rules.privileges.visible` over the whole tree (the rule the catalog's per-object
checks must agree with), for random grants on one real metastore."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog import NotFound, PermissionDenied, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.names import SecurableName, parse_name
from uc_jupyter.catalog.rules.privileges import (
    GRANTABLE,
    AccessFacts,
    Action,
    Grant,
    Privilege,
    SecurableKind,
    first_missing,
    requirements,
    visible,
)

ALICE, BOB = "alice", "bob"
K = SecurableKind
# name -> (kind, the principal that creates it, so owns it)
TREE: dict[str, tuple[SecurableKind, str]] = {
    "c0": (K.CATALOG, "admin"),
    "c0.s0": (K.SCHEMA, "admin"),
    "c0.s0.t": (K.TABLE, "admin"),
    "c0.s0.v": (K.VOLUME, "admin"),
    "c0.s1": (K.SCHEMA, "admin"),
    "c0.s1.v": (K.VOLUME, "admin"),
    "c0.s1.w": (K.VOLUME, BOB),
    "c1": (K.CATALOG, "admin"),
    "c1.s0": (K.SCHEMA, "admin"),
    "c1.s0.t": (K.TABLE, "admin"),
    "c1.s1": (K.SCHEMA, ALICE),
    "c1.s1.v": (K.VOLUME, ALICE),
    "c2": (K.CATALOG, "admin"),
}
OBJECTS = {parse_name(n): kind_owner for n, kind_owner in TREE.items()}
GRANTS = [
    Grant(parse_name(n), p, u)
    for n, (kind, _) in TREE.items()
    for p in sorted(GRANTABLE[kind], key=str)
    for u in (ALICE, BOB)
]
GET: dict[SecurableKind, Callable[[LocalCatalog, str], Any]] = {
    K.CATALOG: LocalCatalog.get_catalog_info,
    K.SCHEMA: LocalCatalog.get_schema,
    K.TABLE: LocalCatalog.get_table,
    K.VOLUME: LocalCatalog.get_volume,
}


def create(cat: LocalCatalog, name: str, kind: SecurableKind) -> None:
    if kind is K.CATALOG:
        cat.create_catalog(name)
    elif kind is K.SCHEMA:
        cat.create_schema(name)
    elif kind is K.TABLE:
        cat.create_table(name, pa.table({"x": [1]}))
    else:
        cat.create_volume(name)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> LocalCatalog:
    """OBJECTS in one metastore, each created by (so owned by) its principal; no grants left."""
    with as_principal("admin"):
        cat = LocalCatalog(tmp_path_factory.mktemp("visibility"))
        for principal in (ALICE, BOB):
            cat.create_principal(principal)
    helping: list[tuple[str, str, str]] = []  # what a non-admin creator needs, revoked once all are made
    for name, (kind, owner) in TREE.items():
        parsed = parse_name(name)
        if owner != "admin":
            catalog = str(parsed.lineage()[0])
            needs = [(catalog, "USE CATALOG")]
            needs += [(catalog, "CREATE SCHEMA")] if kind is K.SCHEMA else []
            needs += (
                [(str(parsed.parent), "USE SCHEMA"), (str(parsed.parent), "CREATE VOLUME")]
                if len(parsed.parts) == 3
                else []
            )
            with as_principal("admin"):
                for securable, privilege in needs:
                    cat.grant(securable, privilege, owner)
            helping += [(securable, privilege, owner) for securable, privilege in needs]
        with as_principal(owner):
            create(cat, name, kind)
    with as_principal("admin"):
        for securable, privilege, principal in helping:
            cat.revoke(securable, privilege, principal)
    return cat


def lineage_facts(name: SecurableName, grants: frozenset[Grant]) -> AccessFacts:
    levels = set(name.lineage())
    return AccessFacts(
        owners={level: OBJECTS[level][1] for level in levels},
        grants=frozenset(g for g in grants if g.securable in levels),
    )


def may_get(principal: str, name: SecurableName, seen: set[SecurableName], grants: frozenset[Grant]) -> bool:
    """What ``get_*`` allows: using the containers (USE CATALOG, USE SCHEMA), then seeing the object."""
    if name.parent is not None:
        action = Action.USE_SCHEMA if len(name.parts) == 3 else Action.USE_CATALOG
        if first_missing(principal, requirements(action, name), lineage_facts(name, grants)) is not None:
            return False
    return name in seen


def may_list(principal: str, parent: SecurableName, grants: frozenset[Grant]) -> bool:
    """What ``list_*`` in ``parent`` needs: USE CATALOG (and USE SCHEMA in a schema)."""
    action = Action.USE_SCHEMA if len(parent.parts) == 2 else Action.USE_CATALOG
    return first_missing(principal, requirements(action, parent), lineage_facts(parent, grants)) is None


def children(parent: SecurableName | None, kind: SecurableKind, seen: set[SecurableName]) -> list[str]:
    depth = 1 if parent is None else len(parent.parts) + 1
    return sorted(
        n.parts[-1]
        for n, (k, _) in OBJECTS.items()
        if k is kind and n in seen and len(n.parts) == depth and (parent is None or n.parent == parent)
    )


def check_principal(cat: LocalCatalog, principal: str, grants: frozenset[Grant]) -> None:
    objects: Mapping[SecurableName, tuple[SecurableKind, str]] = OBJECTS
    seen = visible(principal, objects, grants)
    with as_principal(principal):
        assert [c.name for c in cat.list_catalogs()] == children(None, K.CATALOG, seen)
        for name, (kind, _) in OBJECTS.items():
            try:
                GET[kind](cat, str(name))
                got = True
            except PermissionDenied:
                got = False
            assert got == may_get(principal, name, seen, grants), f"get {kind} {name}"
            if kind in (K.CATALOG, K.SCHEMA) and may_list(principal, name, grants):
                if kind is K.CATALOG:
                    assert [s.name for s in cat.list_schemas(str(name))] == children(name, K.SCHEMA, seen)
                else:
                    assert [t.name for t in cat.list_tables(str(name))] == children(name, K.TABLE, seen)
                    assert [v.name for v in cat.list_volumes(str(name))] == children(name, K.VOLUME, seen)
        # "Did you mean" names only what the principal may see.
        with pytest.raises(NotFound) as missing:
            cat.get_volume("c0.s1.ww")
        assert ("did you mean c0.s1.w?" in str(missing.value)) == (parse_name("c0.s1.w") in seen)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.frozensets(st.sampled_from(GRANTS), max_size=5))
def test_what_the_catalog_shows_matches_the_model(tree: LocalCatalog, grants: frozenset[Grant]) -> None:
    with as_principal("admin"):
        for grant in grants:
            tree.grant(str(grant.securable), grant.privilege, grant.principal)
    try:
        for principal in (ALICE, BOB):
            check_principal(tree, principal, grants)
    finally:
        with as_principal("admin"):
            for grant in grants:
                tree.revoke(str(grant.securable), grant.privilege, grant.principal)


@pytest.mark.parametrize(
    ("grants", "shown"),
    [
        # alice always sees c1: she owns c1.s1.
        pytest.param({("c0", Privilege.SELECT)}, ["c0", "c1"], id="select-on-a-catalog-with-a-table"),
        pytest.param({("c2", Privilege.SELECT)}, ["c1"], id="select-on-a-catalog-without-tables"),
        pytest.param({("c0.s1", Privilege.READ_VOLUME)}, ["c0", "c1"], id="read-volume-on-a-schema-with-volumes"),
        pytest.param({("c0", Privilege.USE_SCHEMA)}, ["c0", "c1"], id="use-schema-on-a-catalog-with-schemas"),
        pytest.param({("c2", Privilege.USE_SCHEMA)}, ["c1"], id="use-schema-on-a-catalog-without-schemas"),
    ],
)
def test_privileges_below_show_a_catalog_only_when_they_reach_something(
    tree: LocalCatalog, grants: set[tuple[str, Privilege]], shown: list[str]
) -> None:
    with as_principal("admin"):
        for name, privilege in grants:
            tree.grant(name, privilege, ALICE)
    try:
        with as_principal(ALICE):
            assert [c.name for c in tree.list_catalogs()] == shown
    finally:
        with as_principal("admin"):
            for name, privilege in grants:
                tree.revoke(name, privilege, ALICE)


def test_an_older_metastore_gets_the_new_indexes(tmp_path: Path) -> None:
    import sqlite3

    LocalCatalog(tmp_path).create_catalog("main")
    with sqlite3.connect(tmp_path / "metastore.db") as conn:
        conn.execute("DROP INDEX securables_kind_key")
        conn.execute("DROP INDEX grants_principal_securable")
    assert [c.name for c in LocalCatalog(tmp_path).list_catalogs()] == ["main"]
    with sqlite3.connect(tmp_path / "metastore.db") as conn:
        names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"securables_kind_key", "securables_owner_key", "grants_principal_securable"} <= names
