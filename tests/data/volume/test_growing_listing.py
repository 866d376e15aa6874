"""An unshuffled pass over a remote volume starts on the listing's first page: the dataset is made
once a first file is listed, its streams fetch while the listing goes on (in this process and in
DataLoader workers forked before it ends), and it delivers what a whole listing would, once each;
a shuffled pass waits for the whole listing. Errors still come from the constructor."""

from __future__ import annotations

import os
import pickle
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch.utils.data

from tests.data.conftest import write_files
from uc_jupyter.catalog import NotFound
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.data.volume.growing_listing import GrowingListing
from uc_jupyter.storage.pages import Page
from uc_jupyter.testing.s3_server import S3TestServer

Volume = Callable[..., tuple[str, Path]]


def content(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def folders_of(folder: Path, parts: int, per_part: int) -> dict[str, bytes]:
    written: dict[str, bytes] = {}
    for part in range(parts):
        written |= write_files(folder, per_part, size=40, sub=f"part-{part}/")
    return written


def test_an_unshuffled_pass_yields_its_first_file_while_the_listing_still_runs(
    s3_volume: Volume, s3: S3TestServer
) -> None:
    path, folder = s3_volume()
    written = folders_of(folder, parts=2, per_part=2500)  # three pages a sub-folder
    s3.configure(list_latency=1.0)  # each page a second: the listing takes about four
    dataset = UCVolumeDataset(path, recursive=True, transform=content)
    first = next(iter(dataset))
    listed_then = dataset.stats().listed_files
    assert first == written["part-0/f00000.bin"]
    assert 0 < listed_then < len(written)  # the first file came before the listing's end
    assert dataset.stats().streams[0].shard_size > 0  # dashboards see the shard grow, not an empty one
    assert len(dataset) == len(written)  # waits for the end
    assert dataset.stats().listed_files == len(written)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_streamed_pass_delivers_what_a_whole_listing_does_once_each(
    s3_volume: Volume, s3: S3TestServer, workers: int
) -> None:
    path, folder = s3_volume()
    written = folders_of(folder, parts=3, per_part=1200)
    written |= write_files(folder, 5, size=40, prefix="top")  # files beside the sub-folders
    (folder / "part-1" / ".hidden.bin").write_bytes(b"never read")
    (folder / "part-2" / "_SUCCESS").write_bytes(b"")
    s3.configure(list_latency=0.2)  # the workers start while the listing runs
    streamed = UCVolumeDataset(path, recursive=True, transform=content, exclude="*/f00007.bin")
    loader = DataLoader(streamed, batch_size=50, num_workers=workers, collate_fn=list, mlflow=False)
    got = [item for batch in loader for item in batch]
    s3.configure(list_latency=0.0)
    whole = UCVolumeDataset(path, recursive=True, transform=content, exclude="*/f00007.bin", shuffle=True)
    expected = {value for relative, value in written.items() if not relative.endswith("/f00007.bin")}
    assert sorted(got) == sorted(expected)  # every file once, hidden and excluded ones never
    assert streamed.listing == whole.listing  # the same files, in the same order, the same digest
    assert streamed.skipped == whole.skipped == 3
    if workers == 0:  # one stream: the listing's own order
        assert got == [written[f.relative] for f in whole.listing.files]
    again = [item for batch in loader for item in batch]  # the next pass, on the whole listing
    assert sorted(again) == sorted(expected)


def test_ranks_of_a_streamed_pass_split_it_as_a_whole_listing_does(
    s3_volume: Volume, s3: S3TestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, folder = s3_volume()
    folders_of(folder, parts=2, per_part=1001)
    s3.configure(list_latency=0.2)
    got = {}
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "3")
        dataset = UCVolumeDataset(path, recursive=True, on_uneven="drop", transform=content)
        got[rank] = list(dataset)
        assert dataset.stats().streams[0].dropped == (rank == 0)  # 2002 files: rank 0 has the one trimmed
    s3.configure(list_latency=0.0)
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    whole = list(UCVolumeDataset(path, recursive=True, transform=content))
    assert [len(items) for items in got.values()] == [667, 667, 667]
    assert [item for trio in zip(*got.values(), strict=True) for item in trio] == whole[:2001]


def test_a_shuffled_pass_waits_for_the_whole_listing(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume()
    written = folders_of(folder, parts=2, per_part=1100)
    s3.configure(list_latency=0.2)
    dataset = UCVolumeDataset(path, recursive=True, shuffle=True, transform=content)
    assert dataset.stats().listed_files == len(written)  # listed whole before the constructor returned
    assert sorted(dataset) == sorted(written.values())


def test_errors_still_come_from_the_constructor(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume()
    with pytest.raises(NotFound, match="does not exist"):
        UCVolumeDataset(f"{path}/nothing", recursive=True)
    (folder / "only" / ".hidden").parent.mkdir(parents=True)
    (folder / "only" / ".hidden").write_bytes(b"x")
    (folder / "only" / "_SUCCESS").write_bytes(b"")
    with pytest.raises(ValueError, match=f"^{path}/only holds no files to read$"):
        UCVolumeDataset(f"{path}/only", recursive=True)
    write_files(folder / "only", 3, prefix="a")
    with pytest.raises(ValueError, match=f"^{path}/only holds no matching files to read$"):
        UCVolumeDataset(f"{path}/only", recursive=True, include="*.png")


def test_a_dataset_pickled_mid_listing_travels_with_the_whole_listing(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume()
    written = folders_of(folder, parts=2, per_part=1500)
    s3.configure(list_latency=0.3)
    dataset = UCVolumeDataset(path, recursive=True, transform=content)
    copy = pickle.loads(pickle.dumps(dataset))  # a spawned worker's or a rank's copy
    assert copy.listing == dataset.listing and len(copy.listing.files) == len(written)
    assert isinstance(copy, torch.utils.data.IterableDataset)


def pages_of(*pages: list[str], hold: threading.Event | None = None, fail: Exception | None = None) -> Iterator[Page]:
    """A listing's pages (paths of 1 byte each): ``hold`` is awaited after the first; ``fail`` raised at the end."""
    for number, names in enumerate(pages):
        yield Page([(name, 1, "v") for name in names], [])
        if number == 0 and hold is not None:
            hold.wait(30)
    if fail is not None:
        raise fail


def test_a_worker_forked_mid_listing_reads_the_rest_and_its_error_from_the_spool() -> None:
    hold = threading.Event()
    first, second = [f"a/{i:04d}" for i in range(1000)], [f"b/{i:04d}" for i in range(500)]
    growing = GrowingListing(
        pages_of(first, second, hold=hold, fail=PermissionError("refused after two pages")),
        lambda relative: True,
        where="/Volumes/c/s/v/x",
        url="s3://b/x",
    ).first()
    assert growing.known() == 1000 and growing.total() is None
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # a DataLoader worker forked while the listing runs
        code = 1
        try:
            os.close(read)
            try:
                growing.final()
            except PermissionError as error:
                names = [f.relative for f in growing.files]
                os.write(write, pickle.dumps((names, str(error))))
                code = 0
        finally:
            os._exit(code)
    os.close(write)
    hold.set()
    with os.fdopen(read, "rb") as answer:
        names, error = pickle.loads(answer.read())
    assert os.waitpid(pid, 0)[1] == 0
    assert names == first + second and error == "refused after two pages"
    with pytest.raises(PermissionError, match="refused after two pages"):
        growing.final()


def test_a_store_that_lists_out_of_key_order_ends_the_listing_saying_what_to_do() -> None:
    growing = GrowingListing(
        pages_of(["a", "c"], ["b"]), lambda relative: True, where="/Volumes/c/s/v/x", url="s3://b/x"
    )
    with pytest.raises(OSError, match="listed 'b' after 'c'; make the dataset with shuffle=True"):
        growing.final()


def test_a_listing_still_arriving_does_not_pickle() -> None:
    hold = threading.Event()
    growing = GrowingListing(
        pages_of(["a"], ["b"], hold=hold), lambda relative: True, where="/Volumes/c/s/v/x", url="u"
    )
    with pytest.raises(TypeError, match="pickle the dataset"):
        pickle.dumps(growing)
    hold.set()
    assert [f.relative for f in growing.final().files] == ["a", "b"]
