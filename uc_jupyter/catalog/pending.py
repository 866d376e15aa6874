"""Managed storage that no committed row owns yet (a create under way) or any more (a drop under way),
and the sweep that removes what a process that died half-way left.

Managed storage is recorded as pending *before* it is made, and the record goes in the same
transaction as the row that owns it (or, for a drop, after its files are gone): so at any moment
every folder under ``storage/`` is owned by a row, recorded as pending by a live process, or left
over, and the sweep can tell which.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.local import LocalCatalog
    >>> LocalCatalog(tempfile.mkdtemp()).sweep()
    []
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog import storage as st
from uc_jupyter.catalog._rows import (
    key,
    now,
)
from uc_jupyter.catalog.metastore import Metastore
from uc_jupyter.catalog.names import SecurableName
from uc_jupyter.processes import alive

if TYPE_CHECKING:
    pass

__all__ = ["PendingStorage"]

log = logging.getLogger("uc_jupyter.catalog.local")


class PendingStorage(Metastore):
    """The pending-storage half of :class:`uc_jupyter.catalog.local.LocalCatalog`."""

    def sweep(self) -> list[str]:
        """Remove managed storage that no row owns: what a process that died during a create or a drop
        left (recorded as pending), and folders under ``storage/`` that neither a row nor a pending
        record knows. Runs when the catalog is opened; returns the locations removed."""
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
        known = owned | {r["location"] for r in pending}
        unowned = [*(loc for loc in dead if loc not in owned), *(loc for loc in on_disk if loc not in known)]
        for location in unowned:
            with contextlib.suppress(OSError):
                st.remove_location(location)
                removed.append(location)
        if removed:
            log.warning("removed %d unowned managed storage folder(s) under %s", len(removed), self.root / "storage")
        return removed

    def _new_managed_location(self, kind: str) -> str:
        """A fresh location under ``storage/<kind>``, recorded as pending before anything is made there."""
        location = st.normalise_location(str(self.root / "storage" / kind / uuid.uuid4().hex))
        with self._transaction(write=True) as conn:
            self._record_pending(conn, location)
        return location

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
        self, location: str | None, name: SecurableName, options: dict[str, Any] | None = None
    ) -> Iterator[None]:
        """When registering ``name`` fails: remove the storage this call created at ``location`` and
        the secret it stored."""
        try:
            yield
        except BaseException:
            with self._transaction() as conn:
                registered = self._row(conn, name) is not None
            if not registered:  # another process's entry of that name keeps its secret
                self._secrets.delete("securable", key(name))
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
