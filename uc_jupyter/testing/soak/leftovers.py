"""What a soak run left behind: files in the volumes, the cache and the staging folder, and processes.

Checked once the ranks are gone (:func:`files_left`: the services still up) and once the services
are gone too (:func:`processes_left`). A killed save, a killed worker's downloads and a killed
rank's staged uploads are each the next user's to take back, as the README promises: the run's
later saves and the cache's next opening. So the files are judged after one more opening of the
cache (:class:`~uc_jupyter.data.cache.FileCache` takes back what dead processes left in it), and
what that opening took back is reported beside the verdict.

Example:
    >>> processes_left(stamped([os.getpid(), 2**22 + 1])) == [os.getpid()]  # the second: no such process
    True
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from uc_jupyter.processes import alive, stamp, stamp_alive

__all__ = ["files_in", "files_left", "processes_left", "stamped"]

_KEEP_LAST = 2  # as the rank loop saves


def files_in(folder: Path) -> list[Path]:
    """Every file below ``folder`` (none when it does not exist)."""
    return [Path(top) / name for top, _, names in os.walk(folder) for name in names]


def files_left(*, runs: Path, uploads: Path, cache: Path, staging: Path) -> list[str]:
    """What should not be there, a line each: a checkpoint folder that is not committed or still
    marked as saving, more than ``keep_last`` checkpoints, anything else in the run folder, an
    unfinished upload at the S3 server, a staged file, a partial or streamed file in the cache."""
    from uc_jupyter.checkpoint.layout import MARKER, SAVING

    left: list[str] = []
    folders = sorted(entry for entry in runs.iterdir()) if runs.is_dir() else []
    # The S3 test server keeps keys as files in folders and leaves a folder whose keys were all deleted:
    # to S3 that is nothing (it has no empty folders), so only folders that hold a key count.
    folders = [entry for entry in folders if not entry.is_dir() or files_in(entry)]
    for entry in folders:
        if not entry.is_dir():
            left.append(f"a file in the run folder: {entry.name}")
        elif not (entry / MARKER).exists() or (entry / SAVING).exists():
            left.append(f"an unfinished checkpoint: {entry.name} ({len(files_in(entry))} files)")
    if len(folders) > _KEEP_LAST:
        left.append(f"{len(folders)} checkpoints kept, keep_last={_KEEP_LAST}")
    left += [f"an unfinished upload at the S3 server: {path.name}" for path in files_in(uploads)]
    left += [f"a staged file: {path.name}" for path in files_in(staging)]
    left += [
        f"in the cache: {path.relative_to(cache)}" for path in files_in(cache / "tmp") + files_in(cache / "stream")
    ]
    return left


def processes_left(stamps: Iterable[str]) -> list[int]:
    """The pids of the processes ``stamps`` names (:func:`~uc_jupyter.processes.stamp`) still running.
    Stamps, not pids: in a run of half an hour on a shared machine a pid of ours that ended is used
    again by someone else's process, which must not count as ours left behind (a full run met one)."""
    return sorted({int(stamp.split("/")[-2]) for stamp in stamps if stamp_alive(stamp)})


def stamped(pids: Iterable[int]) -> set[str]:
    """The stamps of the processes of ``pids`` that run now (a process already gone needs none)."""
    return {stamp(pid) for pid in pids if alive(pid)}
