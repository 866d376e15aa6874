"""A cache hit: the object pinned, checked and handed out, in one call (:meth:`Checks.lookup_many`).

A hit opens, share-locks (pins: :mod:`uc_jupyter.data.cache.pins`) and ``fstat``\\s the object,
then proves it unchanged since it was downloaded in the cheapest way that can (see
:mod:`uc_jupyter.data.cache.integrity`, whose seal :func:`is_stamped` reads):

1. its seal: one ``fgetxattr`` on the descriptor already open (about 1 µs);
2. else its fingerprint in the index, read for a whole window of files at once and remembered by
   the process (an object sealed before a chmod, a file system without extended attributes);
3. else a hash of its bytes compared with the checksum recorded at download: the same checksum is
   served (and the object sealed again, its new fingerprint recorded); another is a miss, the object
   is removed and its bytes leave the ledger, with one :class:`CacheIntegrityWarning` naming it.

A file with no record at all (planted under a key's name, never downloaded) is never served, and
anything at an object's name that is not a regular file (a symlink, a FIFO, a folder) is removed
without being followed or opened for reading.

Example:
    >>> checks = Checks(index, base)                         # doctest: +SKIP
    >>> checks.lookup_many([(key, 5, "a.txt")])               # doctest: +SKIP
    [CachedFile(key='...', path='.../objects/..', size=5, resident=True, downloaded=False, ...)]
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import stat
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, NamedTuple, cast

from uc_jupyter.data.cache import layout, ledger
from uc_jupyter.data.cache.errors import CacheIntegrityWarning
from uc_jupyter.data.cache.handles import CachedFile
from uc_jupyter.data.cache.index import Index
from uc_jupyter.data.cache.integrity import SEAL, SLACK_NS, XATTR, fingerprint, seal, stamp
from uc_jupyter.data.cache.ledger import Record
from uc_jupyter.data.cache.pins import NOT_A_FILE, OPEN_FLAGS, SHARE_NOWAIT, NotAFile, Pin

if TYPE_CHECKING:
    from typing_extensions import Unpack

    # What a lookup is asked for: (key, size, name), or a tuple that starts so (the prefetcher's Wanted).
    Wants = tuple[str, int, str, Unpack[tuple[object, ...]]]

__all__ = ["Checks", "is_stamped", "pin_file"]

_MEMO_KEPT = 1 << 16  # index fingerprints a process remembers (about 16 MB); past that it starts afresh


class Checks:
    """Hits on the cache whose index is ``index`` and folder ``base`` (see the module docstring)."""

    def __init__(self, index: Index, base: str) -> None:
        self._index, self._base = index, base

    def lookup_many(self, wanted: Sequence[Wants]) -> list[CachedFile | None]:
        """The pinned, checked file of each ``(key, size, name, ...)``, or None."""
        hit = self._hit
        found: list[CachedFile | _Doubt | None] = []
        for item in wanted:  # a loop, not a comprehension: it runs per window of every pass
            found.append(hit(item[0], item[1], item[2]))
        doubtful = [i for i, got in enumerate(found) if got.__class__ is _Doubt]
        if doubtful:
            stamps = self._stamps([wanted[i][0] for i in doubtful])
            for i in doubtful:
                key, size = wanted[i][0], wanted[i][1]
                found[i] = self._settle(key, size, cast(_Doubt, found[i]), stamps.get(key))
        return cast("list[CachedFile | None]", found)

    def _hit(self, key: str, size: int, name: str) -> CachedFile | _Doubt | None:
        """A hit proven by its seal; None when nothing is there; a :class:`_Doubt` (holding the pin)
        when the index must tell."""
        path = layout.object_path(self._base, key, name)
        try:
            pinned = pin_file(path)
        except NotAFile:
            # A symlink or socket under the name: never followed; removed, with a warning if this
            # cache had downloaded that key.
            record = self._record(key)
            if record is None:
                layout.remove(path)
            else:
                self._damaged(key, path, None, "is not a regular file", record)
            return None
        if pinned is None:
            return None
        pin, found = pinned
        if is_stamped(pin.fd, found, size):
            return _served(key, path, size, pin)
        return _Doubt(path, pin, found)

    def _settle(self, key: str, size: int, doubt: _Doubt, stamp_: ledger.Stamp | None) -> CachedFile | None:
        """A pinned object without a valid seal: served when its fingerprint is the index's, or when
        a hash shows its content to be what was downloaded (then sealed again); else a miss."""
        path, pin, found = doubt
        if stamp_ is None:  # nothing this cache downloaded under that name (planted, or not entered)
            pin.release()
            return None
        if (
            found.st_ino == stamp_[1]
            and found.st_mtime_ns == stamp_[2]
            and found.st_ctime_ns == stamp_[3]
            and found.st_size == size
        ) or self._check_again(key, path, size, pin, found):
            return _served(key, path, size, pin)
        return None

    def _stamps(self, keys: list[str]) -> dict[str, ledger.Stamp]:
        """The index's fingerprints of ``keys``, remembered by this process (and its own downloads'
        known at once). A remembered one gone stale is safe: a fingerprint that does not match the
        file sends the hit to the index's whole record (:meth:`_check_again`)."""
        local = self._index.local()
        memo = local.stamps
        missing = [key for key in keys if key not in memo]
        if missing:
            found = self._index.run(lambda conn: ledger.stamps(conn, missing), write=False)
            if len(memo) + len(found) > _MEMO_KEPT:
                memo.clear()
            memo.update(found)
        if local.fresh:
            with local.lock:
                for key in keys:
                    mine = local.fresh.get(key)
                    if mine is not None and mine.fingerprint is not None:
                        memo[key] = (key, *mine.fingerprint[1:], mine.used)
        return memo

    def _record(self, key: str) -> Record | None:
        """The whole record of ``key`` (with its checksum), this process's first."""
        local = self._index.local()
        with local.lock:
            mine = local.fresh.get(key)
        if mine is not None:
            return mine
        return self._index.run(lambda conn: ledger.records(conn, [key]), write=False).get(key)

    def _check_again(self, key: str, path: str, size: int, pin: Pin, found: os.stat_result) -> bool:
        """The object changed since it was recorded (or was adopted without a record): hash it again.
        True when its content is what was downloaded (it is sealed again and its new fingerprint
        recorded); else it is removed, with one warning, and the caller counts a miss."""
        record = self._record(key)
        local = self._index.local()
        if record is None:  # its entry went meanwhile (evicted): a miss, nothing to remove
            local.stamps.pop(key, None)
            pin.release()
            return False
        problem = ""
        if not stat.S_ISREG(found.st_mode):
            problem = "is not a regular file"
        elif found.st_size != size or found.st_size != record.size:
            problem = f"holds {found.st_size} bytes where {size} were downloaded"
        else:
            try:
                digest, recorded = seal(pin.fd)
            except OSError as exc:
                problem = str(exc)
            else:
                if record.checksum is None or digest == record.checksum:  # (never UNPROVEN: no digest is)
                    sealed = stamp(pin.fd)
                    if sealed is not None:
                        recorded = fingerprint(sealed)
                    with local.lock:
                        local.checked[key] = (record.checksum, digest, recorded)
                    local.stamps[key] = (key, *recorded[1:], record.used)
                    return True
                problem = (
                    "was found by a rebuild of a lost index, and nothing proves its bytes"
                    if record.checksum == ledger.UNPROVEN
                    else "does not hold the bytes that were downloaded (its checksum differs)"
                )
        pin.release()
        self._damaged(key, path, found.st_ino, problem, record)
        return False

    def _damaged(self, key: str, path: str, inode: int | None, problem: str, record: Record) -> None:
        """Remove a damaged object (if it is still the inode checked; any non-file there), its entry
        and its bytes, with one warning naming the file."""
        with contextlib.suppress(FileNotFoundError):
            if inode is None or os.lstat(path).st_ino == inode:
                layout.remove(path)
        local = self._index.local()
        local.stamps.pop(key, None)
        with local.lock:
            gone = local.forget(key, record)
        if gone:  # a download of this process not entered yet: give its room back
            for done in gone:
                self._index.give_back(done.reservation)
        else:
            self._index.write(lambda conn: ledger.drop(conn, key, record.checksum))
        warnings.warn(
            f"cache file {path} {problem}: removed it; it will be downloaded again",
            CacheIntegrityWarning,
            stacklevel=5,
        )


class _Doubt(NamedTuple):
    """A pinned object whose seal did not prove it: the index must settle it (see
    :meth:`FileCache.lookup_many`)."""

    path: str
    pin: Pin
    found: os.stat_result


def pin_file(path: str) -> tuple[Pin, os.stat_result] | None:
    """Open and share-lock ``path``; the pin and the file's ``fstat`` (which may show something other
    than a regular file: a folder, a FIFO), or None when nothing is there (or it is being evicted).

    Raises:
        NotAFile: a symlink or socket lies at ``path``; it is never followed.
    """
    try:
        fd = os.open(path, OPEN_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in NOT_A_FILE:
            raise NotAFile(exc.errno, f"{path} is not a regular file ({exc.strerror})") from None
        if exc.errno in (errno.EMFILE, errno.ENFILE):
            raise OSError(
                exc.errno,
                f"too many open files while pinning cache files ({exc.strerror}); "
                "lower pin_window or raise the limit (ulimit -n)",
            ) from exc
        raise
    try:
        fcntl.flock(fd, SHARE_NOWAIT)
        found = os.fstat(fd)
    except BlockingIOError:  # an evictor holds it and is about to delete it
        os.close(fd)
        return None
    except BaseException:
        os.close(fd)
        raise
    if found.st_nlink == 0:  # evicted between our open and our lock
        os.close(fd)
        return None
    pin = Pin()  # no __init__ of ours: this runs per hit
    pin.fd = fd
    return pin, found


def is_stamped(fd: int, found: os.stat_result, size: int) -> bool:
    """Whether the file open at ``fd`` (whose ``fstat`` is ``found``) carries a seal that shows it
    unchanged since it was sealed, with ``size`` bytes. One ``fgetxattr``: this runs per hit."""
    try:
        raw = os.getxattr(fd, XATTR)
    except OSError:
        return False  # none (a file nobody sealed), or no extended attributes here
    if len(raw) != SEAL.size:
        return False
    sealed: tuple[int, int, int, int] = SEAL.unpack(raw)
    sealed_size, inode, mtime, sealed_at = sealed
    return (
        found.st_size == size == sealed_size
        and found.st_ino == inode
        and found.st_mtime_ns == mtime
        and found.st_ctime_ns <= sealed_at + SLACK_NS
    )


def _served(key: str, path: str, size: int, pin: Pin) -> CachedFile:
    """The handle of a hit: a pinned resident file that was already cached. Made once per hit, so
    without the frozen dataclass's ``__init__`` (a third of the cost of a hit's Python work)."""
    hit = object.__new__(CachedFile)
    fields = hit.__dict__
    fields["key"], fields["path"], fields["size"], fields["pin"] = key, path, size, pin
    fields["resident"], fields["downloaded"], fields["reservation"] = True, False, None
    return hit
