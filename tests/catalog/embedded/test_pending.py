"""uc_jupyter.catalog.embedded.pending: managed storage no committed row owns, and the sweep of what the dead left."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.catalog.rules.privileges import SecurableKind
from uc_jupyter.storage import urls as st

OPTIONS = {"key": "AKIA-pending", "secret": "pending-secret"}


@pytest.fixture
def cat(main_ml: LocalCatalog) -> LocalCatalog:
    return main_ml


@pytest.fixture(scope="module")
def dead_pid() -> int:
    """The id of a process that has exited and been reaped."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def query(cat: LocalCatalog, sql: str, *args: object) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(cat.root / "metastore.db")) as conn:
        return conn.execute(sql, args).fetchall()


def died(cat: LocalCatalog, table: str, pid: int) -> None:
    """Make every record in ``table`` (pending_storage or pending_secrets) one of process ``pid``."""
    with contextlib.closing(sqlite3.connect(cat.root / "metastore.db")) as conn, conn:
        conn.execute(f"UPDATE {table} SET pid = ?", (pid,))


def made(location: str) -> Path:
    """Make a managed location's folder, with a file, as a create under way would."""
    folder = Path(st.local_path(location))
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"data")
    return folder


def register(cat: LocalCatalog, location: str | None, object_id: str, *, fail: str, insert: str | None = None) -> None:
    """A registration as the catalog's creates make one: its secret, perhaps its row, then ``fail``."""
    with cat._cleanup_on_error(location, secret_id=object_id):
        cat._put_secret(object_id, OPTIONS)
        if insert is not None:
            with cat._transaction(write=True) as conn:
                cat._insert(conn, parse_name(insert), SecurableKind.VOLUME, given_id=object_id)
        raise RuntimeError(fail)


def test_a_fresh_catalog_sweeps_nothing(cat: LocalCatalog) -> None:
    assert cat.sweep() == []


def test_a_new_managed_location_is_fresh_under_its_kind_and_pending_before_it_exists(cat: LocalCatalog) -> None:
    first, second = cat._new_managed_location("volumes"), cat._new_managed_location("volumes")
    assert first != second
    for location in (first, second):
        assert location.startswith(f"file://{cat.root}/storage/volumes/")
        assert not Path(st.local_path(location)).exists()
    assert sorted(query(cat, "SELECT location FROM pending_storage")) == sorted([(first,), (second,)])


def test_storage_a_live_process_is_making_is_never_swept(cat: LocalCatalog) -> None:
    folder = made(cat._new_managed_location("tables"))
    assert cat.sweep() == []
    LocalCatalog(cat.root)  # another catalog opening the home sweeps too: this process is alive
    assert (folder / "part-0.parquet").exists()


def test_storage_a_dead_process_left_pending_is_removed_with_its_record(cat: LocalCatalog, dead_pid: int) -> None:
    location = cat._new_managed_location("tables")
    folder = made(location)
    died(cat, "pending_storage", dead_pid)
    assert cat.sweep() == [location]
    assert not folder.exists()
    assert query(cat, "SELECT * FROM pending_storage") == []


def test_folders_no_row_or_record_knows_are_removed_and_owned_ones_kept(cat: LocalCatalog) -> None:
    table = cat.create_table("main.ml.t", pa.table({"x": [1, 2]}))
    volume = cat.create_volume("main.ml.v")
    strays = [cat.root / "storage" / "tables" / "stray", cat.root / "storage" / "volumes" / "stray"]
    for stray in strays:
        (stray / "deep").mkdir(parents=True)
    removed = cat.sweep()
    assert sorted(removed) == sorted(f"file://{stray}" for stray in strays)
    assert not any(stray.exists() for stray in strays)
    assert Path(st.local_path(table.storage_location), "_delta_log").is_dir()
    assert Path(st.local_path(volume.storage_location)).is_dir()
    assert cat.sweep() == []


def test_a_dead_record_never_removes_storage_that_a_row_owns(cat: LocalCatalog, dead_pid: int) -> None:
    table = cat.create_table("main.ml.t", pa.table({"x": [1, 2]}))
    with cat._transaction(write=True) as conn:
        cat._record_pending(conn, table.storage_location)
    died(cat, "pending_storage", dead_pid)
    assert cat.sweep() == []
    assert query(cat, "SELECT * FROM pending_storage") == []
    assert Path(st.local_path(table.storage_location), "_delta_log").is_dir()


def test_a_symlink_planted_in_managed_storage_is_not_swept_through(cat: LocalCatalog, tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    for kind in ("tables", "volumes"):
        (cat.root / "storage" / kind).mkdir(exist_ok=True)
    (cat.root / "storage" / "tables" / "link").symlink_to(precious)
    (cat.root / "storage" / "volumes" / "a-file").write_text("not a folder")
    assert cat.sweep() == []
    assert (precious / "keep.txt").read_text() == "mine"
    assert (cat.root / "storage" / "volumes" / "a-file").exists()


def test_a_secret_a_dead_process_left_without_a_row_is_deleted(cat: LocalCatalog, dead_pid: int) -> None:
    cat._put_secret("id-left", OPTIONS)
    assert query(cat, "SELECT id FROM pending_secrets") == [("id-left",)]
    cat.sweep()
    assert cat._secrets.get("object", "id-left") == OPTIONS  # this process is alive: still its create's
    died(cat, "pending_secrets", dead_pid)
    cat.sweep()
    assert cat._secrets.get("object", "id-left") == {}
    assert query(cat, "SELECT * FROM pending_secrets") == []


def test_a_secret_whose_row_is_in_is_kept_though_its_writer_died(
    cat: LocalCatalog, tmp_path: Path, dead_pid: int
) -> None:
    outside = tmp_path / "ext"
    outside.mkdir()
    cat.create_external_location("ext", str(outside))
    volume = cat.create_volume("main.ml.v", str(outside / "v"), storage_options=OPTIONS)
    assert volume.id is not None
    with cat._transaction(write=True) as conn:
        cat._record_secret(conn, volume.id)  # as if its writer had died between its row and its record
    died(cat, "pending_secrets", dead_pid)
    cat.sweep()
    assert cat._secrets.get("object", volume.id) == OPTIONS
    assert query(cat, "SELECT * FROM pending_secrets") == []


def test_a_failed_registration_removes_the_storage_and_the_secret_it_made(cat: LocalCatalog) -> None:
    location = cat._new_managed_location("tables")
    folder = made(location)
    with pytest.raises(RuntimeError, match="registration failed"):
        register(cat, location, "id-new", fail="registration failed")
    assert not folder.exists()
    assert cat._secrets.get("object", "id-new") == {}
    assert query(cat, "SELECT * FROM pending_storage") == query(cat, "SELECT * FROM pending_secrets") == []


def test_an_external_location_made_by_a_failed_call_is_removed_too(cat: LocalCatalog, tmp_path: Path) -> None:
    folder = tmp_path / "ext" / "t"
    folder.mkdir(parents=True)
    (folder / "part-0.parquet").write_bytes(b"data")
    with pytest.raises(RuntimeError), cat._cleanup_on_error(f"file://{folder}"):
        raise RuntimeError("write failed")
    assert not folder.exists() and (tmp_path / "ext").exists()


def test_a_failure_after_the_row_is_committed_keeps_the_objects_secret(cat: LocalCatalog) -> None:
    with pytest.raises(RuntimeError, match="after the commit"):
        register(cat, None, "id-in", insert="main.ml.v", fail="after the commit")
    assert cat._secrets.get("object", "id-in") == OPTIONS
    assert query(cat, "SELECT * FROM pending_secrets") == []


def test_success_leaves_what_was_made(cat: LocalCatalog) -> None:
    location = cat._new_managed_location("volumes")
    with cat._cleanup_on_error(location, secret_id="id-ok"):
        folder = made(location)
    assert folder.exists()
