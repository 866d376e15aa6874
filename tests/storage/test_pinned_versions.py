"""Remote files read as the versions a listing saw (uc_jupyter.storage.pinned_versions): only listed
files open, reads end at the listed size, a file that shrank is one line; on S3 the listed ETag is
sent with each read (tests/security/test_export_paths.py rewrites an export under Hugging Face)."""

from __future__ import annotations

import pickle
import uuid

import fsspec
import pytest

from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.pinned_versions import PROTOCOL, Pins, url_of


@pytest.fixture
def folder() -> str:
    """A folder of the memory filesystem holding a.bin (10 bytes) and b.bin (4 bytes)."""
    root = f"pins-{uuid.uuid4().hex[:8]}"  # as a bucket's: no leading slash
    memory = fsspec.filesystem("memory")
    memory.pipe_file(f"{root}/a.bin", b"0123456789")
    memory.pipe_file(f"{root}/b.bin", b"abcd")
    return root


def pinned(folder: str, files: dict[str, tuple[int, str | None]]) -> fsspec.AbstractFileSystem:
    pins = Pins("memory", {}, {f"{folder}/{name}": pin for name, pin in files.items()}, "/Volumes/main/ml/v", folder)
    return fsspec.filesystem(PROTOCOL, pins=pins)


def test_only_listed_files_open_and_each_reads_its_listed_bytes(folder: str) -> None:
    fs = pinned(folder, {"a.bin": (10, None)})
    with fs.open(url_of(f"{folder}/a.bin")) as handle:
        assert handle.read() == b"0123456789"
    assert fs.info(url_of(f"{folder}/a.bin"))["size"] == 10
    assert fs.ls(url_of(folder), detail=False) == [f"{folder}/a.bin"]
    with pytest.raises(FileNotFoundError, match="b.bin was not listed"):
        fs.open(url_of(f"{folder}/b.bin"))


def test_a_file_that_shrank_since_the_listing_is_one_line(folder: str) -> None:
    fs = pinned(folder, {"a.bin": (10, None)})
    fsspec.filesystem("memory").pipe_file(f"{folder}/a.bin", b"01234")
    with pytest.raises(VolumeReadError) as refused, fs.open(url_of(f"{folder}/a.bin")) as handle:
        handle.read()
    assert str(refused.value) == (
        "cannot read /Volumes/main/ml/v/a.bin: it changed since the dataset listed it (10 bytes then, 5 now); "
        "make the dataset again to list the folder again"
    )


def test_a_file_that_grew_is_read_as_far_as_it_was_listed(folder: str) -> None:
    fs = pinned(folder, {"a.bin": (4, None)})
    with fs.open(url_of(f"{folder}/a.bin")) as handle:
        assert handle.read() == b"0123"


def test_its_options_unpickle_into_the_same_pins(folder: str) -> None:
    pins = Pins("memory", {}, {f"{folder}/a.bin": (10, '"e1"')}, "/Volumes/main/ml/v", folder)
    again = pickle.loads(pickle.dumps(pins))
    assert again == pins and again.files == pins.files
