"""The cache's folder: what is taken for a cache, and what is emptied."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.data.cache.conftest import stored_files
from uc_jupyter.data.cache import FileCache, NotACacheFolder


def test_a_file_given_as_the_cache_folder_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "file"
    target.write_bytes(b"x")
    with pytest.raises(NotACacheFolder, match=f"cache_dir {target} is a file, not a folder"):
        FileCache(target, max_bytes=10**6, min_free_bytes=0)


def test_a_cache_of_the_format_before_markers_is_recognised_and_emptied(tmp_path: Path) -> None:
    root = tmp_path / "old"
    for folder in ("objects/ab", "tmp", "stream"):
        (root / folder).mkdir(parents=True)
    (root / "objects" / "ab" / ("ab" * 32)).write_bytes(b"old object")
    for name, content in {"FORMAT": b"4", "format.lock": b"", "index.db": b"old index"}.items():
        (root / name).write_bytes(content)
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    assert cache.stats().entries == 0
    assert stored_files(cache) == []
    assert (root / ".uc_jupyter").read_text() == "cache"
