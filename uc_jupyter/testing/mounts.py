"""Small real file systems mounted for a test (a tmpfs that fills, a ramfs without extended attributes).

Mounting needs root, as CI has; where it cannot be done, :func:`mounted` raises :class:`MountUnavailable`
with the reason, and the test's fixture skips with it.

Example:
    >>> with mounted(Path("/tmp/disk"), "tmpfs", "size=1m") as disk:  # doctest: +SKIP
    ...     (disk / "a").write_bytes(b"x")
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

__all__ = ["MountUnavailable", "mounted"]


class MountUnavailable(RuntimeError):
    """The file system cannot be mounted here (no mount command, not root, no such type)."""


@contextlib.contextmanager
def mounted(where: Path, fstype: str, options: str | None = None) -> Iterator[Path]:
    """Mount a new ``fstype`` at ``where`` (made if missing) for the block; unmounted (lazily) after it."""
    where.mkdir(exist_ok=True)
    command = ["mount", "-t", fstype, *(["-o", options] if options else []), fstype, str(where)]
    try:
        done = subprocess.run(command, capture_output=True, check=False)
    except FileNotFoundError:
        raise MountUnavailable("no mount command") from None
    if done.returncode:
        raise MountUnavailable(f"cannot mount a {fstype} here: {done.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)
