"""Where the embedded catalog keeps storage secrets: apart from the metastore, readable by nobody else.

Storage credentials' options (keys, tokens, endpoints) and the options given to individual tables
and volumes live in ``<root>/secrets.db`` (SQLite, mode 0600, in the 0700 catalog folder), never in
the metastore's rows: no listing, ``get_*`` call, error message or ``repr`` reads this file; only
the catalog does, to open a table's or volume's storage for a caller who passed the privilege
check, and to hand a credential's own options to a metastore admin
(``storage_credential_options``, for the server's vendor). Rows are keyed by what owns them:
``("credential", name)``, or ``("object", id)`` for a table or volume (its stored id, never reused).

Writes are ordered with the metastore's so that a failure leaves at worst an unused secret, never a
securable whose secret is missing: a secret is written before the row that refers to it and deleted
after that row is gone. An object's secret is keyed by its id, not its name, because of that order:
a process dying between a drop's commit and the secret's deletion leaves the secret behind, and a
later object of the same name, made without options, must not find it. The metastore records such
ids as pending (``pending_secrets``, :mod:`uc_jupyter.catalog.embedded.pending`), so the next sweep deletes
what a dead process left. A credential's secret is keyed by name: creating a credential always
writes its secret (``{}`` for none), replacing any left behind, and a drop deletes it only while no
credential of that name exists.

Older catalogs keyed objects' secrets by name (kind ``"securable"``); :meth:`SecretStore.adopt_legacy`
moves those to their objects' ids when the catalog opens.

Example:
    >>> import tempfile
    >>> store = SecretStore(tempfile.mkdtemp())
    >>> store.put("credential", "raw", {"key": "AKIA", "secret": "s"})
    >>> store.get("credential", "raw")["key"], store.get("credential", "missing")
    ('AKIA', {})
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from uc_jupyter.sqlite_store import SqliteStore

__all__ = ["SecretKind", "SecretStore", "check_options"]

SecretKind = Literal["credential", "object"]
_LEGACY_KIND = "securable"  # objects' secrets keyed by name, before ids were stored
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS secrets (kind TEXT NOT NULL, name TEXT NOT NULL, options TEXT NOT NULL,"
    " PRIMARY KEY (kind, name))",
)


class SecretStore:
    """The secrets of the catalog under ``root`` (see the module docstring)."""

    def __init__(self, root: str | os.PathLike[str], *, busy_timeout: float = 60.0) -> None:
        path = Path(root) / "secrets.db"
        self._store = SqliteStore(
            path,
            schema=_SCHEMA,
            busy_timeout=busy_timeout,
            remedy="restore it from a backup; without it, storage credentials must be created again",
        )
        os.chmod(path, 0o600)  # also a file made by an older version, under a wider umask

    def __repr__(self) -> str:
        return "SecretStore(...)"  # nothing about what it holds

    def put(self, kind: SecretKind, name: str, options: dict[str, Any]) -> None:
        """Store (or replace) the options of ``(kind, name)``."""
        text = json.dumps(options, sort_keys=True)
        with self._store.transaction() as conn:
            conn.execute("INSERT OR REPLACE INTO secrets VALUES (?, ?, ?)", (kind, name, text))

    def get(self, kind: SecretKind, name: str) -> dict[str, Any]:
        """The options of ``(kind, name)``; ``{}`` when none were stored."""
        with self._store.transaction(write=False) as conn:
            row = conn.execute("SELECT options FROM secrets WHERE kind = ? AND name = ?", (kind, name)).fetchone()
        options: dict[str, Any] = json.loads(row[0]) if row else {}
        return options

    def delete(self, kind: SecretKind, name: str) -> None:
        """Forget the options of ``(kind, name)`` (none stored: nothing to do)."""
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM secrets WHERE kind = ? AND name = ?", (kind, name))

    def delete_many(self, kind: SecretKind, names: Sequence[str]) -> None:
        """Forget the options of each ``(kind, name)``, in one transaction (a cascading drop's)."""
        with self._store.transaction() as conn:
            conn.executemany("DELETE FROM secrets WHERE kind = ? AND name = ?", [(kind, n) for n in names])

    def legacy_keys(self) -> list[str]:
        """The object keys (``"c.s.t"``) an older version stored secrets under (usually none)."""
        with self._store.transaction(write=False) as conn:
            return [r[0] for r in conn.execute("SELECT name FROM secrets WHERE kind = ?", (_LEGACY_KIND,))]

    def adopt_legacy(self, ids_by_key: dict[str, str]) -> None:
        """Move each name-keyed object secret to the id of the object that now has that name, in one
        transaction; a secret whose name no object has is deleted (a drop that died before its
        secret went). An id that already has a secret keeps it: that one was written by this version.

        Whether a name-keyed secret was the current object's or one left by a dead drop cannot be
        told apart any more; it goes to the current object, as the older version read it.

        Example:
            >>> import contextlib, sqlite3, tempfile
            >>> root = tempfile.mkdtemp()
            >>> store = SecretStore(root)
            >>> with contextlib.closing(sqlite3.connect(f"{root}/secrets.db")) as conn, conn:  # as older versions
            ...     _ = conn.execute("INSERT INTO secrets VALUES (?, ?, ?)", ("securable", "c.s.v", '{"key": "k"}'))
            >>> store.legacy_keys()
            ['c.s.v']
            >>> store.adopt_legacy({"c.s.v": "id-1"})
            >>> store.get("object", "id-1"), store.legacy_keys()
            ({'key': 'k'}, [])
        """
        with self._store.transaction() as conn:
            rows = conn.execute("SELECT name, options FROM secrets WHERE kind = ?", (_LEGACY_KIND,)).fetchall()
            for name, options in rows:
                if name in ids_by_key:
                    conn.execute("INSERT OR IGNORE INTO secrets VALUES ('object', ?, ?)", (ids_by_key[name], options))
            conn.execute("DELETE FROM secrets WHERE kind = ?", (_LEGACY_KIND,))


def check_options(options: object, what: str) -> dict[str, Any]:
    """``options`` when it is a dict of storage options with string keys that JSON can hold, else a
    one-line TypeError naming ``what`` (never the values: they may be secrets).

    Example:
        >>> check_options({"key": "k"}, "credential raw")
        {'key': 'k'}
        >>> check_options([("key", "k")], "credential raw")
        Traceback (most recent call last):
        TypeError: storage_options of credential raw must be a dict of option names to values, got list
    """
    if options is None:
        return {}
    if not isinstance(options, dict) or not all(isinstance(k, str) and k for k in options):
        got = type(options).__name__ if not isinstance(options, dict) else "a dict with non-string keys"
        raise TypeError(f"storage_options of {what} must be a dict of option names to values, got {got}")
    try:
        json.dumps(options)
    except (TypeError, ValueError) as exc:
        bad = sorted(k for k, v in options.items() if not _jsonable(v))
        raise TypeError(
            f"storage_options of {what}: option {', '.join(bad) or '?'} is not a plain value "
            "(strings, numbers, booleans, lists and dicts of them)"
        ) from exc
    return dict(options)


def _jsonable(value: object) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True
