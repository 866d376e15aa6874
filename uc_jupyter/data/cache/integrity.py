"""Why a cache hit can be trusted without reading the file: a checksum taken once, and a stat fingerprint.

When a download is put in place, the cache takes its SHA-256 (the bytes were just written, so they
are read back from the page cache; about 8 µs for 16 KiB with the SHA instructions of current CPUs)
and the *fingerprint* of the object in place: size, inode, and modification and status-change times
in nanoseconds. Both go into the index. Every way of changing a file's bytes (a write, a truncation,
a rename over it, a copy, a restored modification time, a chmod) sets its ctime to now, and no
unprivileged process can set a ctime back; so an unchanged fingerprint means unchanged content, and
a changed one means "hash again": the same checksum (a copied or restored cache, a chmod) is served
and the new fingerprint recorded; another checksum, or another size than the listing's, is a miss.

Reading the fingerprint from the index costs a hit 2 to 5 µs in a fresh process (a DataLoader
worker of a new epoch: one SQLite lookup per file, its pages not cached yet), more than the rest of
the hit. So the object also carries a *seal* in an extended attribute, read with one ``fgetxattr``
on the descriptor the hit opened anyway (about 1 µs): its size, inode and mtime, and the moment it
was sealed. A ctime cannot be stored in the inode it describes (writing the attribute changes it),
so the seal bounds it instead: the object is unchanged when its size, inode and mtime are the
sealed ones and its ctime is no later than the seal (plus :data:`SLACK_NS`, checked when sealing).
Any later change of the file sets a later ctime. What the seal cannot see is a change made within
those 5 ms (plus a clock tick) after the download that also restores the mtime to the nanosecond:
a writer racing the download on purpose (the exact fingerprint has the same blind spot, one tick of
a coarse file clock, and such a writer could as well rewrite the index). The index's exact
fingerprint is the check wherever the file system has no extended attributes, or a seal fails. (A
hit reads the seal in :mod:`uc_jupyter.data.cache.checks`.)

Recency for eviction is kept per group in the index rather than in the file's mtime, since touching
the file would change its ctime.

Example:
    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "object")
    >>> _ = open(path, "wb").write(b"hello")
    >>> fd = os.open(path, os.O_RDONLY)
    >>> digest, recorded = seal(fd)
    >>> digest == hashlib.sha256(b"hello").digest(), fingerprint(os.fstat(fd)) == recorded
    (True, True)
    >>> after = stamp(fd)  # None where the file system keeps no extended attributes
    >>> after is None or SEAL.unpack(os.getxattr(fd, XATTR))[:3] == (5, after.st_ino, after.st_mtime_ns)
    True
    >>> with open(path, "r+b") as f:
    ...     _ = f.write(b"j")
    >>> checksum(fd) == digest
    False
    >>> os.close(fd)
"""

from __future__ import annotations

import errno
import hashlib
import os
import struct
import time

__all__ = ["SEAL", "SLACK_NS", "XATTR", "Fingerprint", "checksum", "fingerprint", "seal", "stamp"]

# st_size, st_ino, st_mtime_ns, st_ctime_ns of an object in place.
Fingerprint = tuple[int, int, int, int]
_CHUNK = 1 << 20
_ATTEMPTS = 3
# The seal: written here, read on every hit by uc_jupyter.data.cache.checks.
XATTR = "user.uc_jupyter.seal"
SEAL = struct.Struct("<QQqq")  # size, inode, mtime_ns, sealed at (ns, this machine's clock)
# How much later than the moment a seal was written its own ctime may be: the system call itself,
# and a short preemption (a longer one fails the check when sealing, which then tries again). A
# kernel's file times lag the clock by up to a tick, never lead it.
SLACK_NS = 5_000_000
_NOXATTRS = (errno.ENOTSUP, errno.EOPNOTSUPP, errno.EPERM, errno.ENOSYS)


def fingerprint(stat: os.stat_result) -> Fingerprint:
    return (stat.st_size, stat.st_ino, stat.st_mtime_ns, stat.st_ctime_ns)


def checksum(fd: int) -> bytes:
    """The SHA-256 of the whole file open at ``fd`` (read with ``pread``: its offset is left alone)."""
    digest = hashlib.sha256()
    offset = 0
    while True:
        chunk = os.pread(fd, _CHUNK, offset)
        if not chunk:
            return digest.digest()
        digest.update(chunk)
        offset += len(chunk)


def seal(fd: int) -> tuple[bytes, Fingerprint]:
    """The checksum of the file open at ``fd`` and its fingerprint, taken so that they agree: the
    fingerprint is the same before and after hashing, or a write during hashing would go unseen."""
    for _ in range(_ATTEMPTS):
        before = fingerprint(os.fstat(fd))
        digest = checksum(fd)
        after = fingerprint(os.fstat(fd))
        if before == after:
            return digest, after
    raise OSError(
        f"a cached file kept changing while it was checked ({_ATTEMPTS} attempts); is another program writing it?"
    )


def stamp(fd: int) -> os.stat_result | None:
    """Seal the file open at ``fd`` (see the module docstring) and return its ``fstat`` after the
    seal, whose fingerprint is the one to record; None when the file system keeps no extended
    attributes, or its clock disagrees with this machine's (a network file system): then the
    index's fingerprint is the only check."""
    for _ in range(_ATTEMPTS):
        before = os.fstat(fd)
        sealed_at = time.time_ns()
        try:
            os.setxattr(fd, XATTR, SEAL.pack(before.st_size, before.st_ino, before.st_mtime_ns, sealed_at))
        except OSError as exc:
            if exc.errno in _NOXATTRS:
                return None
            raise
        after = os.fstat(fd)
        if after.st_ctime_ns <= sealed_at + SLACK_NS and after.st_mtime_ns == before.st_mtime_ns:
            return after
    try:  # a clock this far off: no seal at all rather than one that could mislead
        os.removexattr(fd, XATTR)
    except OSError as exc:
        if exc.errno not in (*_NOXATTRS, errno.ENODATA):
            raise
    return None
