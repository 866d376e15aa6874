"""Admission: room for downloads within the byte budget and the free-disk floor, handed out in order.

It runs inside the index's write transaction, with the downloads' sizes reserved before they start,
so the budget and the floor are never crossed. The rules:

- Files in flight (reserved: downloads under way, streamed files in use) count against the budget
  as resident files do.
- A budget of at least :data:`~uc_jupyter.data.cache.disk.DISK_BUDGET_MIN` is the disk: each file
  costs its whole blocks and its share of folder and index (:func:`~uc_jupyter.data.cache.disk.charge`),
  and the index, its log and the folders, measured at each admission, come off the budget first;
  the headroom below is a fraction of what is left, inside the budget.
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
    >>> Budget(max_bytes=10 << 20, min_free_bytes=0, headroom=0.1, grace_seconds=600).resident_cap(4608, 1 << 20)
    8493465
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

from uc_jupyter.data.cache.disk import DISK_BUDGET_MIN, charge, structure
from uc_jupyter.data.cache.handles import Ticket
from uc_jupyter.data.cache.layout import object_path, relative, remove
from uc_jupyter.data.cache.ledger import (
    Freed,
    Reservation,
    evict,
    forget_resident,
    new_reservation,
    reclaim,
    rows_for_keys,
    totals,
)
from uc_jupyter.processes import alive

__all__ = ["DEFAULT_HEADROOM", "Budget", "Outcome", "admit", "disk_free"]

DEFAULT_HEADROOM = 0.1  # the fraction of the budget kept for files streamed past a full cache, by default

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
    """The limits admission keeps. A budget of at least :data:`~uc_jupyter.data.cache.disk.DISK_BUDGET_MIN`
    bytes is the disk (:attr:`is_disk`): files are charged as the disk takes them, and the index and
    folders, measured, come off it first; a smaller one bounds the files' listed bytes."""

    max_bytes: int
    min_free_bytes: int
    headroom: float
    grace_seconds: float

    @property
    def is_disk(self) -> bool:
        return self.max_bytes >= DISK_BUDGET_MIN

    def resident_cap(self, size: int, structure: int = 0) -> int:
        """How many bytes resident files and files in flight may take for a file costing ``size`` to
        be kept, when the index and folders take ``structure``: what is left of the budget less the
        headroom, and less room for one more such file to stream past."""
        room = self.max_bytes - structure
        return min(int(room * (1.0 - self.headroom)), room - size)


class _Room:
    """The budget's state within one admission: what resident files and files in flight take, in
    the budget's unit (listed bytes, or the disk's), and the disk's free room above the floor."""

    def __init__(self, conn: sqlite3.Connection, budget: Budget, base: str) -> None:
        found = totals(conn)
        self.disk = budget.is_disk
        self.block = found.block
        if self.disk:
            self.resident, self.reserved = found.disk_resident, found.disk_reserved
            self.structure = structure(base, block=self.block)
        else:
            self.resident, self.reserved = found.resident, found.reserved
            self.structure = 0
        self.limit = budget.max_bytes - self.structure  # what files may take
        self.free = disk_free(base) - self.reserved - budget.min_free_bytes

    def cost(self, size: int) -> int:
        return charge(size, block=self.block) if self.disk else size

    def reload(self, conn: sqlite3.Connection, added: int) -> None:
        """Read the ledger again (after a reclaim); ``added``: reserved here, not written yet."""
        found = totals(conn)
        self.resident, self.reserved = (
            (found.disk_resident, found.disk_reserved) if self.disk else (found.resident, found.reserved)
        )
        self.reserved += added

    def freed(self, freed: Freed) -> None:
        got = freed.disk_bytes if self.disk else freed.bytes
        self.resident -= got
        self.free += got


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
    room = _Room(conn, budget, base)
    claims: dict[str, Reservation] = {}
    known: set[str] = set()
    if claim:
        keys = [key for key, _, _ in wanted]
        claims = _claims(conn, keys)
        known = _known(conn, keys)
    outcomes: list[Outcome] = []
    pid = os.getpid()
    added = listed = 0  # reserved here (in the budget's unit, and listed), written to the ledger at the end
    for key, size, name in wanted:
        if outcomes and outcomes[-1] is None:
            outcomes.append(None)  # room goes in order
            continue
        target = object_path(base, key, name)
        if claim:
            present, dropped = _present(conn, key, target, known)
            if dropped is not None:
                room.resident -= room.cost(dropped)
            if present:
                outcomes.append("present")
                continue
            found = claims.get(key)
            if found is not None:
                if alive(found[1]):
                    outcomes.append("busy")
                    continue
                adopted = reclaim(conn, found, base, now=now)
                room.reload(conn, added)
                if adopted:
                    outcomes.append("present")
                    continue
        cost = room.cost(size)
        cap = budget.resident_cap(cost, room.structure)
        resident_ok = keep and room.resident + room.reserved + cost <= cap and cost <= room.free
        if keep and not resident_ok and room.reserved + cost <= cap:  # evicting can make it resident
            need = int(max(room.resident + room.reserved + cost - cap, cost - room.free))
            cold = (group, now - budget.grace_seconds)
            room.freed(evict(conn, base, _COLD_OTHERS, cold, need=need, disk=room.disk))
            resident_ok = room.resident + room.reserved + cost <= cap and cost <= room.free
        fits = resident_ok or (room.resident + room.reserved + cost <= room.limit and cost <= room.free)
        if not fits and starving:
            need = int(max(room.resident + room.reserved + cost - room.limit, cost - room.free))
            room.freed(evict(conn, base, _ANY_OWN_FIRST, (group,), need=need, disk=room.disk))
            fits = room.resident + room.reserved + cost <= room.limit and cost <= room.free
        if not fits:
            outcomes.append(None)
            continue
        path = relative(base, target) if resident_ok else ""
        rid = new_reservation(conn, key, size, resident=resident_ok, group=group, relative=path)
        room.reserved += cost
        room.free -= cost
        added += cost
        listed += size
        tmp = f"{base}/tmp/{key}.{pid}.{next(_SEQUENCE)}"
        outcomes.append(Ticket(key, size, name, group, resident_ok, rid, tmp))
        if resident_ok:  # the same key later in this batch waits for this download
            claims[key] = (rid, pid, key, size, 1, group, path)
    if listed or added:
        disk_added = (
            added if room.disk else sum(charge(t.size, block=room.block) for t in outcomes if isinstance(t, Ticket))
        )
        conn.execute(
            "UPDATE ledger SET reserved = reserved + ?, disk_reserved = disk_reserved + ?", (listed, disk_added)
        )
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


def _present(conn: sqlite3.Connection, key: str, target: str, known: set[str]) -> tuple[bool, int | None]:
    """Whether ``key`` has an entry and its object is in place (a lookup then checks it); an entry
    whose object is gone, or is not a regular file, is dropped with its bytes (the second value: its
    listed size, None when nothing was dropped).
    An object in place with no entry is not present: a claimant has yet to enter it (it is
    ``"busy"``), or nobody downloaded it (it is downloaded over)."""
    if key not in known:
        return False, None
    try:
        found: os.stat_result | None = os.lstat(target)
    except FileNotFoundError:
        found = None
    if found is not None and stat.S_ISREG(found.st_mode):
        return True, None
    if found is not None:  # a symlink or folder under an object's name: never ours, never followed
        remove(target)
    known.discard(key)
    row = conn.execute("SELECT size FROM entries WHERE key = ?", (key,)).fetchone()
    if row is None:
        return False, None
    conn.execute("DELETE FROM entries WHERE key = ?", (key,))
    forget_resident(conn, int(row[0]))
    return False, int(row[0])
