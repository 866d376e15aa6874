"""Helpers for the cache package's tests: downloads written from bytes, and the cache folder's real disk use."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

from uc_jupyter.data.cache import CachedFile, FileCache


def get(cache: FileCache, name: str, content: bytes, group: str = "g", **kwargs: Any) -> CachedFile:
    """The cached file of a remote ``s3://b/<name>`` holding ``content``, downloaded on a miss."""
    key = FileCache.key(f"s3://b/{name}", len(content), "v1")
    return cache.get(key, len(content), lambda tmp: Path(tmp).write_bytes(content), group=group, name=name, **kwargs)


def stored_files(cache: FileCache) -> list[Path]:
    """Every data file under the cache (objects, streamed, temporary), not the index or markers."""
    return [p for sub in ("objects", "stream", "tmp") for p in (cache.root / sub).rglob("*") if p.is_file()]


def disk_use(root: Path) -> int:
    """What the cache folder takes on disk right now, as ``du`` counts it: the allocated blocks of the
    folder and of everything below it, files and folders, the index and its log included (entries
    that vanish while it is summed are skipped, and a file renamed meanwhile, from tmp/ into place,
    is counted once: by its inode)."""
    seen: dict[int, int] = {}
    for folder, _, names in os.walk(root):
        for name in (".", *names):  # each folder counted once, as its own "."
            with contextlib.suppress(FileNotFoundError):
                found = os.lstat(os.path.join(folder, name))
                seen[found.st_ino] = found.st_blocks * 512
    return sum(seen.values())
