"""uc_jupyter.catalog.rest.governance: grants, credentials and locations as RestCatalog sends them to a UC server.

The server is a scripted HTTP double (tests/catalog/rest/scripted_http.py): what matters here is what
the client asks for, and how it reads what a Unity Catalog server may answer.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.catalog.rest.scripted_http import Scripted, scripted_server
from uc_jupyter.catalog import InvalidName, NotFound, Privilege, SecurableKind
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.catalog.rest.http import Dialect

API = "/api/2.1/unity-catalog"
OK: tuple[int, Any, dict[str, str]] = (200, {}, {})


def missing(message: str) -> tuple[int, Any, dict[str, str]]:
    return (404, {"error_code": "NOT_FOUND", "message": message}, {})


@pytest.fixture
def scripted() -> Iterator[Scripted]:
    with scripted_server() as server:
        yield server


def client(scripted: Scripted, dialect: Dialect = "uc") -> RestCatalog:
    """A RestCatalog of the scripted server that has already asked who its token is (admin)."""
    scripted.script = [(200, {"principal": "admin"}, {}), OK]
    cat = RestCatalog(scripted.url, "ucj_token", dialect=dialect)
    assert cat.current_principal() == "admin"
    scripted.seen.clear()
    return cat


@pytest.fixture
def rest(scripted: Scripted) -> Iterator[RestCatalog]:
    cat = client(scripted)
    yield cat
    cat.close()


def sent(scripted: Scripted) -> list[tuple[str, str, Any]]:
    """(method, path below the API, decoded body) of each request the server saw."""
    return [
        (s["method"], s["path"].removeprefix(API), json.loads(s["body"]) if s["body"] else None) for s in scripted.seen
    ]


def test_a_grant_is_one_patch_of_the_securables_permissions(rest: RestCatalog, scripted: Scripted) -> None:
    rest.grant("Main", "use catalog", "alice")
    rest.revoke("main.`feature-store`", Privilege.USE_SCHEMA, "bob")
    assert sent(scripted) == [
        (
            "PATCH",
            "/permissions/catalog/main",
            {"changes": [{"principal": "alice", "add": ["USE CATALOG"], "remove": []}]},
        ),
        (
            "PATCH",
            "/permissions/schema/main.feature-store",
            {"changes": [{"principal": "bob", "add": [], "remove": ["USE SCHEMA"]}]},
        ),
    ]
    assert all(s["auth"] == "Bearer ucj_token" for s in scripted.seen)


def test_an_unknown_privilege_or_a_malformed_name_sends_nothing(rest: RestCatalog, scripted: Scripted) -> None:
    with pytest.raises(ValueError, match="FLY"):
        rest.grant("main", "FLY", "alice")
    for name in ("main/../admin", "main.ml.t.x", "", "a..b"):
        with pytest.raises(InvalidName):
            rest.grant(name, "USE CATALOG", "alice")
    with pytest.raises(ValueError, match="grants on the metastore name it 'metastore'"):
        rest.grant("other", "CREATE CATALOG", "alice", kind="metastore")
    assert scripted.seen == []


def test_a_three_part_name_is_tried_as_a_table_then_as_a_volume(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [missing("table main.ml.raw does not exist"), OK]
    rest.grant("main.ml.raw", "READ VOLUME", "alice")
    assert [path for _, path, _ in sent(scripted)] == [
        "/permissions/table/main.ml.raw",
        "/permissions/volume/main.ml.raw",
    ]


def test_a_name_that_is_neither_is_not_found_as_a_table_or_volume(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [missing("table main.ml.x does not exist"), missing("volume main.ml.x does not exist")]
    with pytest.raises(NotFound, match="^table or volume main.ml.x does not exist$"):
        rest.show_grants("main.ml.x")


def test_a_missing_container_is_the_answer_without_trying_a_volume(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [missing("schema main.nope does not exist")]
    with pytest.raises(NotFound, match="^schema main.nope does not exist$"):
        rest.grant("main.nope.t", "SELECT", "alice")
    assert len(scripted.seen) == 1


@pytest.mark.parametrize(
    ("kind", "name", "path"),
    [
        ("location", "Raw", "/permissions/external_location/raw"),
        (SecurableKind.EXTERNAL_LOCATION, "raw", "/permissions/external_location/raw"),
        ("credential", "lake", "/permissions/credential/lake"),  # UC's name of the storage credential type
        ("metastore", "metastore", "/permissions/metastore/metastore"),
    ],
)
def test_flat_securables_have_paths_of_their_own(
    rest: RestCatalog, scripted: Scripted, kind: str | SecurableKind, name: str, path: str
) -> None:
    rest.grant(name, "CREATE EXTERNAL TABLE" if kind != "metastore" else "CREATE CATALOG", "alice", kind=kind)
    assert [p for _, p, _ in sent(scripted)] == [path]


def test_databricks_spells_flat_kinds_and_privileges_its_own_way(scripted: Scripted) -> None:
    cat = client(scripted, dialect="databricks")
    cat.grant("raw", "CREATE EXTERNAL TABLE", "alice", kind="location")
    cat.revoke("lake", "CREATE EXTERNAL LOCATION", "alice", kind="credential")
    cat.grant("main.ml.t", "SELECT", "alice")
    assert sent(scripted) == [
        (
            "PATCH",
            "/permissions/EXTERNAL_LOCATION/raw",
            {"changes": [{"principal": "alice", "add": ["CREATE_EXTERNAL_TABLE"], "remove": []}]},
        ),
        (
            "PATCH",
            "/permissions/STORAGE_CREDENTIAL/lake",
            {"changes": [{"principal": "alice", "add": [], "remove": ["CREATE_EXTERNAL_LOCATION"]}]},
        ),
        (
            "PATCH",
            "/permissions/TABLE/main.ml.t",
            {"changes": [{"principal": "alice", "add": ["SELECT"], "remove": []}]},
        ),
    ]
    cat.close()


def test_show_grants_prefers_our_full_list_and_leaves_out_what_we_do_not_model(
    rest: RestCatalog, scripted: Scripted
) -> None:
    scripted.script = [
        missing("table main.ml.raw does not exist"),
        (
            200,
            {
                "privilege_assignments": [
                    {"principal": "bob", "privileges": ["READ_VOLUME", "EXECUTE"]},
                    # UC's enum has no WRITE VOLUME: our extension field carries the whole list
                    {
                        "principal": "alice",
                        "privileges": ["READ_VOLUME"],
                        "uc_jupyter_privileges": ["WRITE VOLUME", "READ VOLUME"],
                    },
                    {"principal": "bob", "privileges": ["READ VOLUME"]},  # the same grant twice is one
                    {"privileges": ["READ VOLUME"]},  # no principal: not a grant
                    {"principal": "carol", "privileges": None},
                ]
            },
            {},
        ),
    ]
    grants = rest.show_grants("main.ml.raw")
    assert [(g.principal, g.privilege.value) for g in grants] == [
        ("alice", "READ VOLUME"),
        ("alice", "WRITE VOLUME"),
        ("bob", "READ VOLUME"),
    ]
    assert {(g.securable, g.securable_kind) for g in grants} == {("main.ml.raw", SecurableKind.VOLUME)}


def test_show_grants_of_a_location_name_it_as_a_location(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [(200, {"privilege_assignments": [{"principal": "a", "privileges": ["READ_FILES"]}]}, {})]
    (grant,) = rest.show_grants("RAW", kind="location")
    assert (grant.securable, grant.securable_kind, grant.privilege) == (
        "raw",
        SecurableKind.EXTERNAL_LOCATION,
        Privilege.READ_FILES,
    )
    scripted.script = [(200, {}, {})]
    assert rest.show_grants("raw", kind="location") == []  # no assignments at all


CREDENTIAL = {"name": "lake", "owner": "admin", "created_at": 1_700_000_000_000, "uc_jupyter_option_names": ["key"]}
LOCATION = {"name": "raw", "url": "s3://lake/raw", "owner": "admin", "created_at": 1_700_000_000_000}


def test_a_credentials_options_are_sent_once_in_their_write_only_field(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [(200, CREDENTIAL, {})]
    info = rest.create_storage_credential("Lake", {"key": "AK", "role_arn": "arn:aws:iam::1:role/r"}, comment="c")
    assert sent(scripted) == [
        (
            "POST",
            "/credentials",
            {
                "name": "lake",
                "comment": "c",
                "purpose": "STORAGE",
                "uc_jupyter_storage_options": {"key": "AK", "role_arn": "arn:aws:iam::1:role/r"},
                "aws_iam_role": {"role_arn": "arn:aws:iam::1:role/r"},  # what UC OSS itself reads
            },
        )
    ]
    assert (info.name, info.option_names) == ("lake", ("key",))
    scripted.seen.clear()
    rest.create_storage_credential("env")
    assert sent(scripted) == [("POST", "/credentials", {"name": "env", "purpose": "STORAGE"})]


def test_credentials_are_read_listed_and_dropped_by_their_checked_name(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [(200, CREDENTIAL, {}), (200, {"credentials": [CREDENTIAL]}, {}), OK]
    assert rest.get_storage_credential("LAKE").name == "lake"
    assert [c.name for c in rest.list_storage_credentials()] == ["lake"]
    rest.drop_storage_credential("lake")
    assert [(m, p) for m, p, _ in sent(scripted)] == [
        ("GET", "/credentials/lake"),
        ("GET", "/credentials"),
        ("DELETE", "/credentials/lake"),
    ]
    with pytest.raises(InvalidName):
        rest.drop_storage_credential("../locations/raw")
    assert len(scripted.seen) == 3


def test_a_location_is_created_with_or_without_a_credential(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [(200, {**LOCATION, "credential_name": "lake"}, {}), (200, LOCATION, {})]
    bound = rest.create_external_location("Raw", "s3://lake/raw", "lake", comment="c")
    environment = rest.create_external_location("raw", "s3://lake/raw")
    assert sent(scripted) == [
        (
            "POST",
            "/external-locations",
            {"name": "raw", "url": "s3://lake/raw", "credential_name": "lake", "comment": "c"},
        ),
        ("POST", "/external-locations", {"name": "raw", "url": "s3://lake/raw"}),
    ]
    assert (bound.credential_name, environment.credential_name) == ("lake", None)


def test_locations_are_read_listed_across_pages_and_dropped(rest: RestCatalog, scripted: Scripted) -> None:
    scripted.script = [
        (200, LOCATION, {}),
        (200, {"external_locations": [LOCATION], "next_page_token": "p2"}, {}),
        (200, {"external_locations": [{**LOCATION, "name": "raw2", "url": "s3://lake/raw2"}]}, {}),
        OK,
    ]
    assert rest.get_external_location("raw").url == "s3://lake/raw"
    assert [x.name for x in rest.list_external_locations()] == ["raw", "raw2"]
    rest.drop_external_location("RAW")
    assert [(m, p) for m, p, _ in sent(scripted)] == [
        ("GET", "/external-locations/raw"),
        ("GET", "/external-locations"),
        ("GET", "/external-locations?page_token=p2"),
        ("DELETE", "/external-locations/raw"),
    ]
