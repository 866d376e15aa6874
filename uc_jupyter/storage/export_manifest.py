"""The committed manifest of a table export (pure: no I/O): its format, and which files are committed.

An export folder holds one committed manifest, ``_uc_export.json``, and the Parquet files of each
export under a hidden prefix of its own, ``.uc-export-<id>/``. The manifest is written last, in
one PUT, so readers see either the previous export whole or the new one whole; files under a
prefix that no manifest names (an upload in progress, or one killed) are never read.

An export id starts with the UTC time it began (``20261202T030500Z-1a2b3c4d``), and an export's
first write is ``<prefix>/_writer``, the stamp of its process (:func:`uc_jupyter.processes.stamp`),
so a later export can tell a leftover of a killed export from the upload of one still running beside
it: a prefix whose writer is known dead goes, and one whose writer cannot be judged (another machine)
goes once it is :data:`STALE_AFTER_S` old. Names in a manifest are single file names
(no ``/``, no ``..``), so an edited manifest cannot name a file outside its own prefix.

Example:
    >>> m = Manifest("20261202T030500Z-1a2b3c4d", "main.ml.points", 3, (ExportFile("part-00000.parquet", 812, 50),))
    >>> m.rows, m.file_keys()
    (50, ['.uc-export-20261202T030500Z-1a2b3c4d/part-00000.parquet'])
    >>> Manifest.parse(m.to_bytes(), where="/Volumes/main/ml/exports/points") == m
    True
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TypeGuard

__all__ = [
    "FORMAT",
    "MANIFEST",
    "PREFIX",
    "STALE_AFTER_S",
    "WRITER",
    "ExportFile",
    "Manifest",
    "ManifestError",
    "leftovers",
    "new_export_id",
]

MANIFEST = "_uc_export.json"  # the committed manifest, at the top of the export folder
PREFIX = ".uc-export-"  # an export's files lie under <folder>/.uc-export-<id>/
FORMAT = "uc-jupyter-export/1"
WRITER = "_writer"  # <prefix>/_writer: the stamp of the process uploading it (never a manifest's file name)
# A prefix no manifest names is a leftover once its export began this long ago; younger ones may be
# the upload of an export still running beside this one (exports take no lock: catalogs behind a
# server, and exports from several machines, share none).
STALE_AFTER_S = 6 * 3600
MAX_MANIFEST_BYTES = 16 << 20  # a manifest beyond this is not one of ours (a million files is ~80 MB)

_ID = re.compile(r"(\d{8}T\d{6}Z)-[0-9a-f]{8}")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._=-]{0,254}")  # one file name: no '/', no leading '.'


class ManifestError(ValueError):
    """An export's manifest that cannot be read as one (one line naming it and what is wrong)."""


@dataclass(frozen=True)
class ExportFile:
    """One Parquet file of an export: its name under the export's prefix, its size and its rows."""

    name: str
    size: int
    rows: int


@dataclass(frozen=True)
class Manifest:
    """What one export committed: its id, the table and Delta version it read, and its files."""

    id: str
    table: str
    table_version: int | None
    files: tuple[ExportFile, ...]

    @property
    def rows(self) -> int:
        return sum(f.rows for f in self.files)

    @property
    def prefix(self) -> str:
        """The folder (below the export folder) that holds this export's files."""
        return PREFIX + self.id

    def file_keys(self) -> list[str]:
        """The files' keys below the export folder."""
        return [f"{self.prefix}/{f.name}" for f in self.files]

    def to_bytes(self) -> bytes:
        body = {
            "format": FORMAT,
            "id": self.id,
            "table": self.table,
            "table_version": self.table_version,
            "rows": self.rows,
            "files": [{"name": f.name, "size": f.size, "rows": f.rows} for f in self.files],
        }
        return json.dumps(body, indent=1).encode() + b"\n"

    @classmethod
    def parse(cls, data: bytes, *, where: str) -> Manifest:
        """The manifest in ``data``; :class:`ManifestError` naming ``where`` (the export folder's
        /Volumes path) unless every field is as an export writes it."""

        def bad(what: str) -> ManifestError:
            return ManifestError(f"{where}/{MANIFEST} is not a valid export manifest: {what}; export the table again")

        if len(data) > MAX_MANIFEST_BYTES:
            raise bad(f"it has {len(data)} bytes")
        try:
            body = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise bad(f"not JSON ({exc})") from None
        if not isinstance(body, dict) or body.get("format") != FORMAT:
            raise bad(f"its format is not {FORMAT!r}")
        export_id, table, version, files = (
            body.get("id"),
            body.get("table"),
            body.get("table_version"),
            body.get("files"),
        )
        if not isinstance(export_id, str) or not _ID.fullmatch(export_id):
            raise bad(f"invalid id {export_id!r}")
        if not isinstance(table, str) or not table:
            raise bad(f"invalid table {table!r}")
        if version is not None and (not isinstance(version, int) or isinstance(version, bool) or version < 0):
            raise bad(f"invalid table_version {version!r}")
        if not isinstance(files, list):
            raise bad("'files' is not a list")
        parsed: list[ExportFile] = []
        for entry in files:
            if not isinstance(entry, dict):
                raise bad(f"a file entry is {entry!r}")
            name, size, rows = entry.get("name"), entry.get("size"), entry.get("rows")
            if not isinstance(name, str) or not _NAME.fullmatch(name) or ".." in name:
                raise bad(f"it names the file {name!r}, which is not a file name of its own export")
            if not _count(size) or not _count(rows):
                raise bad(f"{name}: invalid size {size!r} or rows {rows!r}")
            parsed.append(ExportFile(name, size, rows))
        if len({f.name for f in parsed}) != len(parsed):
            raise bad("it names a file twice")
        return cls(export_id, table, version, tuple(parsed))


def new_export_id(now: float | None = None, token: str = "") -> str:
    """A fresh export id: the UTC time ``now`` (seconds) and 8 hex digits (``token``, random if empty).

    Example:
        >>> new_export_id(0.0, "00c0ffee")
        '19700101T000000Z-00c0ffee'
    """
    import secrets

    moment = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(time.time() if now is None else now))
    return f"{moment}-{token or secrets.token_hex(4)}"


def leftovers(
    keys: Iterable[str],
    *,
    committed: Manifest,
    replaced: Manifest | None,
    now: float,
    stale_after: float = STALE_AFTER_S,
    dead: Collection[str] = (),
) -> list[str]:
    """The keys of an export folder (``keys``: all of them) to delete once ``committed`` is its manifest.

    Kept: the manifest, ``committed``'s files, the prefixes of exports younger than ``stale_after``
    seconds at ``now`` (they may still be uploading) unless ``dead`` names them (prefixes whose
    writer is known to have died), and other hidden entries. Deleted: the files of the export
    ``committed`` replaced (``replaced``: the manifest read before this export began), older and
    dead prefixes, and every file that is not hidden (the Parquet and marker files of an export
    made before manifests: an overwrite replaces the whole folder, as it always has).

    Example:
        >>> new = Manifest("20261202T040000Z-00000002", "t", 1, (ExportFile("p.parquet", 1, 1),))
        >>> old = Manifest("20261202T030000Z-00000001", "t", 0, (ExportFile("p.parquet", 1, 1),))
        >>> keys = [*new.file_keys(), *old.file_keys(), "_uc_export.json", "part-0.parquet", "_SUCCESS"]
        >>> leftovers(keys, committed=new, replaced=old, now=1796184000.0)
        ['.uc-export-20261202T030000Z-00000001/p.parquet', 'part-0.parquet', '_SUCCESS']
        >>> killed = ".uc-export-20261202T035900Z-00000003"  # began a minute before: young, but its writer died
        >>> leftovers([f"{killed}/_writer", f"{killed}/p.parquet"], committed=new, replaced=None, now=1796184000.0,
        ...           dead={killed})
        ['.uc-export-20261202T035900Z-00000003/_writer', '.uc-export-20261202T035900Z-00000003/p.parquet']
    """
    kept = set(committed.file_keys())
    gone: list[str] = []
    for key in keys:
        top = key.split("/", 1)[0]
        if key == MANIFEST or key in kept:
            continue
        if top in dead and top.startswith(PREFIX) and top != committed.prefix and "/" in key:
            gone.append(key)
            continue
        if top.startswith(".") and (replaced is None or top != replaced.prefix):
            started = _started(top[len(PREFIX) :]) if top.startswith(PREFIX) and "/" in key else None
            if started is None or now - started < stale_after:
                continue  # not an export's prefix, or one that may still be uploading
        gone.append(key)
    return gone


def _started(export_id: str) -> float | None:
    """When the export ``export_id`` began (UTC seconds), or None for a name that is not an id."""
    import calendar

    match = _ID.fullmatch(export_id)
    if match is None:
        return None
    return float(calendar.timegm(time.strptime(match.group(1), "%Y%m%dT%H%M%SZ")))


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
