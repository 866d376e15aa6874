"""Helpers for the cache package's tests: an injected clock and downloads written from bytes."""

from __future__ import annotations

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
