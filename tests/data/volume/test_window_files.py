"""ListingKeys and WantedFiles (uc_jupyter.data.volume.window_files): a stream's files as the window reads them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from uc_jupyter.data.cache import FileCache
from uc_jupyter.data.stream.partition import Grid, StreamPositions
from uc_jupyter.data.volume.listing import RemoteFile
from uc_jupyter.data.volume.window_files import ListingKeys, WantedFiles

URL = "s3://bucket/images"
ROOT = "bucket/images"
WHERE = "/Volumes/main/ml/images"
FILES = [
    RemoteFile("cats/1.png", 10, '"e1"'),
    RemoteFile("cats/2.png", 20, '"e2"'),
    RemoteFile("dogs/deep/3.jpg", 30, None),
    RemoteFile("top.txt", 40, "1765012345.0"),
]


def wanted_of(positions: Sequence[Any], files: list[RemoteFile] = FILES) -> WantedFiles:
    return WantedFiles(files, ListingKeys(URL), positions, root=ROOT, where=WHERE)


def test_each_file_carries_the_caches_key_its_size_name_and_both_paths() -> None:
    wanted = wanted_of([np.int64(2), 0])  # a shard's own positions are numpy integers
    assert len(wanted) == 2
    far, near = wanted[0], wanted[1]
    assert far.key == FileCache.key(f"{URL}/dogs/deep/3.jpg", 30, None)  # the key a reader of the cache looks up
    assert (far.size, far.name, far.source, far.where) == (
        30,
        "3.jpg",
        "bucket/images/dogs/deep/3.jpg",
        "/Volumes/main/ml/images/dogs/deep/3.jpg",
    )
    assert near.key == FileCache.key(f"{URL}/cats/1.png", 10, '"e1"') and near.name == "1.png"
    assert wanted[3 - 4] == wanted[1]  # from the end, as any sequence


def test_slices_follow_the_positions_in_their_order() -> None:
    wanted = wanted_of([3, 1, 1, 0])  # a shard's positions (as a list: the dataset converts numpy's), one repeated
    assert [w.name for w in wanted] == ["top.txt", "2.png", "2.png", "1.png"]
    assert [w.name for w in wanted[1:3]] == ["2.png", "2.png"]
    assert [w.name for w in wanted[::-2]] == ["1.png", "2.png"]
    assert list(wanted[4:]) == [] and list(wanted_of([])) == []
    with pytest.raises(IndexError):
        wanted[4]


def test_a_file_changed_or_in_another_folder_gets_another_key() -> None:
    base = FileCache.key(f"{URL}/cats/1.png", 10, '"e1"')
    for url, file in [
        (URL, RemoteFile("cats/1.png", 10, '"e2"')),  # rewritten: a new ETag
        (URL, RemoteFile("cats/1.png", 11, '"e1"')),  # another size
        ("s3://bucket/images2", RemoteFile("cats/1.png", 10, '"e1"')),  # a folder that only begins the same
        ("s3://other/images", RemoteFile("cats/1.png", 10, '"e1"')),
    ]:
        [made] = WantedFiles([file], ListingKeys(url), [0], root=ROOT, where=WHERE)
        assert made.key != base


def test_keys_are_made_only_as_far_as_asked_and_the_same_however_made() -> None:
    keys = ListingKeys(URL)
    assert len(keys.upto(FILES, 1)) == 32
    assert len(keys.upto(FILES, 0)) == 32  # never fewer than made
    step_by_step = bytes(keys.upto(FILES, 3))
    assert len(step_by_step) == 96
    at_once = ListingKeys(URL).upto(FILES, len(FILES))
    assert bytes(at_once[:96]) == step_by_step
    assert [at_once[32 * i : 32 * i + 32].hex() for i in range(4)] == [
        FileCache.key(f"{URL}/{f.relative}", f.size, f.version) for f in FILES
    ]
    wanted = WantedFiles(FILES, keys, [1], root=ROOT, where=WHERE)
    assert wanted[0].key == FileCache.key(f"{URL}/cats/2.png", 20, '"e2"')
    assert len(keys.upto(FILES, 0)) == 96  # a read of position 1 made none beyond what was made


class Arriving:
    """A listing under way, driven by the test: ``wait_for`` lets the next file arrive."""

    def __init__(self, files: list[RemoteFile], coming: list[RemoteFile]) -> None:
        self.files, self.coming, self.waits = files, coming, 0

    def known(self) -> int:
        return len(self.files)

    def total(self) -> int | None:
        return None if self.coming else len(self.files)

    def wait_for(self, count: int) -> int:
        self.waits += 1
        if self.coming:
            self.files.append(self.coming.pop(0))
        return len(self.files)


def test_a_listing_still_arriving_grows_under_the_window_with_its_keys() -> None:
    files = FILES[:1]
    arriving = Arriving(files, list(FILES[1:]))
    positions = StreamPositions(arriving, Grid(), "pad")
    keys = ListingKeys(URL)
    wanted = WantedFiles(files, keys, positions, root=ROOT, where=WHERE)
    assert len(wanted) == 1 and wanted[0].name == "1.png"
    assert wanted.wait_beyond(0) and arriving.waits == 0  # one more is known: no wait
    assert wanted.wait_beyond(2) and arriving.waits == 2  # waited for two more to arrive
    assert [w.name for w in wanted[:4]] == ["1.png", "2.png", "3.jpg"]  # what is known so far
    assert wanted.wait_beyond(3) and len(wanted) == 4
    assert [w.key for w in wanted] == [FileCache.key(f"{URL}/{f.relative}", f.size, f.version) for f in FILES]
    assert not wanted.wait_beyond(4)  # all arrived: nothing beyond


def test_positions_that_do_not_grow_are_compared_without_waiting() -> None:
    wanted = wanted_of(range(3))
    assert wanted.wait_beyond(2) and not wanted.wait_beyond(3)
