"""Attacks by a writer to the volume's storage, who changes a file after a dataset listed it.

The prize: the reader's disk and bandwidth. Before, every download took the object whole (fsspec's
``get_file``; object_store's GET of whatever the object holds now) and only then did the cache
compare its size with the listed one: a listed 16 KiB object swapped for a 16 MiB one (or 10 GB)
was downloaded whole into the cache's tmp/, past the cache's budget, before it was refused. Now
every download asks for at most the listed size + 1 bytes: the pass fails with one line naming the
/Volumes path and both sizes, the store sent at most one byte more than listed, and nothing is left
in the cache's tmp/. A local volume's file appended to after the listing fails the same way. A
rewrite of the same size is caught by the listed ETag, which every download sends (If-Match),
through object_store and through s3fs alike.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import UCVolumeDataset
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.filesystem import FsspecStorage
from uc_jupyter.storage.objects import ObjectStorage
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.s3_server import S3TestServer

SMALL = 16384
LARGE = 2 << 20  # past the in-memory limit of object_store downloads: streamed
MUCH_LARGER = 16 << 20
# An s3fs option object_store has no use for (an upload setting) sends the volume through fsspec.
PATHS: dict[str, dict[str, Any]] = {"object-store": {}, "thread-downloads": {"fixed_upload_size": False}}
STORAGE = {"object-store": ObjectStorage, "thread-downloads": FsspecStorage}


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3")) as server:
        yield server


def volume(catalog: LocalCatalog, server: S3TestServer, sizes: dict[str, int], path: str) -> tuple[str, Path]:
    """An external volume on the server holding files of these sizes, read by ``path`` (one of
    PATHS); (its /Volumes path, its folder)."""
    extra = PATHS[path]
    name = f"v{uuid.uuid4().hex[:10]}"
    folder = server.bucket(name) / "data"
    folder.mkdir()
    for file, size in sizes.items():
        (folder / file).write_bytes(os.urandom(size))
    options = {**server.storage_options, **extra}
    assert isinstance(open_storage(f"s3://{name}/data", options), STORAGE[path])  # no request made
    external_location(catalog, f"s3://{name}", options)
    catalog.create_volume(f"main.ml.{name}", f"s3://{name}/data")
    return f"/Volumes/main/ml/{name}", folder


def resize(path: Path, size: int) -> None:
    """The writer's change: the object now holds ``size`` bytes (sparse: only how much is sent matters)."""
    with open(path, "r+b") as handle:
        handle.truncate(size)


def read_all(dataset: UCVolumeDataset) -> None:
    """One pass, each file read as a transform would."""
    for file in dataset:
        Path(file).read_bytes()


CHANGES = {  # name: (listed size, size now)
    # Both paths send the listed ETag (If-Match): the store refuses, and a HEAD says the size now.
    "grown": (SMALL, MUCH_LARGER),
    "grown-large": (LARGE, MUCH_LARGER),
    "shrunk": (SMALL, 100),
    "empty-grown": (0, MUCH_LARGER),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("change", CHANGES)
def test_a_file_changed_after_the_listing_fails_the_pass_costing_at_most_one_byte_more(
    catalog: LocalCatalog, s3_server: S3TestServer, tmp_path: Path, change: str, path: str
) -> None:
    listed, now = CHANGES[change]
    sizes = {"a.bin": SMALL, "b.bin": listed, "c.bin": SMALL}
    where, folder = volume(catalog, s3_server, sizes, path)
    cache = tmp_path / "cache"
    dataset = UCVolumeDataset(where, cache_dir=cache, cache_max_bytes=10**8, min_free_bytes=0)
    resize(folder / "b.bin", now)
    s3_server.reset()
    with pytest.raises(VolumeReadError) as failed:
        read_all(dataset)
    assert str(failed.value) == (
        f"cannot read {where}/b.bin: it changed since the dataset listed it ({listed} bytes then, "
        f"{now} now); make the dataset again to list the folder again"
    )
    assert s3_server.stats()["bytes_sent"] <= sum(sizes.values()) + 1  # the other two, and b.bin's listed + 1
    assert os.listdir(cache / "tmp") == []
    # What the error says to do works: a dataset made again lists the file as it is now.
    again = UCVolumeDataset(where, cache_dir=cache, cache_max_bytes=10**8, min_free_bytes=0)
    assert [len(Path(file).read_bytes()) for file in again] == [SMALL, now, SMALL]


@pytest.mark.parametrize("cache", ["auto", "always"])
def test_a_local_file_appended_to_after_the_listing_fails_the_pass_the_same_way(
    catalog: LocalCatalog, tmp_path: Path, cache: str
) -> None:
    info = catalog.create_volume("main.ml.appended")
    folder = Path(info.storage_location.removeprefix("file://"))
    for name in ("a.bin", "b.bin"):
        (folder / name).write_bytes(b"x" * SMALL)
    options: dict[str, Any] = {"cache": cache, "cache_max_bytes": 10**8, "min_free_bytes": 0}
    dataset = UCVolumeDataset(info.path, cache_dir=tmp_path / "cache", **options)
    with open(folder / "b.bin", "ab") as handle:
        handle.write(b"y" * MUCH_LARGER)
    with pytest.raises(VolumeReadError) as failed:
        read_all(dataset)
    assert str(failed.value) == (
        f"cannot read {info.path}/b.bin: it changed since the dataset listed it ({SMALL} bytes then, "
        f"{SMALL + MUCH_LARGER} now); make the dataset again to list the folder again"
    )
    if cache == "always":
        assert os.listdir(tmp_path / "cache" / "tmp") == []


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("size", [SMALL, LARGE])
def test_a_same_size_rewrite_after_the_listing_fails_the_pass_by_its_etag_and_nothing_is_cached(
    catalog: LocalCatalog, s3_server: S3TestServer, tmp_path: Path, path: str, size: int
) -> None:
    """The rewrite an attacker hopes goes unseen: as many bytes, other content. The listing's ETag
    goes with each download (If-Match), through object_store and through s3fs alike: the store
    refuses another version, the pass fails naming the file, and the cache holds nothing under the
    listed version's key (a later listing of the same ETag would otherwise be served the rewrite)."""
    where, folder = volume(catalog, s3_server, {"a.bin": size, "b.bin": size}, path)
    cache = tmp_path / "cache"
    dataset = UCVolumeDataset(where, cache="always", cache_dir=cache, cache_max_bytes=10**8, min_free_bytes=0)
    (folder / "b.bin").unlink()
    (folder / "b.bin").write_bytes(os.urandom(size))  # same size, another object
    with pytest.raises(VolumeReadError) as failed:
        read_all(dataset)
    assert str(failed.value) == (
        f"cannot read {where}/b.bin: it changed since the dataset listed it ({size} bytes, rewritten since "
        "with as many: its ETag is another); make the dataset again to list the folder again"
    )
    assert os.listdir(cache / "tmp") == []
    again = UCVolumeDataset(where, cache="always", cache_dir=cache, cache_max_bytes=10**8, min_free_bytes=0)
    assert sorted(Path(file).read_bytes() for file in again) == sorted(
        (folder / name).read_bytes() for name in ("a.bin", "b.bin")
    )
