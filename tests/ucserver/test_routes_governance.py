"""uc_jupyter.ucserver.routes_governance, called as the app calls it: a table's or volume's path naming an
object of the other kind changes no grant (the rest, over HTTP: test_permissions.py)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog import NotFound
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.ucserver.routes_data import Call
from uc_jupyter.ucserver.routes_governance import get_permissions, update_permissions


@pytest.fixture
def cat(tmp_path: Path) -> LocalCatalog:
    """``main.s`` with table ``t`` and volume ``v``, and user ``bob``, as the metastore admin."""
    made = LocalCatalog(tmp_path / "home")
    made.create_catalog("main")
    made.create_schema("main.s")
    made.create_table("main.s.t", pa.table({"x": [1]}))
    made.create_volume("main.s.v")
    made.create_principal("bob")
    return made


def patch(securable_type: str, full_name: str, privilege: str) -> Call:
    path = {"securable_type": securable_type, "full_name": full_name}
    return Call(path=path, body={"changes": [{"principal": "bob", "add": [privilege], "remove": []}]})


@pytest.mark.parametrize(
    ("securable_type", "full_name", "privilege", "missing", "real"),
    [
        ("table", "main.s.v", "SELECT", "table main.s.v", "main.s.t"),
        ("volume", "main.s.t", "READ VOLUME", "volume main.s.t", "main.s.v"),
    ],
)
def test_a_path_naming_an_object_of_the_other_kind_is_not_found_and_grants_nothing(
    cat: LocalCatalog, securable_type: str, full_name: str, privilege: str, missing: str, real: str
) -> None:
    with pytest.raises(NotFound, match=missing):
        update_permissions(cat, patch(securable_type, full_name, privilege))
    with pytest.raises(NotFound, match=missing):
        get_permissions(cat, Call(path={"securable_type": securable_type, "full_name": full_name}))
    for name in ("main.s.t", "main.s.v"):
        assert [g for g in cat.show_grants(name) if g.principal == "bob"] == []
    # The same change on the object of that kind is granted: only the kind was wrong.
    answer = update_permissions(cat, patch(securable_type, real, privilege))
    assert [(a["principal"], a["privileges"]) for a in answer["privilege_assignments"]] == [("bob", [privilege])]
