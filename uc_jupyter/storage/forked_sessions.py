"""A forked child lets go of the S3 sessions its parent's s3fs filesystems opened, without waiting.

s3fs closes a filesystem's session when the filesystem is collected, with a finalizer that runs the
close on fsspec's I/O thread (``close_session``): in a forked child that thread does not exist (fsspec
forgets it after a fork), but the filesystems made before the fork still name its loop, which looks
running, so each finalizer waited its one-second poll for an answer that never came. A DataLoader
worker or any other child forked from a process that had used s3fs (folders whose options
object_store cannot honour, ``ResolvedVolumePath.fs``) paid a second per such filesystem at its
first collection; measured: 6 to 22 s in one test of the suite, which forks for its S3 tests.

So a forked child drops those finalizers (:func:`forget_parents_sessions`, registered by
:func:`install` at import). The sessions' sockets are the parent's: the child has nothing to close.
The finalizers are found in :class:`weakref.finalize`'s registry, which s3fs gives no other handle on.

Example:
    >>> install()  # once per process; a forked child then runs forget_parents_sessions
"""

from __future__ import annotations

import os
import weakref

__all__ = ["forget_parents_sessions", "install"]

_installed = False


def forget_parents_sessions() -> int:
    """Detach every pending s3fs session finalizer of this process (in a forked child: the parent's
    filesystems'); how many were detached."""
    registry = getattr(weakref.finalize, "_registry", None)
    if not isinstance(registry, dict):  # another Python's weakref: nothing known to detach
        return 0
    parents = [f for f, info in list(registry.items()) if _closes_an_s3_session(getattr(info, "func", None))]
    for finalizer in parents:
        finalizer.detach()
    return len(parents)


def _closes_an_s3_session(func: object) -> bool:
    return getattr(func, "__qualname__", "") == "S3FileSystem.close_session"


def install() -> None:
    """Run :func:`forget_parents_sessions` in every child forked from this process from now on."""
    global _installed
    if not _installed and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=forget_parents_sessions)
        _installed = True
