"""What a cache hit checks before it serves a file (the attacks are in tests/security/test_cache.py)."""

from __future__ import annotations

import os
import shutil
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.data.cache.conftest import get
from uc_jupyter.data.cache import CacheIntegrityWarning, FileCache, Ticket
from uc_jupyter.testing.mounts import MountUnavailable, mounted
from uc_jupyter.testing.waits import wait_until


@pytest.fixture
def cache(tmp_path: Path) -> FileCache:
    return FileCache(tmp_path / "cache", max_bytes=10_000, min_free_bytes=0)


def test_lookup_many_answers_each_like_lookup_in_order(cache: FileCache) -> None:
    present = [get(cache, f"p{i}.png", bytes([i]) * 50) for i in range(3)]
    for got in present:
        cache.release(got)
    absent = (FileCache.key("s3://b/absent", 50, "v1"), 50, "absent.png")
    wanted = [(present[0].key, 50, "p0.png"), absent, (present[2].key, 50, "p2.png"), (present[1].key, 50, "p1.png")]
    found = cache.lookup_many(wanted)
    assert [None if f is None else f.path for f in found] == [present[0].path, None, present[2].path, present[1].path]
    assert all(f is None or (f.resident and not f.downloaded) for f in found)
    for f in found:
        if f is not None:
            cache.release(f)
    assert cache.lookup_many([]) == []


def test_a_finished_download_is_a_hit_here_at_once_and_elsewhere_once_entered(tmp_path: Path) -> None:
    """Finished downloads are entered into the index in batches; this process knows their records
    at once, another sees them within the flush timer (a quarter of a second), however long the
    finishing stream pauses."""
    root = tmp_path / "cache"
    mine = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    other = FileCache(root, max_bytes=10**6, min_free_bytes=0)  # as another process would
    key = FileCache.key("s3://b/x", 5, "v")
    (ticket,) = mine.reserve([(key, 5, "x.bin")], group="g")
    assert isinstance(ticket, Ticket)
    Path(ticket.tmp).write_bytes(b"12345")
    mine.release(mine.finish(ticket))
    hit = mine.lookup(key, 5, name="x.bin")
    assert hit is not None
    mine.release(hit)
    seen = wait_until(
        lambda: other.lookup(key, 5, name="x.bin"), "the file to be entered into the index", 10, interval_s=0.02
    )
    other.release(seen)


def test_a_changed_mode_or_copied_cache_is_checked_again_and_served_without_warning(
    tmp_path: Path, recwarn: pytest.WarningsRecorder
) -> None:
    root = tmp_path / "cache"
    cache = FileCache(root, max_bytes=10**6, min_free_bytes=0)
    first = get(cache, "a.png", b"a" * 100)
    cache.release(first)
    os.chmod(first.path, 0o600)  # a chmod (even to the same mode) changes the ctime
    copy = Path(first.path).with_name("copy")
    shutil.copy2(first.path, copy)  # as a backup restored: another inode, the same bytes
    os.replace(copy, first.path)
    for _ in range(2):  # checked again once, then trusted by its new fingerprint
        hit = cache.lookup(first.key, 100, name="a.png")
        assert hit is not None
        cache.release(hit)
    assert [w for w in recwarn if issubclass(w.category, CacheIntegrityWarning)] == []


def test_an_object_whose_seal_was_lost_is_checked_by_the_index_and_sealed_again(tmp_path: Path) -> None:
    """A copy that drops extended attributes (a backup restored with plain cp) keeps the bytes: the
    hash shows it, the object is served and sealed again, and no warning is given."""
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    first = get(cache, "a.png", b"a" * 100)
    cache.release(first)
    if not os.listxattr(first.path):
        pytest.skip("this file system keeps no extended attributes: the index is the only check here")
    copy = Path(first.path).with_name("copy")
    shutil.copyfile(first.path, copy)  # bytes only
    os.replace(copy, first.path)
    assert os.listxattr(first.path) == []
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheIntegrityWarning)
        hit = cache.lookup(first.key, 100, name="a.png")
    assert hit is not None
    cache.release(hit)
    assert os.listxattr(first.path) != []


@pytest.fixture
def without_xattrs(tmp_path: Path) -> Iterator[Path]:
    """A ramfs mount (it keeps no extended attributes; mounting needs root, as CI has)."""
    try:
        with mounted(tmp_path / "ramfs", "ramfs") as where:
            yield where
    except MountUnavailable as exc:
        pytest.skip(str(exc))


def test_without_extended_attributes_the_index_checks_every_hit(without_xattrs: Path) -> None:
    cache = FileCache(without_xattrs / "cache", max_bytes=10**6, min_free_bytes=0)
    first = get(cache, "a.png", b"a" * 100)
    cache.release(first)
    assert os.listxattr(first.path) == []  # nothing sealed here
    hit = cache.lookup(first.key, 100, name="a.png")
    assert hit is not None
    cache.release(hit)
    time.sleep(0.02)  # past a tick of this file system's clock: ramfs keeps coarse file times
    with open(first.path, "r+b") as handle:  # same size, other bytes
        handle.write(b"b" * 100)
    with pytest.warns(CacheIntegrityWarning, match=f"cache file {first.path} does not hold the bytes"):
        assert cache.lookup(first.key, 100, name="a.png") is None
    again = get(cache, "a.png", b"a" * 100)
    assert again.downloaded
    assert Path(again.path).read_bytes() == b"a" * 100
    cache.release(again)
