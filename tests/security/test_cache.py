"""Attacks on the shared cache: every one of them got through before issue 13.

The attacker can write into the cache's folder (another tool of the same OS user, a volume
registered over it before the catalog refused that, a bug) or just gets the cache pointed at a
folder: the prize is a file the next epoch yields as if it were the volume's, or someone's files
deleted. Each test names what it did to the cache as it was (mostly: served the tampered file,
deleted the folder, hung the loop, waited 120 s and failed).

Not covered, by design: a process of the same OS user that rewrites the index as well as an object
can make the cache serve anything (no file of a user is protected from that user); the index is
the cache's one trust anchor, kept 0600 inside a 0700 folder.
"""

from __future__ import annotations

import contextlib
import gc
import os
import re
import stat
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import FileCache, UCVolumeDataset
from uc_jupyter.data.cache import CachedFile, Ticket
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.mounts import MountUnavailable, mounted
from uc_jupyter.testing.s3_server import S3TestServer

ORIGINAL = b"the bytes that were downloaded"  # 30 bytes
# File times may be as coarse as a kernel clock tick (4 ms at 250 Hz, where a file system does not
# ask for fine-grained ones): a change within one tick of the download leaves every stat field as it
# was, which no fingerprint can see. Attacks start after that, and after the seal's slack
# (uc_jupyter.data.cache.integrity.SLACK_NS, 5 ms).
AFTER_THE_DOWNLOAD = 0.02
EVIL = b"other bytes of the very size!!"
assert len(ORIGINAL) == len(EVIL)


def new_cache(root: Path, **options: Any) -> FileCache:
    return FileCache(root, **{"max_bytes": 10**7, "min_free_bytes": 0, **options})


def download(cache: FileCache, name: str, content: bytes = ORIGINAL) -> CachedFile:
    key = FileCache.key(f"s3://bucket/{name}", len(content), "etag")
    return cache.get(key, len(content), lambda tmp: Path(tmp).write_bytes(content), group="g", name=name)


def lookup(cache: FileCache, name: str, content: bytes = ORIGINAL) -> CachedFile | None:
    return cache.lookup(FileCache.key(f"s3://bucket/{name}", len(content), "etag"), len(content), name=name)


def cache_warnings(seen: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in seen if "cache" in str(w.message)]


# ------------------------------------------------------------------ tampered objects
def overwrite_in_place(path: Path, other: Path) -> None:
    with open(path, "r+b") as handle:
        handle.write(EVIL)


def overwrite_keeping_the_times(path: Path, other: Path) -> None:
    # Restoring the mtime to the nanosecond: only the ctime tells (and the seal's bound on it; a
    # change within the seal's slack after the download would be its documented blind spot).
    before = path.stat()
    overwrite_in_place(path, other)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # only ctime tells now


def one_bit_flipped(path: Path, other: Path) -> None:  # bit rot
    data = bytearray(path.read_bytes())
    data[7] ^= 0x01
    with open(path, "r+b") as handle:
        handle.write(data)


def replaced_by_rename(path: Path, other: Path) -> None:
    tmp = path.with_name("swap")
    tmp.write_bytes(EVIL)
    os.replace(tmp, path)


def truncated(path: Path, other: Path) -> None:
    os.truncate(path, len(ORIGINAL) // 2)


def emptied(path: Path, other: Path) -> None:
    os.truncate(path, 0)


def appended(path: Path, other: Path) -> None:
    with open(path, "ab") as handle:
        handle.write(b"more")


def hard_link_to_another_file(path: Path, other: Path) -> None:
    os.unlink(path)
    os.link(other, path)


def symlink_to_another_file(path: Path, other: Path) -> None:
    os.unlink(path)
    os.symlink(other, path)


def a_folder(path: Path, other: Path) -> None:
    os.unlink(path)
    path.mkdir()


def a_fifo(path: Path, other: Path) -> None:  # opening it for reading would block for ever
    os.unlink(path)
    os.mkfifo(path)


TAMPERINGS = [
    overwrite_in_place,
    overwrite_keeping_the_times,
    one_bit_flipped,
    replaced_by_rename,
    truncated,
    emptied,
    appended,
    hard_link_to_another_file,
    symlink_to_another_file,
    a_folder,
    a_fifo,
]


@pytest.mark.parametrize("tamper", TAMPERINGS, ids=lambda f: f.__name__)
def test_a_tampered_object_is_not_served_but_downloaded_again_with_one_warning(
    tmp_path: Path, tamper: Callable[[Path, Path], None]
) -> None:
    """Before: the tampered file was served as a hit (the FIFO hung the reader), and the stats kept
    counting the bytes that were downloaded."""
    cache = new_cache(tmp_path / "cache")
    first = download(cache, "a.bin")
    cache.release(first)
    other = tmp_path / "other.bin"
    other.write_bytes(EVIL)
    time.sleep(AFTER_THE_DOWNLOAD)
    tamper(Path(first.path), other)
    result: list[CachedFile] = []
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        worker = threading.Thread(target=lambda: result.append(download(cache, "a.bin")), daemon=True)
        worker.start()
        worker.join(30)
    assert result, "the lookup hung"
    again = result[0]
    assert again.downloaded
    assert Path(again.path).read_bytes() == ORIGINAL
    (warned,) = cache_warnings(seen)
    assert warned.startswith(f"cache file {first.path} ") and warned.endswith("removed it; it will be downloaded again")
    assert other.read_bytes() == EVIL  # what a link pointed at is left alone
    cache.release(again)
    stats = cache.stats()
    assert (stats.resident_bytes, stats.entries) == (len(ORIGINAL), 1)
    assert Path(first.path).stat().st_size == len(ORIGINAL)


def test_a_file_planted_under_a_key_never_downloaded_is_not_a_hit(tmp_path: Path) -> None:
    """Before: any file at ``objects/<key[:2]>/<key><ext>`` was a hit; a key is a SHA-256 of the
    remote URL, size and ETag, all of which a listing shows."""
    cache = new_cache(tmp_path / "cache")
    key = FileCache.key("s3://bucket/planted.bin", len(ORIGINAL), "etag")
    planted = tmp_path / "cache" / "objects" / key[:2] / f"{key}.bin"
    planted.parent.mkdir(mode=0o700)
    planted.write_bytes(EVIL)
    assert lookup(cache, "planted.bin") is None
    got = download(cache, "planted.bin")
    assert got.downloaded
    assert Path(got.path).read_bytes() == ORIGINAL
    cache.release(got)
    hit = lookup(cache, "planted.bin")  # what was downloaded is a hit
    assert hit is not None
    assert not hit.downloaded
    cache.release(hit)


def test_a_file_planted_with_the_right_bytes_but_no_record_is_not_a_hit_either(tmp_path: Path) -> None:
    """Only a record the cache wrote when it downloaded a file makes that file a hit."""
    cache = new_cache(tmp_path / "cache")
    key = FileCache.key("s3://bucket/p.bin", len(ORIGINAL), "etag")
    planted = tmp_path / "cache" / "objects" / key[:2] / f"{key}.bin"
    planted.parent.mkdir(mode=0o700)
    planted.write_bytes(ORIGINAL)
    assert lookup(cache, "p.bin") is None


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(min_size=1, max_size=64), position=st.integers(min_value=0), byte=st.integers(0, 255))
def test_no_change_of_an_object_s_bytes_is_served(tmp_path: Path, data: bytes, position: int, byte: int) -> None:
    """Any byte changed, in place, whatever the change: never served."""
    root = tmp_path / uuid.uuid4().hex
    cache = new_cache(root)
    first = download(cache, "x.bin", data)
    cache.release(first)
    changed = bytearray(data)
    index = position % len(data)
    if changed[index] == byte:
        byte = (byte + 1) % 256
    changed[index] = byte
    time.sleep(AFTER_THE_DOWNLOAD)
    with open(first.path, "r+b") as handle:
        handle.write(changed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert lookup(cache, "x.bin", data) is None


# ------------------------------------------------------------------ modes
def modes(root: Path) -> dict[str, str]:
    """The mode of everything under ``root`` (and of root), as octal strings by relative path."""
    found = {".": oct(stat.S_IMODE(root.stat().st_mode))}
    for folder, dirs, files in os.walk(root):
        for name in (*dirs, *files):
            path = Path(folder) / name
            found[str(path.relative_to(root))] = oct(stat.S_IMODE(path.lstat().st_mode))
    return found


@contextlib.contextmanager
def umask(mask: int) -> Iterator[None]:
    previous = os.umask(mask)
    try:
        yield
    finally:
        os.umask(previous)


def test_every_folder_is_0700_and_every_file_0600_whatever_the_umask(tmp_path: Path) -> None:
    """Before: folders 0755 and files 0644 (the umask's), readable by every OS user."""
    root = tmp_path / "cache"
    with umask(0o000):
        cache = new_cache(root, max_bytes=100, headroom=0.5)
        kept = download(cache, "kept.bin")  # resident
        streamed = download(cache, "streamed.bin")  # past the resident set: in stream/<pid>/
        assert (kept.resident, streamed.resident) == (True, False)
        (ticket,) = cache.reserve([(FileCache.key("s3://bucket/t", 5, "e"), 5, "t.bin")], group="g")
        assert isinstance(ticket, Ticket)
        Path(ticket.tmp).write_bytes(b"12345")  # a download under way, written with mode 0666
        finished = cache.finish(ticket)
        cache.flush()
    found = modes(root)
    for name in ("index.db", "index.db-wal", "index.db-shm", ".uc_jupyter", "FORMAT"):
        assert name in found
    assert any(name.startswith("stream/") for name in found)
    wide = {
        name: mode
        for name, mode in found.items()
        if mode != ("0o700" if (root / name).is_dir() and not (root / name).is_symlink() else "0o600")
    }
    assert wide == {}
    for got in (kept, streamed, finished):
        cache.release(got)


def test_a_cache_with_wider_modes_is_tightened_when_opened_and_still_hits(tmp_path: Path) -> None:
    """Before: modes were left as found."""
    root = tmp_path / "cache"
    cache = new_cache(root)
    cache.release(download(cache, "a.bin"))
    del cache
    for folder, dirs, files in os.walk(root):
        for name in dirs:
            os.chmod(Path(folder) / name, 0o755)
        for name in files:
            os.chmod(Path(folder) / name, 0o644)
    os.chmod(root, 0o755)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a chmod changes the ctime: checked again, not "damaged"
        again = new_cache(root)
        hit = lookup(again, "a.bin")
    assert hit is not None
    assert not hit.downloaded
    again.release(hit)
    assert set(modes(root).values()) == {"0o700", "0o600"}


# ------------------------------------------------------------------ folders that are not a cache
def snapshot(folder: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(folder)): (p.read_bytes() if p.is_file() else None) for p in sorted(folder.rglob("*"))}


def test_a_project_folder_is_refused_never_emptied(tmp_path: Path) -> None:
    """Before: FileCache("/x/proj") deleted its tmp/, stream/, objects/ and index.db."""
    project = tmp_path / "proj"
    for relative, content in {
        "README.md": b"# my project",
        "index.db": b"my own database",
        "objects/model.pt": b"weights",
        "tmp/notes.txt": b"notes",
        "stream/a.csv": b"1,2",
    }.items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_bytes(content)
    before = snapshot(project)
    with pytest.raises(
        ValueError,
        match=rf"^cache_dir {re.escape(str(project))} is not a cache: it holds README.md, index.db, objects and 2 more",
    ):
        FileCache(project, max_bytes=10**6, min_free_bytes=0)
    with pytest.raises(ValueError, match="is not a cache"):
        FileCache(project / "objects", max_bytes=10**6, min_free_bytes=0)
    assert snapshot(project) == before


def test_the_catalog_home_and_other_caches_are_refused(catalog: LocalCatalog, tmp_path: Path) -> None:
    """Before: FileCache(home) would have emptied nothing it knew, but laid a cache over the
    metastore's folder (so a volume over the cache was a volume over the metastore)."""
    home = Path(os.environ["UC_JUPYTER_HOME"])
    before = snapshot(home)
    with pytest.raises(ValueError, match=f"^cache_dir {re.escape(str(home))} is uc_jupyter's home folder, not a cache"):
        FileCache(home, max_bytes=10**6, min_free_bytes=0)
    assert snapshot(home) == before
    outer = new_cache(tmp_path / "outer")
    with pytest.raises(ValueError, match=f"lies inside the cache {re.escape(str(outer.root))}"):
        FileCache(outer.root / "tmp", max_bytes=10**6, min_free_bytes=0)


def test_a_symlinked_index_is_replaced_not_followed(catalog: LocalCatalog, tmp_path: Path) -> None:
    """Before: SQLite followed index.db to whatever it pointed at and wrote the cache's tables into
    it; pointed at the metastore, that is the catalog's database."""
    root = tmp_path / "cache"
    cache = new_cache(root)
    cache.release(download(cache, "a.bin"))
    del cache
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        with contextlib.suppress(FileNotFoundError):
            (root / name).unlink()
    metastore = next(Path(os.environ["UC_JUPYTER_HOME"]).glob("*.db"))
    os.symlink(metastore, root / "index.db")
    before = metastore.read_bytes()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        again = new_cache(root)
        again.release(download(again, "b.bin"))
        again.stats()
    assert metastore.read_bytes() == before
    assert not (root / "index.db").is_symlink()


def test_a_symlinked_folder_inside_the_cache_is_replaced_not_written_through(tmp_path: Path) -> None:
    """Before: objects/ as a symlink to another folder sent every download there."""
    root = tmp_path / "cache"
    new_cache(root)
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "keep.txt").write_bytes(b"mine")
    for sub in ("objects", "tmp"):
        os.rmdir(root / sub)
        os.symlink(victim, root / sub)
    cache = new_cache(root)
    cache.release(download(cache, "a.bin"))
    assert snapshot(victim) == {"keep.txt": b"mine"}
    assert not (root / "objects").is_symlink()


# ------------------------------------------------------------------ a lost or damaged index
def test_a_deleted_index_is_rebuilt_empty_and_the_objects_it_proved_go(tmp_path: Path) -> None:
    """Before: the objects were orphans (uncounted, never evicted); then they were entered again and
    served on their size alone. Without their checksums nothing proves their bytes: they are removed."""
    root = tmp_path / "cache"
    cache = new_cache(root)
    for i in range(3):
        cache.release(download(cache, f"f{i}.bin", bytes([i]) * 1000))
    cache.flush()
    del cache
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        with contextlib.suppress(FileNotFoundError):
            (root / name).unlink()
    with pytest.warns(UserWarning, match=r"cache index .*index.db was missing: rebuilt it empty and removed the 3"):
        again = new_cache(root)
    assert (again.stats().resident_bytes, again.stats().entries) == (0, 0)
    assert [p for p in (root / "objects").rglob("*") if p.is_file()] == []  # nothing orphaned either
    assert lookup(again, "f1.bin", b"\x01" * 1000) is None  # a miss: it downloads again
    again.release(download(again, "f1.bin", b"\x01" * 1000))
    assert again.stats().entries == 1


@pytest.mark.parametrize("tamper", [overwrite_in_place, overwrite_keeping_the_times], ids=lambda f: f.__name__)
def test_objects_overwritten_or_planted_before_the_index_is_lost_are_never_served(
    tmp_path: Path, tamper: Callable[[Path, Path], None]
) -> None:
    """The issue's break: index.db deleted after objects were overwritten (or a file planted under a
    key's name) served [ALICE-0, EVIL-1, ALICE-2] with only a warning that the index was rebuilt."""
    root = tmp_path / "cache"
    cache = new_cache(root)
    kept = [download(cache, f"f{i}.bin") for i in range(3)]
    for got in kept:
        cache.release(got)
    cache.flush()
    del cache
    tamper(Path(kept[1].path), tmp_path / "other")
    planted = Path(kept[2].path)
    planted.unlink()
    planted.write_bytes(EVIL)  # the same size, under the key's own name
    (root / "index.db").unlink()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        again = new_cache(root)
    served = [lookup(again, f"f{i}.bin") for i in range(3)]
    assert served == [None, None, None]  # every one downloads again: none is read from the disk
    again.release(download(again, "f1.bin"))
    hit = lookup(again, "f1.bin")  # downloaded again: the original bytes
    assert hit is not None and Path(hit.path).read_bytes() == ORIGINAL
    again.release(hit)


def test_an_object_pinned_while_its_index_is_rebuilt_stays_for_its_reader_and_then_goes(tmp_path: Path) -> None:
    root = tmp_path / "cache"
    cache = new_cache(root)
    reading = download(cache, "a.bin")  # pinned: a loop has it
    cache.flush()
    (root / "index.db").unlink()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        again = new_cache(root)
        assert Path(reading.path).read_bytes() == ORIGINAL  # its reader goes on
        assert again.stats().entries == 1  # counted while it stays
        assert lookup(again, "a.bin") is None  # its next use proves nothing: removed, downloads again
    assert any(
        "was found by a rebuild of a lost index, and nothing proves its bytes" in m for m in cache_warnings(seen)
    )
    assert again.stats().entries == 0
    cache.release(reading)


def not_a_database(data: bytes) -> bytes:
    return b"this is not a database" * 200


def pages_overwritten(data: bytes) -> bytes:  # the header and schema page intact, the rest garbage
    return data[:4096] + b"\xff" * (len(data) - 4096)


@pytest.mark.parametrize("damage", [not_a_database, pages_overwritten], ids=lambda f: f.__name__)
def test_a_damaged_index_is_rebuilt_empty(tmp_path: Path, damage: Callable[[bytes], bytes]) -> None:
    """Before: sqlite3.DatabaseError from FileCache() (and from every dataset using the cache)."""
    root = tmp_path / "cache"
    cache = new_cache(root)
    cache.release(download(cache, "a.bin"))
    cache.flush()
    del cache
    gc.collect()  # its connections close: the index is checkpointed, its -wal and -shm files go
    index = root / "index.db"
    assert not (root / "index.db-wal").exists()
    index.write_bytes(damage(index.read_bytes()))
    with pytest.warns(
        UserWarning, match=r"cache index .*index.db was damaged \(.*\): rebuilt it empty and removed the 1"
    ):
        again = new_cache(root)
    assert again.stats().entries == 0 and lookup(again, "a.bin") is None  # unproven without the index: gone


# ------------------------------------------------------------------ a full disk
@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs (mounting needs root, as CI has): a disk that really fills."""
    try:
        with mounted(tmp_path / "disk", "tmpfs", "size=1m,mode=0700") as where:
            yield where
    except MountUnavailable as exc:
        pytest.skip(str(exc))


def fill(disk: Path) -> None:
    """Write a file until the disk is full (closing it may fail the same way: the last buffered bytes
    have no room either, so the suppression wraps the close too)."""
    with contextlib.suppress(OSError), open(disk / "filler", "wb") as handle:
        while True:
            handle.write(b"\0" * 65536)
            handle.flush()


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.mark.parametrize("extra", [{}, {"version_aware": False}], ids=["object-store", "thread-downloads"])
def test_a_disk_that_fills_during_an_epoch_stops_the_loop_within_seconds_naming_the_file(
    catalog: LocalCatalog, s3_server: S3TestServer, small_disk: Path, extra: dict[str, Any]
) -> None:
    """Before: the error reached only stderr (from a future's callback, when the index could not
    be written either) and the loop waited for ever; or a raw sqlite3 OperationalError."""
    bucket = f"b{uuid.uuid4().hex[:12]}"
    folder = s3_server.bucket(bucket) / "data"
    folder.mkdir()
    for i in range(40):
        (folder / f"f{i:03d}.bin").write_bytes(os.urandom(20_000))
    external_location(catalog, f"s3://{bucket}", {**s3_server.storage_options, **extra})
    catalog.create_volume("main.ml.full", f"s3://{bucket}/data")
    # A small window (prefetch=4): downloads must still be to come when the disk fills after 5 files;
    # the default window starts at 64 and would have fetched all 40 before.
    dataset = UCVolumeDataset(
        "/Volumes/main/ml/full", cache_dir=small_disk / "cache", cache_max_bytes=10**8, min_free_bytes=0, prefetch=4
    )
    outcome: list[BaseException | int] = []

    def consume() -> None:
        read = 0
        try:
            for path in dataset:
                read += len(Path(path).read_bytes())
                if read == 100_000:
                    fill(small_disk)  # another program fills the disk mid-epoch
            outcome.append(read)
        except BaseException as exc:
            outcome.append(exc)

    started = time.monotonic()
    consumer = threading.Thread(target=consume, daemon=True)
    consumer.start()
    consumer.join(60)
    assert outcome, "the loop hung on a full disk"
    (error,) = outcome
    assert isinstance(error, VolumeReadError), error
    assert time.monotonic() - started < 30
    message = str(error)
    assert message.startswith("cannot read /Volumes/main/ml/full/f0")
    assert f"the disk holding the cache {small_disk / 'cache'} is full" in message
    assert "\n" not in message


# ------------------------------------------------------------------ a budget too small
def test_a_budget_between_one_and_two_files_streams_instead_of_waiting_and_failing(
    catalog: LocalCatalog, s3_server: S3TestServer, tmp_path: Path
) -> None:
    """Before: the first file stayed resident (pinned) and the second waited 120 s for room, then
    CacheBudgetError; the README promises that what does not fit streams through."""
    bucket = f"b{uuid.uuid4().hex[:12]}"
    folder = s3_server.bucket(bucket) / "data"
    folder.mkdir()
    files = {f"f{i:02d}.bin": os.urandom(1000) for i in range(12)}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    external_location(catalog, f"s3://{bucket}", s3_server.storage_options)
    catalog.create_volume("main.ml.small", f"s3://{bucket}/data")
    dataset = UCVolumeDataset(
        "/Volumes/main/ml/small", cache_dir=tmp_path / "cache", cache_max_bytes=1500, min_free_bytes=0
    )
    started = time.monotonic()
    read = [Path(path).read_bytes() for path in dataset]  # each file used before the next is asked for
    assert read == [files[name] for name in sorted(files)]
    assert time.monotonic() - started < 60
    assert dataset.stats().cache is not None
    assert dataset.stats().cache.used_bytes <= 1500  # type: ignore[union-attr]
