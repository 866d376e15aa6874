"""Taking back what processes that died (``kill -9``) left in the cache: their streamed files
(``stream/<pid>``), partial downloads (``tmp/<key>.<pid>.<n>``) and the room their reservations hold
in the index; a finished download whose entry was not written yet is adopted
(:func:`~uc_jupyter.data.cache.ledger.reclaim`).

Whose a stream folder is, and why a DataLoader worker's outlives it while its parent lives, is
:mod:`~uc_jupyter.data.cache.streams`'. Files go first, then the ledger: the other way round, the
bytes would count as free while the files still take the disk. Each process is judged when it is
met, not from a list made earlier, which could miss a process that started meanwhile and take back
its room.

Example:
    >>> reclaim_dead(index, "/home/me/.uc_jupyter/cache", time.time)  # FileCache.reclaim_dead  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Callable

from uc_jupyter.data.cache import ledger, streams
from uc_jupyter.data.cache.index import Index
from uc_jupyter.processes import alive

__all__ = ["reclaim_dead"]


def reclaim_dead(index: Index, base: str, clock: Callable[[], float], *, parent: int | None = None) -> None:
    """Take back what dead processes left under the cache folder ``base`` and in its ``index``. A
    DataLoader worker's leftovers wait while its parent lives, unless ``parent`` is that parent:
    then only those workers' are taken back (the parent's next pass begins; nothing they handed out
    is in use). ``clock`` dates an adopted download's use."""
    verdicts: dict[int, bool] = {}

    def dead(pid: int) -> bool:
        if pid not in verdicts:
            verdicts[pid] = pid != parent and not alive(pid)
        return verdicts[pid]

    folders = list(os.scandir(f"{base}/stream"))
    parents = streams.owners(entry.name for entry in folders)
    if parent is not None:  # only the calling process's workers; the others stay as they are
        parents = {pid: None for pid, up in parents.items() if up == parent}

    def gone(pid: int) -> bool:
        return (parent is None or pid in parents) and streams.gone(pid, parents, dead)

    for entry in folders:
        pid, _ = streams.owner(entry.name)
        if pid is not None and gone(pid):
            shutil.rmtree(entry.path, ignore_errors=True)
    for tmp in os.scandir(f"{base}/tmp"):
        owner = tmp.name.split(".")[1] if tmp.name.count(".") >= 2 else ""
        if owner.isdigit() and gone(int(owner)):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp.path)

    def reclaim(conn: sqlite3.Connection) -> None:
        rows = conn.execute("SELECT id, pid, key, size, resident, grp, path FROM reservations").fetchall()
        now = clock()
        for row in rows:
            if gone(row[1]):
                ledger.reclaim(conn, tuple(row), base, now=now)

    index.write(reclaim)
