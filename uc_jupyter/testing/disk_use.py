"""The peak disk use of a folder while a block of code runs, sampled in a thread.

A cache that keeps to its byte budget must keep to it on disk too, streamed-through files and its
index included (issue 16 point 7); this measures what the disk saw. On a folder that is a file
system of its own (a tmpfs mounted for the measurement, see :mod:`uc_jupyter.testing.mounts`) one
``statvfs`` call reads the whole use, so it samples every 2 ms; elsewhere it walks the folder
(allocated blocks of every file), every 20 ms. A peak shorter than the interval can be missed: the
number is a lower bound of the true peak.

Example:
    >>> import tempfile
    >>> with DiskPeak(tempfile.mkdtemp()) as peak:
    ...     pass
    >>> peak.peak, peak.samples >= 2
    (0, True)
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from types import TracebackType

__all__ = ["DiskPeak"]


class DiskPeak:
    """Sample the disk use of ``folder`` from entering the block to leaving it; ``peak`` is the
    highest sample (bytes), ``samples`` how many were taken. ``whole_file_system`` (default: the
    folder is a mount point) reads ``statvfs`` instead of walking; ``interval`` is in seconds."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        *,
        whole_file_system: bool | None = None,
        interval: float | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.whole_file_system = os.path.ismount(self.folder) if whole_file_system is None else whole_file_system
        self.interval = interval if interval is not None else (0.002 if self.whole_file_system else 0.02)
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="disk-peak", daemon=True)

    def used(self) -> int:
        """Bytes the folder takes on disk now (allocated blocks, not file lengths)."""
        if self.whole_file_system:
            fs = os.statvfs(self.folder)
            return (fs.f_blocks - fs.f_bfree) * fs.f_frsize
        total = 0
        for folder, _dirs, files in os.walk(self.folder):
            for name in files:
                with contextlib.suppress(FileNotFoundError):  # removed while the walk ran
                    total += os.lstat(os.path.join(folder, name)).st_blocks * 512
        return total

    def sample(self) -> int:
        """Take one sample now (the thread does this every ``interval``); returns it."""
        used = self.used()
        self.peak = max(self.peak, used)
        self.samples += 1
        return used

    def _poll(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> DiskPeak:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object | TracebackType) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()
