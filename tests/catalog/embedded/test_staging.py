"""Managed tables made the UC OSS way on the embedded catalog: stage, write the Delta files, register;
only the stager may write or register, and what is never registered is swept when it expires."""

from __future__ import annotations

from pathlib import Path

import deltalake
import pyarrow as pa
import pytest

from tests.catalog.conftest import home_with_main_ml, with_principals
from uc_jupyter.catalog import AlreadyExists, NotFound, PermissionDenied, StagingTableInfo, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.storage import urls as st
from uc_jupyter.testing.clocks import ManualClock

TTL = 600.0


@pytest.fixture
def clock() -> ManualClock:
    """Epoch seconds the test sets."""
    return ManualClock(now=1_800_000_000.0)


@pytest.fixture
def cat(isolated_home: Path, clock: ManualClock) -> LocalCatalog:
    """main.ml where alice may create tables; bob may use the schema only."""
    catalog = home_with_main_ml(isolated_home, staging_ttl=TTL, clock=clock)
    with_principals(catalog, "alice", "bob", use_schema=True)
    catalog.grant("main.ml", "CREATE TABLE", "alice")
    catalog.grant("main.ml", "CREATE TABLE", "bob")
    return catalog


def write(staged: StagingTableInfo | str, data: pa.Table | None = None) -> None:
    location = staged if isinstance(staged, str) else staged.staging_location
    deltalake.write_deltalake(st.delta_uri(location), data if data is not None else pa.table({"id": [1, 2]}))


def test_a_staged_table_is_written_then_registered_as_managed_with_the_staging_id(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
        assert staged.staging_location.startswith(st.normalise_location(str(cat.root / "storage" / "tables")))
        resolved = cat.resolve_table_id(staged.id, write=True)
        assert resolved.storage_location == staged.staging_location
        write(resolved.storage_location)
        table = cat.register_staged_table(
            "main.ml.t", staged.staging_location, columns=[("id", "LONG")], comment="c", staging_id=staged.id
        )
    assert (table.table_type, table.id, table.owner, table.comment) == ("MANAGED", staged.id, "alice", "c")
    assert [c.name for c in table.columns] == ["id"]
    assert cat.resolve_table_id(staged.id).storage_location == staged.staging_location  # now the table's
    # Registered once: the staging row is gone.
    with as_principal("alice"), pytest.raises(ValueError, match="is not a staging location of yours"):
        cat.register_staged_table("main.ml.t", staged.staging_location)
    assert cat.sweep() == []  # the table owns its files
    cat.drop_table("main.ml.t")  # managed: its files go with it
    assert not Path(st.local_path(staged.staging_location)).exists()


def test_nobody_but_the_stager_may_write_or_register_it(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
    write(staged)
    for who in ("bob", "admin"):  # not even an admin: the staging location is the stager's
        with as_principal(who):
            with pytest.raises(NotFound, match=f"^no table with id '{staged.id}'$"):
                cat.resolve_table_id(staged.id, write=True)
            with pytest.raises(ValueError, match="is not a staging location of yours"):
                cat.register_staged_table("main.ml.t", staged.staging_location)
    with as_principal("alice"):
        assert cat.register_staged_table("main.ml.t", staged.staging_location).owner == "alice"


def test_a_staging_location_registers_only_under_its_staged_name_and_id(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
        other = cat.create_staging_table("main.ml.u")
        write(staged)
        with pytest.raises(ValueError, match="that staging location was staged for main.ml.t"):
            cat.register_staged_table("main.ml.u", staged.staging_location)
        with pytest.raises(ValueError, match="is not its staging table's"):
            cat.register_staged_table("main.ml.t", staged.staging_location, staging_id=other.id)
        with pytest.raises(ValueError, match="is not a staging location of yours"):  # a spot nobody staged
            cat.register_staged_table("main.ml.t", staged.staging_location + "/sub")
        assert cat.register_staged_table("main.ml.t", staged.staging_location).id == staged.id


def test_registration_needs_the_delta_log_and_columns_that_agree_with_it(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
        with pytest.raises(ValueError, match="no Delta table at its staging location yet"):
            cat.register_staged_table("main.ml.t", staged.staging_location)
        write(staged, pa.table({"id": [1], "x": [0.5]}))
        for columns, message in (
            ([("x", None), ("id", None)], r"the columns must be the Delta log's, in order \(id, x\), got x, id"),
            ([("id", "LONG")], r"in order \(id, x\), got id$"),
            ([("id", "STRING"), ("x", "DOUBLE")], "column 'id' is LONG in the Delta log, not STRING"),
        ):
            with pytest.raises(ValueError, match=message):
                cat.register_staged_table("main.ml.t", staged.staging_location, columns=columns)
        table = cat.register_staged_table("main.ml.t", staged.staging_location, columns=[("ID", None), ("x", None)])
    assert [(c.name, c.type_text) for c in table.columns] == [("id", "long"), ("x", "double")]


def test_staging_needs_create_table_and_a_free_name(cat: LocalCatalog) -> None:
    cat.create_table("main.ml.taken", pa.table({"a": [1]}))
    cat.revoke("main.ml", "CREATE TABLE", "bob")
    with as_principal("bob"), pytest.raises(PermissionDenied, match="CREATE TABLE"):
        cat.create_staging_table("main.ml.t")
    with as_principal("alice"):
        with pytest.raises(AlreadyExists, match="table main.ml.taken already exists"):
            cat.create_staging_table("main.ml.taken")
        staged = cat.create_staging_table("main.ml.t")
    write(staged)
    cat.revoke("main.ml", "CREATE TABLE", "alice")  # lost meanwhile: no credentials, no registration
    with as_principal("alice"):
        with pytest.raises(PermissionDenied, match="CREATE TABLE"):
            cat.resolve_table_id(staged.id, write=True)
        with pytest.raises(PermissionDenied, match="CREATE TABLE"):
            cat.register_staged_table("main.ml.t", staged.staging_location)


def test_a_name_taken_while_staging_refuses_the_registration(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
    write(staged)
    with as_principal("bob"):
        cat.create_table("main.ml.t", pa.table({"b": [1]}))
    with as_principal("alice"), pytest.raises(AlreadyExists, match="table main.ml.t already exists"):
        cat.register_staged_table("main.ml.t", staged.staging_location)


def test_an_expired_staging_table_is_swept_with_its_files(cat: LocalCatalog, clock: ManualClock) -> None:
    with as_principal("alice"):
        kept = cat.create_staging_table("main.ml.kept")
        clock.advance(TTL / 2)
        late = cat.create_staging_table("main.ml.late")
    write(kept)
    write(late)
    assert cat.sweep() == []  # neither has expired: both folders are known
    clock.advance(TTL / 2)  # kept's deadline
    assert cat.sweep() == [kept.staging_location]
    assert not Path(st.local_path(kept.staging_location)).exists()
    with as_principal("alice"):
        with pytest.raises(NotFound, match="no table with id"):
            cat.resolve_table_id(kept.id, write=True)
        with pytest.raises(ValueError, match="is not a staging location of yours"):
            cat.register_staged_table("main.ml.kept", kept.staging_location)
        assert cat.register_staged_table("main.ml.late", late.staging_location).table_type == "MANAGED"
    clock.advance(10 * TTL)
    assert cat.sweep() == []  # a registered table is never swept
    assert Path(st.local_path(late.staging_location)).exists()


def test_an_expired_staging_table_is_swept_when_another_catalog_opens_the_home(
    cat: LocalCatalog, clock: ManualClock, isolated_home: Path
) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
    write(staged)
    clock.advance(TTL + 1)
    LocalCatalog(isolated_home, staging_ttl=TTL, clock=clock)
    assert not Path(st.local_path(staged.staging_location)).exists()


def test_resolve_table_id_of_a_table_checks_as_resolve_table(cat: LocalCatalog) -> None:
    table = cat.create_table("main.ml.data", pa.table({"a": [1]}))
    assert table.id is not None
    assert cat.resolve_table_id(table.id, write=True).storage_location == table.storage_location
    with as_principal("bob"), pytest.raises(PermissionDenied, match="SELECT"):
        cat.resolve_table_id(table.id)
    cat.grant("main.ml.data", "SELECT", "bob")
    with as_principal("bob"):
        assert cat.resolve_table_id(table.id).table.full_name == "main.ml.data"
        with pytest.raises(PermissionDenied, match="MODIFY"):
            cat.resolve_table_id(table.id, write=True)
    for not_a_table in (cat.get_schema("main.ml").id, "nope"):
        with pytest.raises(NotFound, match="no table with id"):
            cat.resolve_table_id(str(not_a_table))


def test_an_abandoned_staging_table_goes_at_once_with_its_files_and_only_by_its_stager(cat: LocalCatalog) -> None:
    with as_principal("alice"):
        staged = cat.create_staging_table("main.ml.t")
    write(staged)
    for who in ("bob", "admin"):
        with as_principal(who), pytest.raises(NotFound, match=f"^no staging table with id '{staged.id}'$"):
            cat.abandon_staging_table(staged.id)
    assert Path(st.local_path(staged.staging_location)).exists()
    with as_principal("alice"):
        cat.abandon_staging_table(staged.id)
        assert not Path(st.local_path(staged.staging_location)).exists()
        with pytest.raises(NotFound, match="no table with id"):
            cat.resolve_table_id(staged.id, write=True)
        with pytest.raises(NotFound, match="no staging table with id"):
            cat.abandon_staging_table(staged.id)
    assert cat.sweep() == []


def test_a_new_staging_table_removes_the_expired_ones_first(cat: LocalCatalog, clock: ManualClock) -> None:
    with as_principal("alice"):
        old = cat.create_staging_table("main.ml.old")
        write(old)
        clock.advance(TTL)
        cat.create_staging_table("main.ml.new")
        assert not Path(st.local_path(old.staging_location)).exists()
        with pytest.raises(NotFound, match="no table with id"):
            cat.resolve_table_id(old.id, write=True)
