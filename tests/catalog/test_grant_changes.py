"""Several grants and revokes on one securable as one transaction (LocalCatalog.change_grants): all
are checked before any is written, so a refused change leaves every grant as it was."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.catalog import NotFound, PermissionDenied, as_principal
from uc_jupyter.catalog.embedded.grants import GrantChange
from uc_jupyter.catalog.embedded.local import LocalCatalog


@pytest.fixture
def cat(isolated_home: Path) -> LocalCatalog:
    catalog = LocalCatalog(isolated_home)
    catalog.create_catalog("main")
    for principal in ("alice", "bob"):
        catalog.create_principal(principal)
    catalog.grant("main", "USE CATALOG", "bob")
    return catalog


def _grants(cat: LocalCatalog, securable: str = "main", kind: str | None = None) -> set[tuple[str, str]]:
    return {(g.principal, g.privilege.value) for g in cat.show_grants(securable, kind=kind)}


def test_changes_apply_together_removals_first(cat: LocalCatalog) -> None:
    cat.change_grants(
        "main",
        [
            GrantChange("alice", add=["USE CATALOG", "CREATE SCHEMA"]),
            GrantChange("bob", add=["USE CATALOG"], remove=["USE CATALOG"]),  # removed, then added: kept
            GrantChange("bob", remove=["CREATE SCHEMA"]),  # absent: a no-op
        ],
    )
    assert _grants(cat) == {("alice", "USE CATALOG"), ("alice", "CREATE SCHEMA"), ("bob", "USE CATALOG")}


@pytest.mark.parametrize(
    ("bad", "error", "message"),
    [
        (GrantChange("ghost", add=["USE CATALOG"]), NotFound, "principal ghost does not exist"),
        (GrantChange("alice", add=["CREATE CATALOG"]), ValueError, "CREATE CATALOG"),  # not on a catalog
        (GrantChange("alice", add=["FLY"]), ValueError, "FLY"),
        (GrantChange(" alice", add=["USE CATALOG"]), ValueError, "invalid principal"),
    ],
)
def test_one_refused_change_leaves_every_grant_as_it_was(
    cat: LocalCatalog, bad: GrantChange, error: type[Exception], message: str
) -> None:
    before = _grants(cat)
    changes = [GrantChange("alice", add=["USE CATALOG"]), GrantChange("bob", remove=["USE CATALOG"]), bad]
    with pytest.raises(error, match=message):
        cat.change_grants("main", changes)
    assert _grants(cat) == before


def test_a_non_owner_changes_nothing_even_where_it_holds_privileges(cat: LocalCatalog) -> None:
    before = _grants(cat)
    with as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks OWNERSHIP on main"):
        cat.change_grants("main", [GrantChange("bob", add=["CREATE SCHEMA"]), GrantChange("alice", remove=[])])
    assert _grants(cat) == before


def test_flat_securables_change_together_too(cat: LocalCatalog) -> None:
    cat.change_grants(
        "metastore",
        [GrantChange("alice", add=["CREATE CATALOG"]), GrantChange("bob", add=["CREATE CATALOG"])],
        kind="metastore",
    )
    assert _grants(cat, "metastore", "metastore") == {("alice", "CREATE CATALOG"), ("bob", "CREATE CATALOG")}
    with as_principal("alice"), pytest.raises(PermissionDenied):  # only admins grant on the metastore
        cat.change_grants("metastore", [GrantChange("alice", remove=["CREATE CATALOG"])], kind="metastore")
    assert ("alice", "CREATE CATALOG") in _grants(cat, "metastore", "metastore")
