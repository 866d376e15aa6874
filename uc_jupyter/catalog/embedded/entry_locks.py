"""One lock per catalog entry, across threads and processes, for changes that write storage.

Creating, appending to, overwriting and dropping a table write Delta files *and* the metastore;
the metastore's own transaction cannot span the file writes (holding SQLite's write lock through a
long Delta write would stop every other catalog change). So each such change holds the entry's lock
from its first check to its last write: an append that started before a drop finishes first, and
the drop then removes the whole table; an append that starts after finds no table. Readers take no
lock (a Delta snapshot is immutable).

Locks are ``flock`` on ``<root>/locks/<digest>.lock``: released by the kernel when their holder
dies, so a ``kill -9`` never leaves an entry locked. Several entries (a cascading drop) are taken
in sorted order, so two such changes never wait on each other in a circle.

Example:
    >>> import tempfile
    >>> locks = EntryLocks(tempfile.mkdtemp())
    >>> with locks.hold(["main.ml.t"], what="table main.ml.t"):
    ...     pass
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from uc_jupyter.catalog.model import CatalogError

__all__ = ["EntryBusy", "EntryLocks"]


class EntryBusy(CatalogError):
    """Another process has held a catalog entry's lock for longer than the wait allowed."""


class EntryLocks:
    """Exclusive locks on catalog entries under ``root/locks`` (see the module docstring)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        timeout: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.folder = Path(root) / "locks"
        self.folder.mkdir(mode=0o700, exist_ok=True)
        self.timeout = timeout
        self._clock, self._sleep = clock, sleep

    @contextlib.contextmanager
    def hold(self, keys: Iterable[str], *, what: str) -> Iterator[None]:
        """Hold the locks of ``keys`` (entry keys like ``main.ml.t``) for the block; EntryBusy names
        ``what`` when one stays taken for ``timeout`` seconds."""
        fds: list[int] = []
        try:
            for key in sorted(set(keys)):
                fds.append(self._acquire(key, what))
            yield
        finally:
            for fd in reversed(fds):
                os.close(fd)  # closing releases the flock

    def _acquire(self, key: str, what: str) -> int:
        digest = hashlib.sha256(key.encode()).hexdigest()[:32]
        fd = os.open(self.folder / f"{digest}.lock", os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
        deadline = self._clock() + self.timeout
        delay = 0.005
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    return fd
                except BlockingIOError:
                    if self._clock() >= deadline:
                        raise EntryBusy(
                            f"{what} is busy: another process has been changing it for over "
                            f"{self.timeout:g} s; try again when it is done"
                        ) from None
                    self._sleep(delay)
                    delay = min(delay * 2, 0.1)
        except BaseException:
            os.close(fd)
            raise
