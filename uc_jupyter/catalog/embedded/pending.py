"""Managed storage that no committed row owns yet (a create under way) or any more (a drop under way),
and the sweep that removes what a process that died half-way left.

Managed storage is recorded as pending *before* it is made, and the record goes in the same
transaction as the row that owns it (or, for a drop, after its files are gone): so at any moment
every folder under ``storage/`` is owned by a row, recorded as pending by a live process, or left
over, and the sweep can tell which.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> LocalCatalog(tempfile.mkdtemp()).sweep()
    []
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.embedded.metastore import Metastore
from uc_jupyter.catalog.embedded.rows import now
from uc_jupyter.processes import alive
from uc_jupyter.storage import urls as st

if TYPE_CHECKING:
    pass

__all__ = ["PENDING_SECRETS_SQL", "PendingStorage"]

log = logging.getLogger("uc_jupyter.catalog.embedded.local")

# Tables' and volumes' secrets (secrets.db, a second database: no transaction spans both) that no
# committed row owns yet or any more: a create with options between its secret and its row, a drop
# between its commit and its secret's deletion. A dead process's entries are swept, as its storage.
PENDING_SECRETS_SQL = """
CREATE TABLE IF NOT EXISTS pending_secrets (
    id TEXT PRIMARY KEY,               -- the object's id: its secret's key in secrets.db
    pid INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
"""


class PendingStorage(Metastore):
    """The pending-storage half of :class:`uc_jupyter.catalog.embedded.local.LocalCatalog`."""

    _clock: Callable[[], float]  # epoch seconds; injected so that tests own time
    _staging_ttl: float  # seconds a staging table waits for its registration

    def sweep(self) -> list[str]:
        """Remove managed storage that no row owns: what a process that died during a create or a drop
        left (recorded as pending), expired staging tables (:mod:`uc_jupyter.catalog.embedded.staging`), and
        folders under ``storage/`` that neither a row nor a pending or staging record knows; and the
        secrets such a process left (see PENDING_SECRETS_SQL). Runs when the catalog is opened;
        returns the locations removed."""
        # The folders first, then the records: a folder made after this listing is not looked at, and
        # one made before it was recorded as pending before it was made.
        on_disk = [
            st.normalise_location(str(entry))
            for kind in ("tables", "volumes")
            for entry in _subfolders(self.root / "storage" / kind)
        ]
        removed: list[str] = []
        with self._transaction(write=True) as conn:
            owned = {r[0] for r in conn.execute("SELECT storage_location FROM securables WHERE managed = 1")}
            pending = conn.execute("SELECT location, pid FROM pending_storage").fetchall()
            dead = [r["location"] for r in pending if not alive(r["pid"])]
            for location in dead:
                conn.execute("DELETE FROM pending_storage WHERE location = ?", (location,))
            # Staging tables (uc_jupyter.catalog.embedded.staging) are pending storage whose writer is a remote
            # client: a deadline says when it is given up, where a process id cannot.
            staging = conn.execute("SELECT location, expires_at FROM staging_tables").fetchall()
            expired = [r["location"] for r in staging if r["expires_at"] <= self._clock()]
            for location in expired:
                conn.execute("DELETE FROM staging_tables WHERE location = ?", (location,))
            # Secrets a dead process's create or drop left: ids no row has (a create records its id
            # before its secret and drops the record with its row's insert).
            left = [
                r["id"] for r in conn.execute("SELECT id, pid FROM pending_secrets").fetchall() if not alive(r["pid"])
            ]
            orphaned = [i for i in left if not conn.execute("SELECT 1 FROM securables WHERE id = ?", (i,)).fetchone()]
        self._forget_secrets(orphaned, records=left)
        known = owned | {r["location"] for r in pending} | {r["location"] for r in staging}
        gone = [*dead, *expired]
        unowned = [*(loc for loc in gone if loc not in owned), *(loc for loc in on_disk if loc not in known)]
        for location in unowned:
            with contextlib.suppress(OSError):
                st.remove_location(location)
                removed.append(location)
        if removed:
            log.warning("removed %d unowned managed storage folder(s) under %s", len(removed), self.root / "storage")
        return removed

    def _sweep_expired_staging(self) -> None:
        """Remove expired staging tables and their storage: the part of :meth:`sweep` worth doing
        before each new staging table (an indexed read; no listing of folders)."""
        with self._transaction(write=True) as conn:
            expired = [
                r[0]
                for r in conn.execute("SELECT location FROM staging_tables WHERE expires_at <= ?", (self._clock(),))
            ]
            for location in expired:
                conn.execute("DELETE FROM staging_tables WHERE location = ?", (location,))
                self._record_pending(conn, location)  # until its files are gone, as for a drop
        for location in expired:
            self._remove_pending(location)

    def _new_managed_location(self, kind: str) -> str:
        """A fresh location under ``storage/<kind>``, recorded as pending before anything is made there."""
        location = st.normalise_location(str(self.root / "storage" / kind / uuid.uuid4().hex))
        with self._transaction(write=True) as conn:
            self._record_pending(conn, location)
        return location

    @staticmethod
    def _record_secret(conn: sqlite3.Connection, object_id: str) -> None:
        """Record that the secret of ``object_id`` may be left without a row (see PENDING_SECRETS_SQL)."""
        conn.execute("INSERT OR REPLACE INTO pending_secrets VALUES (?, ?, ?)", (object_id, os.getpid(), now()))

    def _put_secret(self, object_id: str, options: dict[str, Any]) -> None:
        """Store a new object's secret before its row: recorded first, so a process dying before the
        row is in leaves it to the sweep (the row's insert drops the record)."""
        with self._transaction(write=True) as conn:
            self._record_secret(conn, object_id)
        self._secrets.put("object", object_id, options)

    def _forget_secrets(self, ids: Sequence[str], *, records: Sequence[str] | None = None) -> None:
        """Delete the secrets of ``ids``, then the pending records of ``records`` (default: ``ids``);
        a failure keeps the records for a sweep."""
        records = ids if records is None else records
        if ids:
            self._secrets.delete_many("object", ids)
        if records:
            with self._transaction(write=True) as conn:
                conn.executemany("DELETE FROM pending_secrets WHERE id = ?", [(i,) for i in records])

    @staticmethod
    def _record_pending(conn: sqlite3.Connection, location: str) -> None:
        conn.execute("INSERT OR REPLACE INTO pending_storage VALUES (?, ?, ?)", (location, os.getpid(), now()))

    def _remove_pending(self, location: str) -> None:
        """Delete pending managed storage, then its record (a failure keeps the record for a sweep)."""
        try:
            st.remove_location(location)
        except OSError as exc:
            log.warning("could not delete the managed storage %s: %s", location, exc)
            return
        with self._transaction(write=True) as conn:
            conn.execute("DELETE FROM pending_storage WHERE location = ?", (location,))

    @contextlib.contextmanager
    def _cleanup_on_error(
        self,
        location: str | None,
        options: dict[str, Any] | None = None,
        *,
        secret_id: str | None = None,
    ) -> Iterator[None]:
        """When registering a new object fails: remove the storage this call created at ``location`` and
        the secret it stored under the new object's id ``secret_id``."""
        try:
            yield
        except BaseException:
            if secret_id is not None:
                with self._transaction() as conn:
                    registered = conn.execute("SELECT 1 FROM securables WHERE id = ?", (secret_id,)).fetchone()
                # A failure after the commit: the object keeps its secret (its record went with its row).
                self._forget_secrets([] if registered else [secret_id], records=[secret_id])
            if location is not None:
                if location.startswith(st.normalise_location(str(self.root / "storage"))):
                    self._remove_pending(location)
                else:
                    with contextlib.suppress(OSError):
                        st.remove_location(location, options)
            raise


def _subfolders(folder: Path) -> list[Path]:
    try:
        return [Path(entry.path) for entry in os.scandir(folder) if entry.is_dir(follow_symlinks=False)]
    except FileNotFoundError:
        return []
