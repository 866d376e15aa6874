"""Admission: room for downloads within the byte budget and the free-disk floor, handed out in order.

It runs inside the index's write transaction, with the downloads' sizes reserved before they start,
so the budget and the floor are never crossed. The rules:

- Files in flight (reserved: downloads under way, streamed files in use) count against the budget
  as resident files do.
- The resident set may take the budget less the headroom, and always leaves room for one more file
  of the size being admitted to stream past. So a budget too small for the data in flight streams
  instead of deadlocking: with room for between one and two files nothing is kept and each file
  streams through in turn, where one resident file would otherwise hold the room the next needs.
- Room goes in order: after the first file with no room, no later one gets any, so what a consumer
  needs first is never starved by files it needs later.
- Eviction knows scans: the requesting group's files (one dataset's listing) never evict each
  other; files of other groups not used for ``grace_seconds`` go, the least recently used group
  first (a group is used by a pass over its listing, or a download). Only a
  download that has waited too long (``starving``) evicts unpinned files of any group, its own
  first: files in flight elsewhere may be waiting on it (a DataLoader takes its workers' batches
  in turn).
- One download per key: a resident download claims its key; an asker of a claimed key is told
  ``"busy"`` (wait for that copy), and a dead claimant's claim is taken back.

Example:
    >>> Budget(max_bytes=1000, min_free_bytes=0, headroom=0.1, grace_seconds=600).resident_cap(400)
    600
    >>> Budget(max_bytes=1500, min_free_bytes=0, headroom=0.1, grace_seconds=600).resident_cap(1000)
    500
"""

from __future__ import annotations

import itertools
import math
import os
import shutil
import sqlite3
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from uc_jupyter.data.cache.handles import Ticket
from uc_jupyter.data.cache.layout import object_path, relative, remove
from uc_jupyter.data.cache.ledger import Reservation, evict, new_reservation, reclaim, rows_for_keys, totals
from uc_jupyter.processes import alive

__all__ = ["Budget", "Outcome", "admit", "disk_free"]

# For each file: a ticket (download it), "present" (look it up), "busy" (another download is under
# way: wait for it) or None (no room now).
Outcome = Ticket | Literal["present", "busy"] | None
# Names of temporary files: unique within a process (whose pid names them), whichever cache object
# made them.
_SEQUENCE = itertools.count()
# Files of other groups not used within the grace period: the least recently used group first.
_COLD_OTHERS = (
    "SELECT e.key, e.size, e.path FROM groups g JOIN entries e ON e.grp = g.grp"
    " WHERE g.grp != ? AND g.used <= ? ORDER BY g.used, e.used, e.key"
)
_ANY_OWN_FIRST = "SELECT key, size, path FROM entries ORDER BY grp != ?, used, key"


@dataclass(frozen=True)
class Budget:
    """The limits admission keeps."""

    max_bytes: int
    min_free_bytes: int
    headroom: float
    grace_seconds: float

    def resident_cap(self, size: int) -> int:
        """How many bytes resident files and files in flight may take for a file of ``size`` to be
        kept: the budget less the headroom, and less room for one more such file to stream past."""
        return min(int(self.max_bytes * (1.0 - self.headroom)), self.max_bytes - size)


def admit(
    conn: sqlite3.Connection,
    wanted: Sequence[tuple[str, int, str]],
    *,
    group: str,
    keep: bool,
    claim: bool,
    starving: bool,
    budget: Budget,
    base: str,
    now: float,
) -> list[Outcome]:
    """Claim and reserve ``wanted`` ``(key, size, name)`` in order (see the module docstring).
    ``claim=False`` neither claims nor waits for claims: a stuck claimant's file is streamed."""
    resident, reserved = totals(conn)
    disk_room = disk_free(base) - reserved - budget.min_free_bytes
    claims: dict[str, Reservation] = {}
    known: set[str] = set()
    if claim:
        keys = [key for key, _, _ in wanted]
        claims = _claims(conn, keys)
        known = _known(conn, keys)
    outcomes: list[Outcome] = []
    pid = os.getpid()
    added = 0  # reserved here, written to the ledger at the end
    for key, size, name in wanted:
        if outcomes and outcomes[-1] is None:
            outcomes.append(None)  # room goes in order
            continue
        target = object_path(base, key, name)
        if claim:
            present, dropped = _present(conn, key, target, known)
            resident -= dropped
            if present:
                outcomes.append("present")
                continue
            found = claims.get(key)
            if found is not None:
                if alive(found[1]):
                    outcomes.append("busy")
                    continue
                adopted = reclaim(conn, found, base, now=now)
                resident, reserved = totals(conn)
                reserved += added
                if adopted:
                    outcomes.append("present")
                    continue
        cap = budget.resident_cap(size)
        resident_ok = keep and resident + reserved + size <= cap and size <= disk_room
        if keep and not resident_ok and reserved + size <= cap:  # evicting can make it resident
            need = int(max(resident + reserved + size - cap, size - disk_room))
            freed, _ = evict(conn, base, _COLD_OTHERS, (group, now - budget.grace_seconds), need=need)
            resident -= freed
            disk_room += freed
            resident_ok = resident + reserved + size <= cap and size <= disk_room
        fits = resident_ok or (resident + reserved + size <= budget.max_bytes and size <= disk_room)
        if not fits and starving:
            need = int(max(resident + reserved + size - budget.max_bytes, size - disk_room))
            freed, _ = evict(conn, base, _ANY_OWN_FIRST, (group,), need=need)
            resident -= freed
            disk_room += freed
            fits = resident + reserved + size <= budget.max_bytes and size <= disk_room
        if not fits:
            outcomes.append(None)
            continue
        path = relative(base, target) if resident_ok else ""
        rid = new_reservation(conn, key, size, resident=resident_ok, group=group, relative=path)
        reserved += size
        added += size
        disk_room -= size
        tmp = f"{base}/tmp/{key}.{pid}.{next(_SEQUENCE)}"
        outcomes.append(Ticket(key, size, name, group, resident_ok, rid, tmp))
        if resident_ok:  # the same key later in this batch waits for this download
            claims[key] = (rid, pid, key, size, 1, group, path)
    if added:
        conn.execute("UPDATE ledger SET reserved = reserved + ?", (added,))
    return outcomes


def disk_free(base: str) -> float:
    """Free bytes of the disk holding ``base``; unlimited for a file system that keeps no count
    (``statvfs`` answers 0 blocks in all: ramfs, some virtual file systems)."""
    usage = shutil.disk_usage(base)
    return usage.free if usage.total else math.inf


def _claims(conn: sqlite3.Connection, keys: Sequence[str]) -> dict[str, Reservation]:
    query = "SELECT id, pid, key, size, resident, grp, path FROM reservations WHERE resident = 1 AND key IN ({})"
    return {row[2]: tuple(row) for row in rows_for_keys(conn, query, keys)}


def _known(conn: sqlite3.Connection, keys: Sequence[str]) -> set[str]:
    return {row[0] for row in rows_for_keys(conn, "SELECT key FROM entries WHERE key IN ({})", keys)}


def _present(conn: sqlite3.Connection, key: str, target: str, known: set[str]) -> tuple[bool, int]:
    """Whether ``key`` has an entry and its object is in place (a lookup then checks it); an entry
    whose object is gone, or is not a regular file, is dropped with its bytes (the second value).
    An object in place with no entry is not present: a claimant has yet to enter it (it is
    ``"busy"``), or nobody downloaded it (it is downloaded over)."""
    if key not in known:
        return False, 0
    try:
        found: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        found = None
    if found is not None and stat.S_ISREG(found.st_mode):
        return True, 0
    if found is not None:  # a symlink or folder under an object's name: never ours, never followed
        remove(target)
    known.discard(key)
    row = conn.execute("SELECT size FROM entries WHERE key = ?", (key,)).fetchone()
    if row is None:
        return False, 0
    conn.execute("DELETE FROM entries WHERE key = ?", (key,))
    conn.execute("UPDATE ledger SET resident = resident - ?, entries = entries - 1", (row[0],))
    return False, int(row[0])
