"""Where the embedded catalog keeps storage secrets: apart from the metastore, readable by nobody else.

Storage credentials' options (keys, tokens, endpoints) and the options given to individual tables
and volumes live in ``<root>/secrets.db`` (SQLite, mode 0600, in the 0700 catalog folder), never in
the metastore's rows: no listing, ``get_*`` call, error message or ``repr`` reads this file; only
the catalog does, to open a table's or volume's storage for a caller who passed the privilege
check. Rows are keyed by what owns them: ``("credential", name)`` or ``("securable", "c.s.t")``.

Writes are ordered with the metastore's so that a failure leaves at worst an unused secret, never a
securable whose secret is missing: a secret is written before the row that refers to it and deleted
after that row is gone.

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
from pathlib import Path
from typing import Any, Literal

from uc_jupyter.sqlite_store import SqliteStore

__all__ = ["SecretKind", "SecretStore", "check_options"]

SecretKind = Literal["credential", "securable"]
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
        with self._store.transaction() as conn:
            conn.execute("DELETE FROM secrets WHERE kind = ? AND name = ?", (kind, name))


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
