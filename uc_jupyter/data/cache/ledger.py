"""The cache's index (SQLite, WAL): what is resident and what it must look like, who downloads what,
and the byte ledger. Every function here runs inside a transaction its caller holds.

Tables:

- ``entries``: one row per resident object: key, size, group, path below ``objects/``, the checksum
  and fingerprint recorded when it was put in place (see :mod:`uc_jupyter.data.cache.integrity`;
  NULL for an object adopted without them, which is checked at its first hit) and when it was
  downloaded.
- ``groups``: when each group (one dataset's listing) was last used, by a pass or a download.
  Eviction of other groups' files goes by it: a pass uses a whole listing, and recording the use
  of every file hit would cost a write per hit (a hit reads no index at all).
- ``reservations``: room taken for downloads under way and for streamed files in use; a resident
  reservation also claims its key (one downloader per key, across processes). Ids are random, so an
  id a process kept from a lost index never names another process's reservation in the new one.
- ``ledger``: resident and reserved bytes, evictions and the entry count in one row: admission and
  stats read one row instead of summing tables. The same bytes as the disk counts them
  (:func:`~uc_jupyter.data.cache.disk.charge`: whole blocks of the file system's ``block``, and each
  file's share of folder and index) are kept beside them, for budgets that are the disk.

Example:
    >>> import sqlite3
    >>> conn = sqlite3.connect(":memory:")
    >>> for statement in SCHEMA:
    ...     _ = conn.execute(statement)
    >>> create_ledger(conn, block=4096), create_ledger(conn, block=4096)
    (True, False)
    >>> enter(conn, "k" * 64, 5, "g", "kk/" + "k" * 64, b"sum", (5, 1, 2, 3), used=0.0) is None  # no entry before
    True
    >>> records(conn, ["k" * 64, "missing"])["k" * 64].fingerprint
    (5, 1, 2, 3)
"""

from __future__ import annotations

import contextlib
import os
import random
import sqlite3
import stat
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from uc_jupyter.data.cache.disk import PER_FILE, charge
from uc_jupyter.data.cache.integrity import XATTR, Fingerprint
from uc_jupyter.data.cache.layout import scan_objects
from uc_jupyter.data.cache.pins import delete_unpinned

# The checksum of an object a rebuild found pinned by a reader: no digest equals it, so its next hit
# removes it and downloads it again (nothing proves its bytes once the index holding its checksum is gone).
UNPROVEN = b"unproven"

__all__ = [
    "SCHEMA",
    "UNPROVEN",
    "Finished",
    "Freed",
    "Record",
    "Totals",
    "block_of",
    "cancel",
    "commit",
    "create_ledger",
    "drop",
    "enter",
    "evict",
    "forget_resident",
    "new_reservation",
    "others_in_flight",
    "rebuild",
    "reclaim",
    "records",
    "refresh",
    "rows_for_keys",
    "stamps",
    "totals",
    "use_groups",
]

SCHEMA = (
    # A rowid table with the key indexed: rows are appended in rowid order and an insert writes a
    # short index entry, where a WITHOUT ROWID table keyed by a random 64-character key, with an
    # index of the fingerprints beside it, wrote whole rows at random places (10-15 us of CPU more
    # per download, measured). Hits read the seal on the file itself; the index's record is their
    # fallback (file systems without extended attributes).
    "CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, size INTEGER NOT NULL, grp TEXT NOT NULL,"
    " path TEXT NOT NULL, sum BLOB, ino INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, used REAL NOT NULL)",
    "CREATE INDEX IF NOT EXISTS entries_grp ON entries(grp, used)",
    # resident = 1: the download will be kept, and claims its key (one downloader per key).
    "CREATE TABLE IF NOT EXISTS reservations (id INTEGER PRIMARY KEY, pid INTEGER NOT NULL,"
    " key TEXT NOT NULL, size INTEGER NOT NULL, resident INTEGER NOT NULL, grp TEXT NOT NULL, path TEXT NOT NULL)",
    "CREATE INDEX IF NOT EXISTS reservations_key ON reservations(key)",
    "CREATE TABLE IF NOT EXISTS groups (grp TEXT PRIMARY KEY, used REAL NOT NULL) WITHOUT ROWID",
    # entries: the count of the entries table, kept here because counting the table reads all of
    # it, and every new worker process (a fresh connection) would read it again for its stats.
    # disk_*: the same bytes as the disk takes them (disk.charge with the file system's block).
    "CREATE TABLE IF NOT EXISTS ledger (id INTEGER PRIMARY KEY CHECK (id = 1),"
    " resident INTEGER NOT NULL, reserved INTEGER NOT NULL, evictions INTEGER NOT NULL, entries INTEGER NOT NULL,"
    " block INTEGER NOT NULL, disk_resident INTEGER NOT NULL, disk_reserved INTEGER NOT NULL)",
)
_PARAMETERS = 500  # keys per query: SQLite's limit on bound parameters is 999 in older builds
_PAGE = 256  # eviction candidates read at a time: eviction usually needs the first few

# A row of the reservations table: id, pid, key, size, resident, grp, path.
Reservation = tuple[int, int, str, int, int, str, str]
# What a hit compares with its fstat: key, inode, mtime and ctime in ns (None: no fingerprint
# recorded), last use. The size is the listed one, which the key encodes.
Stamp = tuple[str, int | None, int | None, int | None, float]


class Record(NamedTuple):
    """What an object must look like, as the index (or this process, until it is written) records it."""

    size: int
    checksum: bytes | None  # None: adopted without one, taken at the first hit
    fingerprint: Fingerprint | None
    used: float


class Totals(NamedTuple):
    """The ledger's bytes: listed, and as the disk takes them (see :func:`~uc_jupyter.data.cache.disk.charge`)."""

    resident: int
    reserved: int
    disk_resident: int
    disk_reserved: int
    block: int


class Finished(NamedTuple):
    """A download put in place and not yet entered into the index (it is entered in batches)."""

    reservation: int
    key: str
    size: int
    group: str
    relative: str
    record: Record


def create_ledger(conn: sqlite3.Connection, *, block: int) -> bool:
    """Make the ledger's row for a file system of allocation unit ``block``; True when there was none
    (a new or lost index)."""
    if conn.execute("SELECT 1 FROM ledger").fetchone() is not None:
        return False
    conn.execute("INSERT INTO ledger VALUES (1, 0, 0, 0, 0, ?, 0, 0)", (block,))
    return True


def block_of(conn: sqlite3.Connection) -> int:
    """The allocation unit the ledger charges files in."""
    return int(conn.execute("SELECT block FROM ledger").fetchone()[0])


def others_in_flight(conn: sqlite3.Connection, pid: int) -> bool:
    """Does any process but ``pid`` hold a reservation (a download under way, a file streamed past
    a full cache and still in use)?"""
    return conn.execute("SELECT 1 FROM reservations WHERE pid != ? LIMIT 1", (pid,)).fetchone() is not None


def totals(conn: sqlite3.Connection) -> Totals:
    """Resident and reserved bytes, listed and as the disk takes them."""
    row = conn.execute("SELECT resident, reserved, disk_resident, disk_reserved, block FROM ledger").fetchone()
    return Totals(*(int(value) for value in row))


def stamps(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Stamp]:
    """What hits on ``keys`` compare with (those that have an entry): the few columns a hit needs,
    as plain tuples, since this runs for every window of hits."""
    cursor = conn.cursor()
    cursor.row_factory = None
    query = "SELECT key, ino, mtime_ns, ctime_ns, used FROM entries WHERE key IN ({})"
    return {row[0]: row for row in rows_for_keys(cursor, query, keys)}


def records(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Record]:
    """The records of those ``keys`` that have an entry."""
    query = "SELECT key, size, sum, ino, mtime_ns, ctime_ns, used FROM entries WHERE key IN ({})"
    return {
        key: Record(size, digest, None if ino is None else (size, ino, mtime, ctime), used)
        for key, size, digest, ino, mtime, ctime, used in rows_for_keys(conn, query, keys)
    }


def rows_for_keys(conn: sqlite3.Connection | sqlite3.Cursor, query: str, keys: Sequence[str]) -> Iterator[Any]:
    """The rows of ``query`` (whose ``{}`` stands for the ``IN`` list) for all of ``keys``, asked in
    chunks that stay within SQLite's limit on bound parameters."""
    for start in range(0, len(keys), _PARAMETERS):
        part = keys[start : start + _PARAMETERS]
        yield from conn.execute(query.format(",".join("?" * len(part))), part)


def enter(
    conn: sqlite3.Connection,
    key: str,
    size: int,
    group: str,
    relative: str,
    checksum: bytes | None,
    fingerprint: Fingerprint | None,
    *,
    used: float,
) -> int | None:
    """Insert an entry (replacing one of the same key); return the size of the entry replaced, None
    when the key is new (for the ledger, which the caller updates)."""
    old = conn.execute("SELECT size FROM entries WHERE key = ?", (key,)).fetchone()
    ino, mtime, ctime = fingerprint[1:] if fingerprint is not None else (None, None, None)
    conn.execute(
        "INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (key, size, group, relative, checksum, ino, mtime, ctime, used),
    )
    return None if old is None else int(old[0])


def commit(conn: sqlite3.Connection, finished: Sequence[Finished]) -> None:
    """Enter finished downloads and give up their reservations (and claims); a download is a use
    of its group."""
    moved = released = new = disk_moved = disk_released = 0
    block = block_of(conn)
    use_groups(conn, {done.group: done.record.used for done in finished})
    for done in finished:
        if conn.execute("DELETE FROM reservations WHERE id = ?", (done.reservation,)).rowcount:
            released += done.size
            disk_released += charge(done.size, block=block)
        record = done.record
        old = enter(
            conn, done.key, done.size, done.group, done.relative, record.checksum, record.fingerprint, used=record.used
        )
        moved += done.size - (old or 0)
        disk_moved += charge(done.size, block=block) - (0 if old is None else charge(old, block=block))
        new += old is None
    if finished:
        conn.execute(
            "UPDATE ledger SET resident = resident + ?, reserved = reserved - ?, entries = entries + ?,"
            " disk_resident = disk_resident + ?, disk_reserved = disk_reserved - ?",
            (moved, released, new, disk_moved, disk_released),
        )


def new_reservation(conn: sqlite3.Connection, key: str, size: int, *, resident: bool, group: str, relative: str) -> int:
    """Reserve ``size`` bytes for this process (the caller adds them to the ledger); its id."""
    rid = random.getrandbits(62)
    conn.execute(
        "INSERT INTO reservations (id, pid, key, size, resident, grp, path) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (rid, os.getpid(), key, size, int(resident), group, relative),
    )
    return rid


def cancel(conn: sqlite3.Connection, reservations: Iterable[int]) -> None:
    """Give back reservations (those still there)."""
    freed = disk_freed = count = 0
    block = block_of(conn)
    for rid in reservations:
        row = conn.execute("SELECT size FROM reservations WHERE id = ?", (rid,)).fetchone()
        if row is not None:
            conn.execute("DELETE FROM reservations WHERE id = ?", (rid,))
            freed += row[0]
            disk_freed += charge(row[0], block=block)
            count += 1
    if count:
        conn.execute(
            "UPDATE ledger SET reserved = reserved - ?, disk_reserved = disk_reserved - ?", (freed, disk_freed)
        )


def use_groups(conn: sqlite3.Connection, used: dict[str, float]) -> None:
    """Record when these groups were last used (never moving the time back)."""
    conn.executemany(
        "INSERT INTO groups VALUES (?, ?) ON CONFLICT (grp) DO UPDATE SET used = max(used, excluded.used)",
        list(used.items()),
    )


def refresh(conn: sqlite3.Connection, checked: dict[str, tuple[bytes | None, bytes, Fingerprint]]) -> None:
    """Record new fingerprints (and checksums taken at a first hit) of objects whose content was
    checked again: ``key -> (checksum recorded before, checksum, fingerprint)``. A row whose checksum
    changed meanwhile (the object was replaced) is left alone."""
    conn.executemany(
        "UPDATE entries SET sum = ?, ino = ?, mtime_ns = ?, ctime_ns = ? WHERE key = ? AND sum IS ?",
        [(digest, fp[1], fp[2], fp[3], key, before) for key, (before, digest, fp) in checked.items()],
    )


def drop(conn: sqlite3.Connection, key: str, checksum: bytes | None) -> None:
    """Remove the entry of an object found damaged (if it is still the one checked) from the ledger."""
    row = conn.execute("SELECT size FROM entries WHERE key = ? AND sum IS ?", (key, checksum)).fetchone()
    if row is not None:
        conn.execute("DELETE FROM entries WHERE key = ?", (key,))
        forget_resident(conn, int(row[0]))


def forget_resident(conn: sqlite3.Connection, size: int) -> None:
    """Take a resident entry of ``size`` bytes, just deleted, off the ledger."""
    conn.execute(
        "UPDATE ledger SET resident = resident - ?, entries = entries - 1,"
        " disk_resident = disk_resident - ((? + block - 1) / block * block + ?)",
        (size, size, PER_FILE),
    )


def reclaim(conn: sqlite3.Connection, row: Reservation, base: str, *, now: float) -> bool:
    """Drop a dead process's reservation, and adopt its download if it was complete and in place
    (its record died with the process: the object is entered without checksum, checked at its first
    hit). True when it was adopted."""
    rid, pid, key, size, resident, group, relative = row
    complete = False
    if resident and relative:
        with contextlib.suppress(FileNotFoundError):
            found = os.lstat(f"{base}/objects/{relative}")
            complete = stat.S_ISREG(found.st_mode) and found.st_size == size
    if not complete:  # its partial download must go before its bytes count as free
        prefix = f"{key}.{pid}."
        for tmp in os.scandir(f"{base}/tmp"):
            if tmp.name.startswith(prefix):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp.path)
    conn.execute("DELETE FROM reservations WHERE id = ?", (rid,))
    disk = charge(size, block=block_of(conn))
    conn.execute("UPDATE ledger SET reserved = reserved - ?, disk_reserved = disk_reserved - ?", (size, disk))
    if not complete or conn.execute("SELECT 1 FROM entries WHERE key = ?", (key,)).fetchone() is not None:
        return False
    enter(conn, key, size, group, relative, None, None, used=now)
    conn.execute(
        "UPDATE ledger SET resident = resident + ?, entries = entries + 1, disk_resident = disk_resident + ?",
        (size, disk),
    )
    return True


class Freed(NamedTuple):
    """What an eviction freed: listed bytes, the same as the disk took them, and files."""

    bytes: int
    disk_bytes: int
    files: int


def evict(
    conn: sqlite3.Connection, base: str, query: str, parameters: Sequence[object], *, need: int | None, disk: bool
) -> Freed:
    """Delete unpinned objects that ``query`` (``SELECT key, size, path``, in eviction order) names,
    until ``need`` bytes are freed (all when None; as the disk takes them when ``disk``)."""
    freed = disk_freed = evicted = kept = 0
    block = block_of(conn)
    while need is None or (disk_freed if disk else freed) < need:
        page = conn.execute(f"{query} LIMIT {_PAGE} OFFSET {kept}", parameters).fetchall()
        for key, size, relative in page:
            if need is not None and (disk_freed if disk else freed) >= need:
                break
            if not delete_unpinned(f"{base}/objects/{relative}"):
                kept += 1  # pinned by a consumer: deleting it would free nothing
                continue
            conn.execute("DELETE FROM entries WHERE key = ?", (key,))
            freed += size
            disk_freed += charge(size, block=block)
            evicted += 1
        if len(page) < _PAGE:
            break
    if evicted:
        conn.execute(
            "UPDATE ledger SET resident = resident - ?, evictions = evictions + ?, entries = entries - ?,"
            " disk_resident = disk_resident - ?",
            (freed, evicted, evicted, disk_freed),
        )
    return Freed(freed, disk_freed, evicted)


def rebuild(conn: sqlite3.Connection, base: str, *, now: float) -> tuple[int, int]:
    """A new, empty index (a lost or damaged one was replaced) over an empty ``objects/``: the
    checksums that proved each object's bytes died with the old index, and a file of the right size
    is no proof (one overwritten or planted there would be served), so every object found is
    removed and downloads again when next read. One a reader still holds pinned stays for it, entered
    :data:`UNPROVEN` (in no group, evictable once cold): its next hit hashes it, finds no match, and
    removes it. Returns the objects and bytes removed."""
    count = total = kept = kept_total = disk_total = 0
    block = block_of(conn)
    seen: set[str] = set()
    for key, relative, found in scan_objects(base):
        path = f"{base}/objects/{relative}"
        if key in seen:  # the same key under another extension: a name we never give
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            continue
        seen.add(key)
        if delete_unpinned(path):
            count += 1
            total += found.st_size
            continue
        with contextlib.suppress(OSError):  # its seal would serve it unhashed; without, its hit asks the index
            os.removexattr(path, XATTR, follow_symlinks=False)
        enter(conn, key, found.st_size, "", relative, UNPROVEN, None, used=min(found.st_mtime, now))
        kept += 1
        kept_total += found.st_size
        disk_total += charge(found.st_size, block=block)
    conn.execute("UPDATE ledger SET resident = ?, entries = ?, disk_resident = ?", (kept_total, kept, disk_total))
    if kept:
        oldest = conn.execute("SELECT min(used) FROM entries").fetchone()[0]
        use_groups(conn, {"": float(oldest)})
    return count, total
