"""Permissions through a real ``uc-jupyter serve``: GET and PATCH ``/permissions/{type}/{name}`` over the
embedded catalog's grants, what each caller may see and change, privileges the official client cannot
parse carried apart, every bad request refused whole (nothing of it applied), and UC's codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.ucserver.conftest import ADMIN, Served
from tests.ucserver.test_catalogs import ok, refused
from uc_jupyter.catalog import as_principal
from uc_jupyter.testing.catalogs import external_location


def _tree(server: Served, catalog: str) -> None:
    """``catalog.s`` with a managed volume ``v``, made by the admin."""
    admin = server.admin()
    ok(admin.call("POST", "catalogs", json_body={"name": catalog}))
    ok(admin.call("POST", "schemas", json_body={"name": "s", "catalog_name": catalog}))
    body = {"catalog_name": catalog, "schema_name": "s", "name": "v", "volume_type": "MANAGED"}
    ok(admin.call("POST", "volumes", json_body=body))


def _change(principal: str, add: list[str] | None = None, remove: list[str] | None = None) -> dict[str, Any]:
    return {"principal": principal, "add": add or [], "remove": remove or []}


def _grants(server: Served, name: str, kind: str | None = None) -> list[tuple[str, str]]:
    with as_principal(ADMIN):
        return [(g.principal, g.privilege.value) for g in server.catalog.show_grants(name, kind=kind)]


def test_admin_adds_and_removes_privileges_and_sees_every_assignment(server: Served) -> None:
    _tree(server, "pcrud")
    server.principal("bob"), server.principal("carol")
    admin = server.admin()
    changes = [_change("bob", ["USE CATALOG", "create_schema"]), _change("carol", ["USE_CATALOG"])]
    answer = ok(admin.call("PATCH", "permissions/catalog/pcrud", json_body={"changes": changes}))
    assert answer == {
        "privilege_assignments": [
            {
                "principal": "bob",
                "privileges": ["CREATE SCHEMA", "USE CATALOG"],
                "uc_jupyter_privileges": ["CREATE SCHEMA", "USE CATALOG"],
            },
            {"principal": "carol", "privileges": ["USE CATALOG"], "uc_jupyter_privileges": ["USE CATALOG"]},
        ]
    }
    assert ok(admin.call("GET", "permissions/catalog/PCRUD")) == answer  # names are case-insensitive
    only_carol = ok(admin.call("GET", "permissions/catalog/pcrud", query={"principal": "carol"}))
    assert [a["principal"] for a in only_carol["privilege_assignments"]] == ["carol"]
    # Removing answers only the principals the changes name, as UC OSS does.
    removed = ok(
        admin.call(
            "PATCH", "permissions/catalog/pcrud", json_body={"changes": [_change("bob", remove=["CREATE SCHEMA"])]}
        )
    )
    assert removed["privilege_assignments"] == [
        {"principal": "bob", "privileges": ["USE CATALOG"], "uc_jupyter_privileges": ["USE CATALOG"]}
    ]
    assert _grants(server, "pcrud") == [("bob", "USE CATALOG"), ("carol", "USE CATALOG")]


def test_privileges_the_official_client_lacks_are_carried_only_in_the_extension_field(server: Served) -> None:
    _tree(server, "pext")
    server.principal("bob")
    body = {"changes": [_change("bob", ["READ VOLUME", "WRITE_VOLUME"])]}
    answer = ok(server.admin().call("PATCH", "permissions/volume/pext.s.v", json_body=body))
    assert answer["privilege_assignments"] == [
        {"principal": "bob", "privileges": ["READ VOLUME"], "uc_jupyter_privileges": ["READ VOLUME", "WRITE VOLUME"]}
    ]
    only = {"changes": [_change("bob", ["ALL PRIVILEGES"], ["READ VOLUME", "WRITE VOLUME"])]}
    answer = ok(server.admin().call("PATCH", "permissions/volume/pext.s.v", json_body=only))
    assert answer["privilege_assignments"] == [
        {"principal": "bob", "privileges": [], "uc_jupyter_privileges": ["ALL PRIVILEGES"]}
    ]


def test_a_principal_who_is_not_an_owner_sees_only_its_own_and_may_not_change_any(server: Served) -> None:
    _tree(server, "pown")
    server.principal("carol")
    bob = server.client(server.token("bob"))
    ok(
        server.admin().call(
            "PATCH",
            "permissions/catalog/pown",
            json_body={"changes": [_change("bob", ["USE CATALOG"]), _change("carol", ["USE CATALOG"])]},
        )
    )
    seen = ok(bob.call("GET", "permissions/catalog/pown"))
    assert [a["principal"] for a in seen["privilege_assignments"]] == ["bob"]
    for changes in ([_change("bob", ["CREATE SCHEMA"])], [_change("carol", remove=["USE CATALOG"])]):
        refused(bob.call("PATCH", "permissions/catalog/pown", json_body={"changes": changes}), 403, "PERMISSION_DENIED")
    # Removing what was never granted is still refused: revoke, not the server, decides who may.
    refused(
        bob.call("PATCH", "permissions/catalog/pown", json_body={"changes": [_change("carol", remove=["SELECT"])]}),
        403,
        "PERMISSION_DENIED",
    )
    assert _grants(server, "pown") == [("bob", "USE CATALOG"), ("carol", "USE CATALOG")]
    # Where he may not look, bob is refused as the embedded catalog's show_grants refuses him.
    refused(bob.call("GET", "permissions/schema/pown.s"), 403, "PERMISSION_DENIED", "bob lacks USE SCHEMA on pown.s")


def test_a_refused_change_leaves_every_other_change_of_the_body_unapplied(server: Served) -> None:
    _tree(server, "patomic")
    server.principal("bob")
    ok(
        server.admin().call(
            "PATCH", "permissions/catalog/patomic", json_body={"changes": [_change("bob", ["USE CATALOG"])]}
        )
    )
    changes = [_change("bob", ["CREATE SCHEMA"], ["USE CATALOG"]), _change("ghost", ["USE CATALOG"])]
    text = refused(
        server.admin().call("PATCH", "permissions/catalog/patomic", json_body={"changes": changes}), 404, "NOT_FOUND"
    )
    assert "ghost" in text
    assert _grants(server, "patomic") == [("bob", "USE CATALOG")]


def test_unknown_privileges_and_securable_types_are_invalid_arguments_naming_them(server: Served) -> None:
    _tree(server, "pbad")
    server.principal("bob")
    admin = server.admin()
    changes = [_change("bob", ["USE CATALOG", "FLY"], ["SWIM"])]
    text = refused(
        admin.call("PATCH", "permissions/catalog/pbad", json_body={"changes": changes}), 400, "INVALID_ARGUMENT"
    )
    assert text.startswith("unknown privilege 'FLY', 'SWIM'; use one of: USE CATALOG")
    text = refused(
        admin.call("PATCH", "permissions/volume/pbad.s.v", json_body={"changes": [_change("bob", ["SELECT"])]}),
        400,
        "INVALID_ARGUMENT",
    )
    assert text.startswith("SELECT cannot be granted on volume pbad.s.v")
    assert _grants(server, "pbad") == [] and _grants(server, "pbad.s.v") == []
    text = refused(admin.call("GET", "permissions/galaxy/pbad"), 400, "INVALID_ARGUMENT")
    assert text.startswith("unknown securable type 'galaxy'; use one of: catalog, schema")
    refused(
        admin.call("GET", "permissions/function/pbad.s.f"),
        400,
        "INVALID_ARGUMENT",
        "securable type function is not supported by this server",
    )
    refused(admin.call("GET", "permissions/schema/pbad"), 400, "INVALID_ARGUMENT")
    refused(admin.call("GET", "permissions/table/pbad.s.v"), 404, "TABLE_NOT_FOUND")  # v is a volume
    for body in ({"changes": [{"principal": "bob", "add": []}]}, {"changes": [_change("bob") | {"x": 1}]}, {}):
        refused(admin.call("PATCH", "permissions/catalog/pbad", json_body=body), 400, "INVALID_ARGUMENT")


def test_the_metastore_takes_any_full_name_and_only_admins_grant_on_it(server: Served) -> None:
    bob = server.client(server.token("bob"))
    body = {"changes": [_change("bob", ["CREATE CATALOG"])]}
    refused(bob.call("PATCH", "permissions/metastore/anything", json_body=body), 403, "PERMISSION_DENIED")
    answer = ok(server.admin().call("PATCH", "permissions/metastore/metastore", json_body=body))
    assert answer["privilege_assignments"] == [
        {"principal": "bob", "privileges": ["CREATE CATALOG"], "uc_jupyter_privileges": ["CREATE CATALOG"]}
    ]
    seen = ok(bob.call("GET", "permissions/metastore/whatever"))
    assert seen == answer
    ok(
        server.admin().call(
            "PATCH", "permissions/metastore/m", json_body={"changes": [_change("bob", remove=["CREATE CATALOG"])]}
        )
    )


def test_external_locations_and_credentials_take_their_own_privileges(server: Served, tmp_path: Path) -> None:
    with as_principal(ADMIN):
        location = external_location(server.catalog, tmp_path.as_uri(), {"key": "k"}, name="ploc").name
    server.principal("bob")
    admin = server.admin()
    body = {"changes": [_change("bob", ["READ_FILES", "CREATE EXTERNAL VOLUME"])]}
    answer = ok(admin.call("PATCH", f"permissions/external_location/{location}", json_body=body))
    assert answer["privilege_assignments"] == [
        {
            "principal": "bob",
            "privileges": ["CREATE EXTERNAL VOLUME", "READ FILES"],
            "uc_jupyter_privileges": ["CREATE EXTERNAL VOLUME", "READ FILES"],
        }
    ]
    assert _grants(server, location, "location") == [("bob", "CREATE EXTERNAL VOLUME"), ("bob", "READ FILES")]
    # UC's name for a storage credential is "credential"; ours is accepted too.
    body = {"changes": [_change("bob", ["CREATE EXTERNAL LOCATION"])]}
    for securable_type in ("credential", "storage_credential"):
        answer = ok(admin.call("PATCH", f"permissions/{securable_type}/ploc_credential", json_body=body))
        assert [a["privileges"] for a in answer["privilege_assignments"]] == [["CREATE EXTERNAL LOCATION"]]
    text = refused(
        admin.call(
            "PATCH", f"permissions/external_location/{location}", json_body={"changes": [_change("bob", ["SELECT"])]}
        ),
        400,
        "INVALID_ARGUMENT",
    )
    assert text.startswith(f"SELECT cannot be granted on external location {location}")
    refused(admin.call("GET", "permissions/external_location/nope"), 404, "NOT_FOUND")
