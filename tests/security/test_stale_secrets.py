"""No object reads a secret it was not given, and a dead process leaves no secret behind.

A drop commits its rows and only then deletes the object's secret (``secrets.db`` is a second
database); a create writes the secret before its row. Secrets of tables and volumes are keyed by the
object's id, never reused, so the next object of the same name, made without options, finds none; and
the ids are recorded as pending in the metastore, so the next opening sweeps what a dead process left.
The crashes are real: a second process is held at a database's write lock (the test holds it) and
killed there. Also: a credential's raw options are returned to metastore admins only.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog import NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.secrets import SecretStore
from uc_jupyter.testing.waits import wait_until

OLD = {"key": "AKIA-OLD-OWNER", "secret": "old-owners-secret"}
# A second process: opens the catalog, says so, waits for a line, then runs argv[2] (with ``cat``).
_CHILD = """
import sys
from uc_jupyter.catalog.embedded.local import LocalCatalog
cat = LocalCatalog(sys.argv[1])
print("open", flush=True)
sys.stdin.readline()
exec(sys.argv[2])
"""


@pytest.fixture
def home(tmp_path: Path) -> Path:
    cat = LocalCatalog(tmp_path / "home")
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    (tmp_path / "ext").mkdir()
    cat.create_external_location("ext", str(tmp_path / "ext"))
    return cat.root


@contextlib.contextmanager
def write_locked(database: Path) -> Iterator[None]:
    """Hold ``database``'s write lock: a writer in another process waits there (60 s busy timeout)."""
    conn = sqlite3.connect(database, isolation_level=None)
    try:
        conn.execute("BEGIN IMMEDIATE")
        yield
    finally:
        conn.execute("ROLLBACK")
        conn.close()


def query(database: Path, sql: str, *args: str) -> list[tuple[object, ...]]:
    with contextlib.closing(sqlite3.connect(database)) as conn:
        return conn.execute(sql, args).fetchall()


class SecondProcess:
    """``code`` run in a second process on ``home`` (with ``cat``, its LocalCatalog) once go() is called."""

    def __init__(self, home: Path, code: str) -> None:
        self.child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(home), code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        assert self.child.stdout is not None
        assert self.child.stdout.readline() == "open\n"

    def go(self) -> None:
        assert self.child.stdin is not None
        self.child.stdin.write("go\n")
        self.child.stdin.flush()

    def wait_for(self, condition: Callable[[], bool]) -> None:
        wait_until(
            lambda: condition() or self.child.poll() is not None, "the second process to get there", 60, interval_s=0.01
        )
        assert condition(), "the second process ended before it got there"

    def kill(self) -> None:
        """SIGKILL it where it waits: it was to die there, not finish."""
        assert self.child.poll() is None, "it finished instead of waiting"
        os.kill(self.child.pid, signal.SIGKILL)
        self.child.wait(timeout=30)

    def close(self) -> None:
        if self.child.poll() is None:
            self.child.kill()
            self.child.wait()


def die_mid_drop(home: Path, method: str, name: str) -> None:
    """Drop ``name`` in a second process and kill it after its rows are committed, before its secret goes."""
    child = SecondProcess(home, f"cat.{method}({name!r})")
    try:
        with write_locked(home / "secrets.db"):
            child.go()
            child.wait_for(lambda: not query(home / "metastore.db", "SELECT 1 FROM securables WHERE key = ?", name))
            child.kill()
    finally:
        child.close()


@pytest.mark.parametrize("kind", ["volume", "table"])
def test_a_secret_a_dead_drop_left_is_not_the_next_same_named_objects(home: Path, kind: str) -> None:
    cat = LocalCatalog(home)
    location = str(home.parent / "ext" / "first")
    if kind == "volume":
        old_id = cat.create_volume("main.ml.x", location, storage_options=OLD).id
    else:
        old_id = cat.create_table("main.ml.x", pa.table({"a": [1]}), storage_location=location, storage_options=OLD).id
    assert old_id is not None
    die_mid_drop(home, f"drop_{kind}", "main.ml.x")
    assert SecretStore(home).get("object", old_id) == OLD  # what the dead drop left behind

    again = LocalCatalog(home)  # a later process: the same name, no options
    assert SecretStore(home).get("object", old_id) == {}  # and its opening swept what the dead drop left
    if kind == "volume":
        again.create_volume("main.ml.x")
        assert again.resolve_volume_path("/Volumes/main/ml/x").storage_options == {}
    else:
        again.create_table("main.ml.x", pa.table({"a": [2]}))
        assert again.resolve_table("main.ml.x").storage_options == {}


def test_a_secret_a_dead_create_left_is_swept_and_never_read(home: Path) -> None:
    child = SecondProcess(home, f"cat.create_volume('main.ml.x', storage_options={OLD!r})")
    try:
        with contextlib.ExitStack() as locks:
            with write_locked(home / "secrets.db"):
                child.go()  # it records the new id as pending, then waits to write its secret
                child.wait_for(lambda: bool(query(home / "metastore.db", "SELECT 1 FROM pending_secrets")))
                locks.enter_context(write_locked(home / "metastore.db"))
            # Its secret goes in; then it waits to insert its row, and dies there.
            child.wait_for(lambda: bool(query(home / "secrets.db", "SELECT 1 FROM secrets WHERE kind = 'object'")))
            child.kill()
    finally:
        child.close()
    cat = LocalCatalog(home)
    assert query(home / "secrets.db", "SELECT name FROM secrets WHERE kind = 'object'") == []
    cat.create_volume("main.ml.x")
    assert cat.resolve_volume_path("/Volumes/main/ml/x").storage_options == {}


def test_a_name_keyed_secret_an_older_versions_dead_drop_left_is_deleted_on_open(home: Path) -> None:
    with contextlib.closing(sqlite3.connect(home / "secrets.db")) as conn, conn:  # as older versions keyed it
        conn.execute("INSERT INTO secrets VALUES ('securable', 'main.ml.x', ?)", ('{"key": "AKIA-OLD-OWNER"}',))
    cat = LocalCatalog(home)
    cat.create_volume("main.ml.x")
    assert cat.resolve_volume_path("/Volumes/main/ml/x").storage_options == {}
    with contextlib.closing(sqlite3.connect(home / "secrets.db")) as conn:
        assert conn.execute("SELECT count(*) FROM secrets WHERE kind = 'securable'").fetchone()[0] == 0


def test_an_older_homes_name_keyed_secret_stays_with_its_object(home: Path) -> None:
    cat = LocalCatalog(home)
    info = cat.create_volume("main.ml.x", str(home.parent / "ext" / "x"), storage_options={"auto_mkdir": True})
    with contextlib.closing(sqlite3.connect(home / "secrets.db")) as conn, conn:  # re-keyed as older versions did
        conn.execute("UPDATE secrets SET kind = 'securable', name = 'main.ml.x' WHERE name = ?", (info.id,))
    assert LocalCatalog(home).resolve_volume_path("/Volumes/main/ml/x").storage_options == {"auto_mkdir": True}


def test_a_credential_made_again_does_not_inherit_a_left_secret(home: Path) -> None:
    cat = LocalCatalog(home)
    cat.create_storage_credential("lake", OLD)
    cat.drop_storage_credential("lake")
    SecretStore(home).put("credential", "lake", OLD)  # as a drop that died before its secret went leaves it
    cat.create_storage_credential("lake")
    assert cat.storage_credential_options("lake") == {}


def test_a_credentials_raw_options_are_for_metastore_admins_only(home: Path) -> None:
    cat = LocalCatalog(home)
    cat.create_principal("alice")
    cat.grant("metastore", "CREATE STORAGE CREDENTIAL", "alice", kind="metastore")
    cat.create_storage_credential("lake", {**OLD, "vending": "static"})
    with cat.as_principal("alice"):
        with pytest.raises(NotFound, match="storage credential lake does not exist"):
            cat.storage_credential_options("lake")  # not even its name, to one who cannot see it
        cat.create_storage_credential("hers", {"key": "hers"})
        with pytest.raises(PermissionDenied, match="alice lacks METASTORE ADMIN"):
            cat.storage_credential_options("hers")  # owning a credential is not reading its keys back
    cat.grant("lake", "CREATE EXTERNAL LOCATION", "alice", kind="credential")
    with cat.as_principal("alice"), pytest.raises(PermissionDenied, match="alice lacks METASTORE ADMIN"):
        cat.storage_credential_options("lake")  # nor is using it
    assert cat.storage_credential_options("lake") == {**OLD, "vending": "static"}
    assert cat.storage_credential_options("hers") == {"key": "hers"}
