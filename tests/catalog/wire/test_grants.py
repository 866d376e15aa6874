"""Permissions on the wire (uc_jupyter.catalog.wire.grants): targets parsed from the route, changes
parsed whole with every unknown privilege named at once, and lists the official client can read
beside the complete one."""

from __future__ import annotations

from typing import Any

import pytest

from uc_jupyter.catalog.model import GrantInfo
from uc_jupyter.catalog.rules.privileges import Privilege, SecurableKind
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.grants import (
    CLIENT_PRIVILEGES,
    EXTENSION_KEY,
    Change,
    Securable,
    check_changes,
    parse_changes,
    permissions_json,
    securable,
)


@pytest.mark.parametrize(
    ("kind", "name", "expected"),
    [
        ("catalog", "main", Securable("main", SecurableKind.CATALOG)),
        ("SCHEMA", "main.ml", Securable("main.ml", SecurableKind.SCHEMA)),
        ("volume", "main.ml.raw", Securable("main.ml.raw", SecurableKind.VOLUME)),
        ("metastore", "anything", Securable("metastore", SecurableKind.METASTORE)),  # whatever the path says
        ("external_location", "lake", Securable("lake", SecurableKind.EXTERNAL_LOCATION)),
    ],
)
def test_a_route_names_its_target(kind: str, name: str, expected: Securable) -> None:
    assert securable(kind, name) == expected


@pytest.mark.parametrize(
    ("kind", "name", "error"),
    [
        ("function", "main.ml.f", r"^securable type function is not supported by this server$"),
        ("table_x", "main", r"^unknown securable type 'table_x'; use one of: "),
        ("schema", "main", r"^invalid schema name 'main': expected 'catalog.schema'$"),
        ("table", "main.ml.t.x", r"expected 'catalog.schema.name'$"),
        ("external_location", "a/b", r"^invalid external location name 'a/b'$"),
        ("storage_credential", "", r"^invalid storage credential name ''$"),
    ],
)
def test_an_unusable_target_is_one_invalid_argument(kind: str, name: str, error: str) -> None:
    with pytest.raises(WireError, match=error) as raised:
        securable(kind, name)
    assert raised.value.error_code == "INVALID_ARGUMENT"


def test_changes_accept_every_spelling_of_a_privilege() -> None:
    body = {"changes": [{"principal": "bob", "add": ["USE CATALOG", "use_schema", "Read Volume"], "remove": []}]}
    assert parse_changes(body) == [
        Change("bob", (Privilege.USE_CATALOG, Privilege.USE_SCHEMA, Privilege.READ_VOLUME), ())
    ]


def test_every_unknown_privilege_is_named_in_one_error() -> None:
    body = {
        "changes": [
            {"principal": "bob", "add": ["USE CATALOG", "FLY"], "remove": ["SWIM"]},
            {"principal": "eve", "add": ["FLY"], "remove": []},
        ]
    }
    with pytest.raises(WireError, match=r"^unknown privilege 'FLY', 'SWIM'; use one of: ") as raised:
        parse_changes(body)
    assert "\n" not in raised.value.message


@pytest.mark.parametrize(
    ("entry", "error"),
    [
        ({"principal": "bob", "add": []}, r"must be an object with principal, add and remove$"),
        ("bob", r"must be an object with principal, add and remove$"),
        ({"principal": "bob", "add": [], "remove": [], "grant": 1}, r"^unknown field 'grant' in PermissionsChange$"),
        ({"principal": 7, "add": [], "remove": []}, r"^principal in PermissionsChange must be a string$"),
        ({"principal": "bob", "add": "USE CATALOG", "remove": []}, r"^add in PermissionsChange must be an array"),
        ({"principal": "bob", "add": [], "remove": [1]}, r"^remove in PermissionsChange must be an array"),
    ],
)
def test_a_malformed_change_is_refused_naming_what_is_wrong(entry: Any, error: str) -> None:
    with pytest.raises(WireError, match=error):
        parse_changes({"changes": [entry]})


@pytest.mark.parametrize("principal", ["", " bob", "bo\nb"])
def test_a_principal_that_is_no_name_is_refused(principal: str) -> None:
    with pytest.raises(ValueError, match=r"^invalid principal "):
        parse_changes({"changes": [{"principal": principal, "add": [], "remove": []}]})


def test_a_privilege_that_does_not_fit_the_target_is_refused_before_anything_is_applied() -> None:
    target = securable("volume", "main.ml.raw")
    fine = Change("bob", (Privilege.READ_VOLUME,), ())
    wrong = Change("eve", (Privilege.USE_CATALOG,), ())
    check_changes(target, [fine])
    with pytest.raises(ValueError, match=r"^USE CATALOG cannot be granted on volume main.ml.raw; "):
        check_changes(target, [fine, wrong])
    check_changes(target, [Change("eve", (), (Privilege.USE_CATALOG,))])  # removing one never granted: a no-op


def test_lists_keep_what_the_official_client_knows_and_the_whole_list_beside_it() -> None:
    grants = [
        GrantInfo("main.ml.raw", SecurableKind.VOLUME, "zoe", Privilege.WRITE_VOLUME),
        GrantInfo("main.ml.raw", SecurableKind.VOLUME, "bob", Privilege.READ_VOLUME),
        GrantInfo("main.ml.raw", SecurableKind.VOLUME, "bob", Privilege.WRITE_VOLUME),
    ]
    listed = permissions_json(grants)["privilege_assignments"]
    assert [a["principal"] for a in listed] == ["bob", "zoe"]
    assert listed[0]["privileges"] == ["READ VOLUME"] and listed[1]["privileges"] == []
    assert listed[0][EXTENSION_KEY] == ["READ VOLUME", "WRITE VOLUME"]
    assert all(p in CLIENT_PRIVILEGES for a in listed for p in a["privileges"])
    assert permissions_json(grants, "zoe")["privilege_assignments"] == [listed[1]]
    assert permissions_json([], "zoe") == {"privilege_assignments": []}
