"""One contract for every read backend :func:`~uc_jupyter.storage.reads.open_storage` chooses: a
local folder (walked from its volume's root, no symlink followed), object storage through obstore
(s3 against the S3 test server, gs against fake-gcs-server, az against Azurite) and fsspec (its
in-memory filesystem). The same folder on each lists the same
files in pages, names its sub-folders, downloads each file whole by its storage path, and answers a
missing folder, a file named as a folder and a file changed since the listing in one line each."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import fsspec
import pytest

from uc_jupyter.errors import NotFound
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.downloads import Job
from uc_jupyter.storage.reads import VolumeStorage, open_storage
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.testing.azurite import Azurite, azurite
from uc_jupyter.testing.gcs_emulator import GcsEmulator, gcs_emulator
from uc_jupyter.testing.s3_server import S3TestServer

FILES = {"a.bin": b"A" * 3000, "sub/b.bin": b"B" * 17, "sub/deeper/c.bin": b"C" * 70_000}
WHERE = "/Volumes/main/ml/v/data"


@dataclass
class Folder:
    """A volume folder holding FILES on one backend: its URL, the volume's root URL, its options, and
    how to write a file into it behind the storage's back."""

    url: str
    root: str
    options: dict[str, Any]
    put: Callable[[str, bytes], None]

    def storage(self, below: str = "") -> VolumeStorage:
        url = f"{self.url}/{below}" if below else self.url
        return open_storage(url, self.options, where=f"{WHERE}/{below}".rstrip("/"), root=self.root)


def _local(tmp_path: Path) -> Folder:
    folder = tmp_path / "vol" / "data"
    folder.mkdir(parents=True)

    def put(relative: str, data: bytes) -> None:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)

    return Folder(f"file://{folder}", f"file://{tmp_path / 'vol'}", {}, put)


def _s3(s3: S3TestServer) -> Folder:
    bucket = f"b{uuid.uuid4().hex[:12]}"
    folder = s3.bucket(bucket) / "data"

    def put(relative: str, data: bytes) -> None:
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_bytes(data)

    return Folder(f"s3://{bucket}/data", f"s3://{bucket}", s3.storage_options, put)


def _gs(gcs: GcsEmulator) -> Folder:
    bucket = f"b{uuid.uuid4().hex[:12]}"
    return Folder(
        f"gs://{bucket}/data", f"gs://{bucket}", gcs.options(), lambda key, data: gcs.put(bucket, f"data/{key}", data)
    )


def _az(az: Azurite) -> Folder:
    container = f"c{uuid.uuid4().hex[:12]}"
    return Folder(
        f"az://{container}/data",
        f"az://{container}",
        az.options(),
        lambda key, data: az.put(container, f"data/{key}", data),
    )


def _memory() -> Folder:
    memory, base = fsspec.filesystem("memory"), f"/t{uuid.uuid4().hex[:12]}/data"

    def put(relative: str, data: bytes) -> None:
        memory.pipe(f"{base}/{relative}", data)

    return Folder(f"memory:/{base}", f"memory:/{base}", {}, put)


@pytest.fixture(scope="module")
def gcs() -> Iterator[GcsEmulator]:
    with gcs_emulator() as running:
        yield running


@pytest.fixture(scope="module")
def az() -> Iterator[Azurite]:
    with azurite() as running:
        yield running


SERVED = pytest.mark.servers


@pytest.fixture(
    params=[
        "local",
        pytest.param("s3", marks=SERVED),
        pytest.param("gs", marks=SERVED),
        pytest.param("az", marks=SERVED),
        "memory",
    ]
)
def folder(request: pytest.FixtureRequest, tmp_path: Path) -> Folder:
    made = {
        "local": lambda: _local(tmp_path),
        "s3": lambda: _s3(request.getfixturevalue("s3")),
        "gs": lambda: _gs(request.getfixturevalue("gcs")),
        "az": lambda: _az(request.getfixturevalue("az")),
        "memory": _memory,
    }[request.param]()
    for relative, data in FILES.items():
        made.put(relative, data)
    return made


def _listed(storage: VolumeStorage, *, recursive: bool) -> tuple[dict[str, int], list[str]]:
    files: dict[str, int] = {}
    folders: list[str] = []
    for page in storage.pages(recursive=recursive):
        files.update((relative, size) for relative, size, _ in page.files)
        folders.extend(page.folders)
    return files, sorted(folders)


@pytest.mark.in_a_fork
def test_a_listing_finds_every_file_with_its_size(folder: Folder) -> None:
    storage = folder.storage()
    assert _listed(storage, recursive=True) == ({k: len(v) for k, v in FILES.items()}, [])
    assert _listed(storage, recursive=False) == ({"a.bin": 3000}, ["sub"])


@pytest.mark.in_a_fork
def test_downloads_fetch_each_file_whole_by_its_storage_path(folder: Folder, tmp_path: Path) -> None:
    storage = folder.storage()
    root = st.storage_path(folder.url).rstrip("/")
    downloads = storage.downloads(RetryPolicy(attempts=1), on_retry=lambda: None, threads=2)
    try:
        jobs = [
            Job(f"{root}/{relative}", str(tmp_path / f"copy{i}"), f"{WHERE}/{relative}", len(data))
            for i, (relative, data) in enumerate(FILES.items())
        ]
        for future in downloads.start(jobs):
            future.result(60)
    finally:
        downloads.close()
    assert [(tmp_path / f"copy{i}").read_bytes() for i in range(len(FILES))] == list(FILES.values())


@pytest.mark.in_a_fork
def test_a_file_changed_since_the_listing_is_refused_naming_it(folder: Folder, tmp_path: Path) -> None:
    storage = folder.storage()
    folder.put("a.bin", b"A" * 3001)
    downloads = storage.downloads(RetryPolicy(attempts=1), on_retry=lambda: None, threads=1)
    job = Job(f"{st.storage_path(folder.url).rstrip('/')}/a.bin", str(tmp_path / "copy"), f"{WHERE}/a.bin", 3000)
    try:
        with pytest.raises(OSError, match=rf"{WHERE}/a.bin: it changed since the dataset listed it \(3000 bytes then"):
            downloads.start([job])[0].result(60)
    finally:
        downloads.close()


@pytest.mark.in_a_fork
def test_a_missing_folder_and_a_file_named_as_a_folder_are_one_line_each(folder: Folder) -> None:
    with pytest.raises(NotFound, match=rf"^{WHERE}/nothing\b.*does not exist"):
        _listed(folder.storage("nothing"), recursive=True)
    with pytest.raises((NotADirectoryError, NotFound), match=rf"^{WHERE}/a.bin "):
        _listed(folder.storage("a.bin"), recursive=True)
