"""uc_jupyter.catalog.embedded.grants: granting, revoking and showing privileges on the tree and the flat securables."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pyarrow as pa
import pytest

from tests.catalog.conftest import home_with_main_ml, with_principals
from uc_jupyter.catalog import NotFound, PermissionDenied, Privilege, SecurableKind, as_principal
from uc_jupyter.catalog.embedded.grants import GrantChange
from uc_jupyter.catalog.embedded.local import LocalCatalog


@pytest.fixture
def cat(tmp_path: Path) -> LocalCatalog:
    """main.ml.t and main.ml.v, principals alice, bob and carol, and an external location "raw"."""
    catalog = with_principals(home_with_main_ml(tmp_path / "home"), "alice", "bob", "carol")
    catalog.create_table("main.ml.t", pa.table({"x": [1]}))
    catalog.create_volume("main.ml.v")
    (tmp_path / "raw").mkdir()
    catalog.create_external_location("raw", str(tmp_path / "raw"))
    return catalog


def shown(cat: LocalCatalog, securable: str, kind: str | None = None) -> list[tuple[str, str]]:
    return [(g.principal, g.privilege.value) for g in cat.show_grants(securable, kind=kind)]


def test_a_grant_change_adds_and_removes_nothing_unless_told() -> None:
    change = GrantChange("alice")
    assert (change.add, change.remove) == ((), ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        change.principal = "bob"  # type: ignore[misc]


def test_grant_and_revoke_take_any_spelling_of_a_privilege(cat: LocalCatalog) -> None:
    cat.grant("main.ml.t", Privilege.SELECT, "alice")
    cat.grant("main.ml.t", "modify", "alice")
    cat.grant("MAIN.ML.T", "Select", "bob")  # names are case-insensitive, like every catalog name
    assert shown(cat, "main.ml.t") == [("alice", "MODIFY"), ("alice", "SELECT"), ("bob", "SELECT")]
    cat.revoke("main.ml.t", "select", "alice")
    cat.revoke("main.ml.t", Privilege.MODIFY, "alice")
    assert shown(cat, "main.ml.t") == [("bob", "SELECT")]


def test_show_grants_names_the_securable_and_its_kind(cat: LocalCatalog) -> None:
    cat.grant("main.ml.v", "READ VOLUME", "alice")
    cat.grant("main.ml", "USE SCHEMA", "alice")
    (volume,) = cat.show_grants("Main.ML.V")
    assert (volume.securable, volume.securable_kind, volume.privilege) == (
        "main.ml.v",
        SecurableKind.VOLUME,
        Privilege.READ_VOLUME,
    )
    (schema,) = cat.show_grants("main.ml")
    assert (schema.securable, schema.securable_kind) == ("main.ml", SecurableKind.SCHEMA)


def test_a_principal_is_its_exact_name_never_another_spelling(cat: LocalCatalog) -> None:
    for other in ("ALICE", "Alice", "alice2", "alic"):
        with pytest.raises(NotFound, match=f"principal {other} does not exist"):
            cat.grant("main", "USE CATALOG", other)
    assert shown(cat, "main") == []


def test_revoking_from_a_principal_that_does_not_exist_changes_nothing(cat: LocalCatalog) -> None:
    cat.grant("main", "USE CATALOG", "alice")
    cat.revoke("main", "USE CATALOG", "ghost")
    cat.revoke("main", "CREATE SCHEMA", "alice")  # never granted
    assert shown(cat, "main") == [("alice", "USE CATALOG")]


def test_grants_go_with_their_object_and_never_reach_a_new_one_of_the_same_name(cat: LocalCatalog) -> None:
    cat.grant("main", "USE CATALOG", "alice")
    cat.grant("main.ml", "USE SCHEMA", "alice")
    cat.grant("main.ml.t", "SELECT", "alice")
    with as_principal("alice"):
        cat.resolve_table("main.ml.t")
    cat.drop_table("main.ml.t")
    cat.create_table("main.ml.t", pa.table({"x": [2]}))
    assert shown(cat, "main.ml.t") == []
    with as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks SELECT on main.ml.t"):
        cat.resolve_table("main.ml.t")


def test_location_grants_go_with_the_location_too(cat: LocalCatalog, tmp_path: Path) -> None:
    cat.grant("raw", "READ FILES", "alice", kind="location")
    cat.drop_external_location("raw")
    cat.create_external_location("raw", str(tmp_path / "raw"))
    assert shown(cat, "raw", "location") == []


def test_the_flat_securables_and_the_tree_are_separate_namespaces(cat: LocalCatalog, tmp_path: Path) -> None:
    (tmp_path / "main").mkdir()
    cat.create_external_location("main", str(tmp_path / "main"))  # a location named like the catalog
    cat.grant("main", "READ FILES", "alice", kind="location")
    cat.grant("main", "USE CATALOG", "bob")
    assert shown(cat, "main", "location") == [("alice", "READ FILES")]
    assert shown(cat, "main") == [("bob", "USE CATALOG")]
    with pytest.raises(NotFound, match="catalog raw does not exist"):
        cat.grant("raw", "USE CATALOG", "alice")  # without kind, a one-part name is a catalog


def test_a_location_s_grants_are_all_seen_by_admins_and_only_their_own_by_grantees(cat: LocalCatalog) -> None:
    cat.grant("raw", "READ FILES", "alice", kind=SecurableKind.EXTERNAL_LOCATION)
    cat.grant("raw", "WRITE FILES", "bob", kind="location")
    assert shown(cat, "RAW", "location") == [("alice", "READ FILES"), ("bob", "WRITE FILES")]
    with as_principal("alice"):
        assert shown(cat, "raw", "location") == [("alice", "READ FILES")]
    with as_principal("carol"), pytest.raises(NotFound, match="external location raw does not exist"):
        cat.show_grants("raw", kind="location")  # not even its name is hers to see


def test_the_owner_of_a_location_sees_and_changes_every_grant_on_it(cat: LocalCatalog, tmp_path: Path) -> None:
    (tmp_path / "bobs").mkdir()
    cat.grant("metastore", "CREATE EXTERNAL LOCATION", "bob", kind="metastore")
    with as_principal("bob"):
        cat.create_external_location("bobs", str(tmp_path / "bobs"))
        cat.grant("bobs", "READ FILES", "alice", kind="location")
        cat.grant("bobs", "READ FILES", "carol", kind="location")
        assert shown(cat, "bobs", "location") == [("alice", "READ FILES"), ("carol", "READ FILES")]
    with (
        as_principal("alice"),
        pytest.raises(PermissionDenied, match="alice lacks OWNERSHIP on external location bobs"),
    ):
        cat.revoke("bobs", "READ FILES", "carol", kind="location")
    assert shown(cat, "bobs", "location") == [("alice", "READ FILES"), ("carol", "READ FILES")]


def test_metastore_grants_are_all_seen_by_admins_and_only_their_own_by_others(cat: LocalCatalog) -> None:
    cat.grant("metastore", "CREATE CATALOG", "alice", kind="metastore")
    cat.grant("", "CREATE EXTERNAL LOCATION", "bob", kind="metastore")  # the metastore has one name
    assert shown(cat, "metastore", "metastore") == [("alice", "CREATE CATALOG"), ("bob", "CREATE EXTERNAL LOCATION")]
    with as_principal("bob"):
        assert shown(cat, "metastore", "metastore") == [("bob", "CREATE EXTERNAL LOCATION")]
    with as_principal("carol"):
        assert shown(cat, "metastore", "metastore") == []
    with pytest.raises(ValueError, match="grants on the metastore name it 'metastore'"):
        cat.grant("main", "CREATE CATALOG", "alice", kind="metastore")


def test_a_granted_metastore_privilege_takes_effect_and_its_revoke_ends_it(cat: LocalCatalog) -> None:
    cat.grant("metastore", "CREATE CATALOG", "alice", kind="metastore")
    with as_principal("alice"):
        assert cat.create_catalog("hers").owner == "alice"
    cat.revoke("metastore", "CREATE CATALOG", "alice", kind="metastore")
    with as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks CREATE CATALOG on the metastore"):
        cat.create_catalog("another")


def test_the_owner_of_a_container_grants_on_what_lies_inside(cat: LocalCatalog) -> None:
    cat.update_catalog("main", owner="alice")
    with as_principal("alice"):
        cat.grant("main.ml.t", "SELECT", "bob")
        assert shown(cat, "main.ml.t") == [("bob", "SELECT")]
    with as_principal("bob"), pytest.raises(PermissionDenied, match="bob lacks OWNERSHIP on main.ml.t"):
        cat.grant("main.ml.t", "SELECT", "carol")


def test_grants_on_something_missing_are_not_found_naming_the_first_missing_level(cat: LocalCatalog) -> None:
    with pytest.raises(NotFound, match="schema main.nope does not exist"):
        cat.grant("main.nope.t", "SELECT", "alice")
    with pytest.raises(NotFound, match="external location nowhere does not exist"):
        cat.grant("nowhere", "READ FILES", "alice", kind="location")
    with pytest.raises(NotFound, match="storage credential nothing does not exist"):
        cat.show_grants("nothing", kind="credential")
