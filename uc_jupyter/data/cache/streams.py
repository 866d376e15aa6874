"""Whose the folders of streamed files are: ``stream/<pid>``, or ``stream/<pid>.<parent pid>`` for a
DataLoader worker, whose files outlive it.

A file streamed past a full cache lives in its process's folder until released; a process that died
leaves its folder to be reclaimed. torch ends a worker that does not persist as soon as it says its
stream ended, even while its last batches still wait their turn in the loop's queue, so a worker's
folder (and the room its files hold) is kept while its parent, the training loop's process, lives;
that loop reclaims its finished workers' folders when its next pass begins
(:meth:`~uc_jupyter.data.cache.FileCache.reclaim_finished_workers`).

Example:
    >>> owner("4242.17"), owner("4242"), owner("notes")
    ((4242, 17), (4242, None), (None, None))
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable

__all__ = ["folder_name", "gone", "owner", "owners"]


def folder_name() -> str:
    """This process's stream folder name: its pid, and its parent's when it is a DataLoader worker."""
    data = sys.modules.get("torch.utils.data")  # a worker has torch imported; never import it here
    worker = data is not None and data.get_worker_info() is not None
    return f"{os.getpid()}.{os.getppid()}" if worker else str(os.getpid())


def owner(name: str) -> tuple[int | None, int | None]:
    """(pid, parent pid or None) of a stream folder's name; (None, None) for a name not of ours."""
    pid, _, parent = name.partition(".")
    if not pid.isdigit() or (parent and not parent.isdigit()):
        return None, None
    return int(pid), int(parent) if parent else None


def owners(names: Iterable[str]) -> dict[int, int | None]:
    """pid -> parent pid (None: not a worker) of the stream folders ``names``."""
    found: dict[int, int | None] = {}
    for name in names:
        pid, parent = owner(name)
        if pid is not None:
            found[pid] = parent if parent is not None else found.get(pid)
    return found


def gone(pid: int, parents: dict[int, int | None], dead: Callable[[int], bool]) -> bool:
    """Whether what process ``pid`` left may be taken back: it is dead, and so is its parent when
    it was a DataLoader worker (whose batches may still be in the loop's hands)."""
    if not dead(pid):
        return False
    parent = parents.get(pid)
    return parent is None or dead(parent)
