"""UCVolumeDataset through its public interface, on local volumes and on a real S3-compatible server.

The tests marked ``both_backends`` (what the dataset asks of the catalog: resolving, READ VOLUME,
listing) also run with RestCatalog + a served home (tests/conftest.py); the others test the data path
after the catalog, which is the same on both.
"""

from __future__ import annotations

import collections
import contextlib
import gc
import json
import os
import re
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch.utils.data

from tests.data.conftest import write_files
from uc_jupyter.catalog import InvalidName, NotFound, PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import UCVolumeDataset
from uc_jupyter.data.cache import FileCache
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.s3_server import S3TestServer

Volume = Callable[..., tuple[str, Path]]


def read_all(paths: list[str]) -> list[bytes]:
    return [Path(p).read_bytes() for p in paths]


def loader_items(dataset: UCVolumeDataset, workers: int, context: str | None = None) -> list[Any]:
    loader = torch.utils.data.DataLoader(
        dataset,
        batch_size=None,
        num_workers=workers,
        multiprocessing_context=context if workers else None,
    )
    return list(loader)


def stored_bytes(cache_dir: Path) -> int:
    """Bytes of the cache's data files right now (files come and go while it is summed)."""
    total = 0
    for sub in ("objects", "stream", "tmp"):
        for folder, _, names in os.walk(cache_dir / sub):
            for name in names:
                with contextlib.suppress(FileNotFoundError):
                    total += os.stat(os.path.join(folder, name)).st_size
    return total


def read_bytes(path: str) -> bytes:
    return Path(path).read_bytes()


# ------------------------------------------------------------------ listing and bad input


@pytest.mark.both_backends
def test_lists_sorted_files_and_skips_hidden_and_marker_files(local_volume: Volume) -> None:
    path, folder = local_volume()
    files = write_files(folder, 3)
    write_files(folder, 2, sub="sub/")
    for junk in (".DS_Store", "_SUCCESS", "_committed_123", "_started_123", ".hidden/x.bin", "sub/.partial"):
        (folder / junk).parent.mkdir(parents=True, exist_ok=True)
        (folder / junk).write_bytes(b"junk")
    flat = UCVolumeDataset(path)
    assert [f.relative for f in flat.listing.files] == sorted(files)
    deep = UCVolumeDataset(path, recursive=True)
    assert [f.relative for f in deep.listing.files] == [*sorted(files), "sub/f00000.bin", "sub/f00001.bin"]
    picked = UCVolumeDataset(path, recursive=True, include="sub/*", exclude=["*1.bin"])
    assert [f.relative for f in picked.listing.files] == ["sub/f00000.bin"]
    # What the listing holds, in the dataset's stats: its files and their bytes (taken once, then kept).
    sizes = [(folder / name).stat().st_size for name in files]
    stats = flat.stats()
    assert (stats.listed_files, stats.listed_bytes) == (3, sum(sizes)) == (3, flat.listing.total_bytes)
    assert picked.stats().listed_bytes == (folder / "sub/f00000.bin").stat().st_size


@pytest.mark.both_backends
def test_a_local_volume_is_read_in_place(local_volume: Volume) -> None:
    path, folder = local_volume()
    files = write_files(folder, 4)
    dataset = UCVolumeDataset(path)
    assert dataset.in_place
    assert list(dataset) == [str(folder / name) for name in sorted(files)]
    assert dataset.stats().cache is None
    cached = UCVolumeDataset(path, cache="always", cache_max_bytes=10**6, min_free_bytes=0)
    paths = list(cached)
    assert read_all(paths[-1:]) == [files["f00003.bin"]]
    assert all(str(folder) not in p for p in paths)


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("setup", "path", "error", "message"),
    [
        (None, "/tmp/data", InvalidName, "must start with '/Volumes/"),
        (None, "main.ml.local", InvalidName, r"\(the volume main.ml.local is at /Volumes/main/ml/local\)"),
        (None, "/Volumes/main/ml/nope", NotFound, "volume main.ml.nope does not exist"),
        (
            "file",
            "/Volumes/main/ml/local/one.bin",
            NotADirectoryError,
            "/Volumes/main/ml/local/one.bin is a file",
        ),
        ("empty", "/Volumes/main/ml/local/empty", ValueError, "/Volumes/main/ml/local/empty holds no files"),
        (None, "/Volumes/main/ml/local/missing", NotFound, "/Volumes/main/ml/local/missing does not exist"),
    ],
)
def test_bad_paths_get_one_line_errors_naming_them(
    local_volume: Volume, setup: str | None, path: str, error: type[Exception], message: str
) -> None:
    _, folder = local_volume()
    (folder / "one.bin").write_bytes(b"1")
    (folder / "empty").mkdir()
    (folder / "empty" / ".hidden").write_bytes(b"h")
    with pytest.raises(error, match=message) as caught:
        UCVolumeDataset(path)
    assert "\n" not in str(caught.value)


@pytest.mark.both_backends
def test_reading_needs_read_volume(local_volume: Volume, catalog: LocalCatalog) -> None:
    path, folder = local_volume()
    write_files(folder, 2)
    catalog.create_principal("alice")
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    with (
        catalog.as_principal("alice"),
        pytest.raises(PermissionDenied, match="alice lacks READ VOLUME on main.ml.local"),
    ):
        UCVolumeDataset(path)


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"cache": "sometimes"}, "invalid cache 'sometimes'"),
        ({"on_uneven": "wrap"}, "invalid on_uneven 'wrap'"),
        ({"prefetch": 0}, "invalid prefetch 0"),
        ({"seed": -1}, "invalid seed -1"),
        ({"label_by": "file"}, "invalid label_by 'file'"),
        ({"include": []}, r"invalid include \[\]: it would match nothing"),
        ({"include": ""}, "invalid include '': an empty pattern matches nothing"),
        ({"pin_window": 0}, "invalid pin_window 0"),
        ({"cache_max_bytes": 0}, "invalid cache_max_bytes 0"),
        ({"min_free_bytes": -1}, "invalid min_free_bytes -1"),
    ],
)
def test_bad_options_are_refused(local_volume: Volume, option: dict[str, Any], message: str) -> None:
    path, folder = local_volume()
    write_files(folder, 1, sub="a/")
    with pytest.raises(ValueError, match=message):
        UCVolumeDataset(path, recursive=True, **option)


@pytest.mark.both_backends
@pytest.mark.parametrize(
    ("option", "message"),
    [
        ({"shuffle": "no"}, "invalid shuffle 'no': give True or False"),
        ({"recursive": 1}, "invalid recursive 1: give True or False"),
        ({"seed": True}, "invalid seed True: give a whole number >= 0, not a bool"),
        ({"seed": 1.0}, "invalid seed 1.0: give a whole number >= 0"),
        ({"prefetch": True}, "invalid prefetch True"),
        ({"include": 5}, "invalid include 5: give a glob pattern"),
        ({"exclude": [b"*.bin"]}, r"invalid exclude \[b'\*.bin'\]: b'\*.bin' is not a str"),
        ({"transform": "decode_text"}, "invalid transform 'decode_text': give a function"),
        ({"retry": 3}, "invalid retry 3: give a RetryPolicy or None"),
        ({"cache_dir": 5}, "invalid cache_dir 5"),
    ],
)
def test_options_of_the_wrong_type_are_refused_before_the_catalog_is_asked(
    catalog: LocalCatalog, option: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message) as caught:
        UCVolumeDataset("/Volumes/main/ml/absent", **option)  # no such volume: the option is checked first
    assert "\n" not in str(caught.value)


def test_set_epoch_takes_a_whole_number_only(local_volume: Volume) -> None:
    path, folder = local_volume()
    write_files(folder, 1)
    dataset = UCVolumeDataset(path)
    with pytest.raises(TypeError, match="invalid epoch True"):
        dataset.set_epoch(True)
    with pytest.raises(ValueError, match="invalid epoch -1"):
        dataset.set_epoch(-1)


def test_a_retry_policy_must_try_at_least_once() -> None:
    with pytest.raises(ValueError, match="invalid attempts 0: give a whole number >= 1"):
        RetryPolicy(attempts=0)
    with pytest.raises(ValueError, match="invalid base_seconds -1"):
        RetryPolicy(base_seconds=-1)


# ------------------------------------------------------------------ symlinks in local volumes


def test_symlinks_are_skipped_with_one_warning_even_when_they_stay_inside(local_volume: Volume) -> None:
    path, folder = local_volume()
    files = write_files(folder, 2)
    (folder / "again.bin").symlink_to(folder / "f00000.bin")
    (folder / "excluded.lnk").symlink_to(folder / "f00001.bin")
    (folder / ".hidden.lnk").symlink_to(folder / "f00001.bin")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = UCVolumeDataset(path, exclude="*.lnk")
    assert [str(w.message) for w in caught] == [
        "/Volumes/main/ml/local: skipped 1 entry that is not a regular file, e.g. 'again.bin' (datasets do "
        "not follow symbolic links inside a volume; copy the file in instead, or exclude it)"
    ]
    assert [Path(p).name for p in dataset] == sorted(files)


def test_a_listing_without_symlinks_warns_nothing(local_volume: Volume) -> None:
    path, folder = local_volume()
    write_files(folder, 2, sub="sub/")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(UCVolumeDataset(path, recursive=True)) == 2


@pytest.mark.parametrize("cache", ["auto", "always"])
def test_a_file_that_changed_after_the_listing_stops_the_stream_naming_it(local_volume: Volume, cache: str) -> None:
    path, folder = local_volume()
    write_files(folder, 3)
    dataset = UCVolumeDataset(path, cache=cache, cache_max_bytes=10**6, min_free_bytes=0)  # type: ignore[arg-type]
    (folder / "f00001.bin").write_bytes(b"shorter")
    stream = iter(dataset)
    next(stream)
    with pytest.raises(
        VolumeReadError, match=r"/Volumes/main/ml/local/f00001\.bin: it changed since the dataset listed it"
    ):
        next(stream)


def test_decoders_in_place_read_the_checked_descriptor_and_other_transforms_get_paths(local_volume: Volume) -> None:
    path, folder = local_volume()
    files = write_files(folder, 2)
    given: list[Any] = []

    def record(source: Any) -> int:
        given.append(source)
        return 0

    assert list(UCVolumeDataset(path, transform=record)) == [0, 0]
    assert given == [str(folder / name) for name in sorted(files)]
    from uc_jupyter.data import decode_bytes

    record.reads_files = True  # type: ignore[attr-defined]
    given.clear()
    list(UCVolumeDataset(path, transform=record))
    assert all(hasattr(g, "read") for g in given)  # open files, closed once the transform returned
    assert list(UCVolumeDataset(path, transform=decode_bytes)) == [files[name] for name in sorted(files)]


def test_rank_without_world_size_is_an_error(local_volume: Volume, monkeypatch: pytest.MonkeyPatch) -> None:
    path, folder = local_volume()
    write_files(folder, 2)
    monkeypatch.setenv("RANK", "1")
    dataset = UCVolumeDataset(path)
    with pytest.raises(RuntimeError, match="RANK is set but WORLD_SIZE is not"):
        list(dataset)


# ------------------------------------------------------------------ partitioning through real workers


@pytest.mark.parametrize("shuffle", [False, True])
@pytest.mark.parametrize("workers", [0, 1, 2, 3])
@pytest.mark.parametrize("ranks", [1, 2, 3])
def test_every_file_exactly_once_across_ranks_and_workers(
    local_volume: Volume, monkeypatch: pytest.MonkeyPatch, ranks: int, workers: int, shuffle: bool
) -> None:
    path, folder = local_volume()
    files = write_files(folder, 23)  # not divisible by any grid here
    seen: list[str] = []
    for rank in range(ranks):  # each rank builds its dataset, as in a real job
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", str(ranks))
        dataset = UCVolumeDataset(path, shuffle=shuffle, seed=5, on_uneven="allow")
        seen += loader_items(dataset, workers, "fork")
    assert sorted(Path(p).name for p in seen) == sorted(files)


@pytest.mark.parametrize(("policy", "per_rank", "padded", "dropped"), [("pad", 8, 2, 0), ("drop", 7, 0, 1)])
def test_uneven_ranks_are_padded_or_dropped_and_counted(
    local_volume: Volume,
    monkeypatch: pytest.MonkeyPatch,
    policy: str,
    per_rank: int,
    padded: int,
    dropped: int,
) -> None:
    path, folder = local_volume()
    write_files(folder, 22)  # 3 ranks: 8 + 7 + 7
    counts, pads, drops = [], 0, 0
    everything: collections.Counter[str] = collections.Counter()
    for rank in range(3):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "3")
        dataset = UCVolumeDataset(path, shuffle=True, on_uneven=policy)  # type: ignore[arg-type]
        items = list(dataset)
        assert len(dataset) == len(items)
        counts.append(len(items))
        everything.update(items)
        stream = dataset.stats().streams[0]
        pads, drops = pads + stream.padded, drops + stream.dropped
    assert counts == [per_rank] * 3
    assert (pads, drops) == (padded, dropped)
    assert len(everything) == 22 - dropped


def test_epochs_reshuffle_the_same_way_everywhere(local_volume: Volume) -> None:
    path, folder = local_volume()
    write_files(folder, 30)
    one, two = UCVolumeDataset(path, shuffle=True, seed=1), UCVolumeDataset(path, shuffle=True, seed=1)
    first, second = list(one), list(one)
    assert first != second and sorted(first) == sorted(second)
    two.set_epoch(1)
    assert list(two) == second


# ------------------------------------------------------------------ remote volumes
@pytest.mark.both_backends
def test_s3_volume_files_are_cached_and_hit_in_later_epochs(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 40, size=500)
    dataset = UCVolumeDataset(path, cache_max_bytes=10**6, min_free_bytes=0)
    assert not dataset.in_place
    assert read_all(list(dataset)) == [files[k] for k in sorted(files)]
    assert read_all(list(dataset)) == [files[k] for k in sorted(files)]
    stream = dataset.stats().streams[0]
    assert (stream.misses, stream.hits, stream.bytes_downloaded) == (40, 40, 20_000)
    assert s3.stats()["requests"]["GET"] == 40
    assert dataset.stats().cache is not None


@pytest.mark.both_backends
def test_a_changed_remote_file_is_fetched_again(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 3)
    assert read_all(list(UCVolumeDataset(path))) == [(folder / f"f0000{i}.bin").read_bytes() for i in range(3)]
    (folder / "f00001.bin").write_bytes(b"rewritten")
    after = read_all(list(UCVolumeDataset(path)))
    assert after[1] == b"rewritten"


# botocore and s3fs retry 503 SlowDown by themselves: with the client's retries off and 500s
# (which s3fs does not retry), what is tested is our own retrying.
NO_CLIENT_RETRIES = {"config_kwargs": {"retries": {"max_attempts": 1, "mode": "standard"}}}


def test_transient_errors_are_retried(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume(**NO_CLIENT_RETRIES)
    files = write_files(folder, 5)
    s3.configure(fail_first=2, fail_status=500)
    dataset = UCVolumeDataset(path, retry=RetryPolicy(attempts=4, base_seconds=0.001))
    assert read_all(list(dataset)) == [files[k] for k in sorted(files)]
    assert s3.stats()["requests"]["GET"] == 15  # two failures and one success per file
    assert dataset.stats().streams[0].retries >= 5  # at least one of ours per file (s3fs may add its own)


@pytest.mark.both_backends
def test_injected_503s_are_survived(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 5)
    s3.configure(fail_first=2)
    assert read_all(list(UCVolumeDataset(path))) == [files[k] for k in sorted(files)]
    assert s3.stats()["requests"]["GET"] == 15  # every file failed twice, then came


def test_a_file_that_keeps_failing_names_its_volume_path(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume(**NO_CLIENT_RETRIES)
    write_files(folder, 2)
    s3.configure(fail_first=100, fail_status=500)
    dataset = UCVolumeDataset(path, retry=RetryPolicy(attempts=2, base_seconds=0.001))
    with pytest.raises(VolumeReadError, match=r"cannot read /Volumes/main/ml/remote/f0000[01].bin after 2 attempts"):
        list(dataset)


@pytest.mark.both_backends
@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_spawn_and_forkserver_workers(s3_volume: Volume, context: str) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 12)
    dataset = UCVolumeDataset(path, shuffle=True, cache_max_bytes=10**6, min_free_bytes=0, transform=read_bytes)
    items = loader_items(dataset, 2, context)
    assert sorted(items) == sorted(files.values())


@pytest.mark.both_backends
def test_the_budget_is_never_crossed_and_epoch_two_refetches_at_most_sixty_percent(
    s3_volume: Volume, s3: S3TestServer, tmp_path: Path
) -> None:
    path, folder = s3_volume()
    write_files(folder, 200, size=1000)  # 200 kB of data, a cache of half that
    cache_dir = tmp_path / "cache"
    dataset = UCVolumeDataset(
        path,
        shuffle=True,
        cache_dir=cache_dir,
        cache_max_bytes=100_000,
        min_free_bytes=0,
        transform=read_bytes,
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, stored_bytes(cache_dir))

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        assert len(loader_items(dataset, 2, "fork")) == 200
        first_epoch = s3.stats()["bytes_sent"]
        s3.reset()
        dataset.set_epoch(1)
        assert len(loader_items(dataset, 2, "fork")) == 200
        second_epoch = s3.stats()["bytes_sent"]
    finally:
        done.set()
        sampler.join()
    assert first_epoch == 200_000
    assert second_epoch <= 0.6 * 200_000
    assert 0 < peak <= 100_000


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_a_volume_on_moto_reads_like_any_s3(catalog: LocalCatalog, tmp_path: Path, moto: str) -> None:
    """The same code against an independent S3 implementation (moto's server)."""
    import s3fs

    options = {"key": "k", "secret": "s", "endpoint_url": moto}
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **options)
    fs.mkdir("moto-bucket")
    contents = {f"data/{i}.json": json.dumps({"i": i}).encode() for i in range(6)}
    for key, body in contents.items():
        fs.pipe_file(f"moto-bucket/{key}", body)
    external_location(catalog, "s3://moto-bucket", options)
    catalog.create_volume("main.ml.moto", "s3://moto-bucket/data")
    cache = {"cache_dir": tmp_path / "c", "min_free_bytes": 0}
    dataset = UCVolumeDataset("/Volumes/main/ml/moto", cache_max_bytes=10**6, **cache)
    assert read_all(list(dataset)) == [contents[k] for k in sorted(contents)]
    fs.pipe_file("moto-bucket/data/3.json", b'{"i": "changed"}')
    again = UCVolumeDataset("/Volumes/main/ml/moto", **cache)
    assert read_all(list(again))[3] == b'{"i": "changed"}'


# ------------------------------------------------------------------ checkpoints
@pytest.mark.both_backends
def test_resume_continues_with_exactly_the_remaining_files(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 10)
    dataset = UCVolumeDataset(path, shuffle=True, seed=3)
    everything = list(UCVolumeDataset(path, shuffle=True, seed=3))
    stream = iter(dataset)
    delivered = [next(stream) for _ in range(4)]
    state = json.loads(json.dumps(dataset.state_dict()))
    resumed = UCVolumeDataset(path, shuffle=True, seed=3)
    resumed.load_state_dict(state)
    rest = list(resumed)
    assert [Path(p).name for p in delivered + rest] == [Path(p).name for p in everything]


@pytest.mark.both_backends
def test_resume_into_another_dataset_names_what_differs(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 4)
    state = UCVolumeDataset(path, shuffle=True, seed=3).state_dict()
    with pytest.raises(ValueError, match="the checkpoint's seed is 3, this dataset's is 4"):
        UCVolumeDataset(path, shuffle=True, seed=4).load_state_dict(state)
    with pytest.raises(ValueError, match="no 'fingerprint'"):
        UCVolumeDataset(path).load_state_dict({"epoch": 0})


@pytest.mark.both_backends
def test_labelled_folder_yields_labels_and_skips_top_level_files(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 2, sub="cat/")
    write_files(folder, 3, sub="dog/")
    (folder / "labels.csv").write_text("path,label\n")
    dataset = UCVolumeDataset(path, recursive=True, label_by="folder", transform=read_bytes)
    assert dataset.classes == ("cat", "dog")
    assert [label for _, label in dataset] == [0, 0, 1, 1, 1]
    assert os.path.basename(path) == "remote"


@pytest.mark.parametrize(
    "extra", [{}, {"s3_additional_kwargs": {"RequestPayer": "requester"}}], ids=["object_store", "s3fs"]
)
def test_s3_volumes_read_alike_through_object_store_and_s3fs(
    s3_volume: Volume, s3: S3TestServer, extra: dict[str, Any]
) -> None:
    """Options object_store does not implement send a volume through s3fs; both read the same."""
    storage = open_storage("s3://b/p", {**s3.storage_options, **extra})
    assert type(storage).__name__ == ("FsspecStorage" if extra else "ObjectStorage")
    path, folder = s3_volume(**extra)
    files = write_files(folder, 30, size=300, sub="a/")
    dataset = UCVolumeDataset(path, recursive=True, shuffle=True, cache_max_bytes=10**6, min_free_bytes=0)
    items = loader_items(dataset, 2, "fork")
    assert sorted(read_all(items)) == sorted(files.values())
    assert s3.stats()["requests"]["GET"] == 30
    assert sorted(read_all(list(dataset))) == sorted(files.values())  # the second pass hits
    assert s3.stats()["requests"]["GET"] == 30


@pytest.mark.both_backends
def test_cache_never_streams_every_file_through_and_keeps_none(s3_volume: Volume, s3: S3TestServer) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 20, size=200)
    dataset = UCVolumeDataset(path, cache="never", cache_max_bytes=10**6, min_free_bytes=0, transform=read_bytes)
    assert list(dataset) == [files[k] for k in sorted(files)]
    assert list(dataset) == [files[k] for k in sorted(files)]
    assert s3.stats()["requests"]["GET"] == 40  # nothing kept: the second pass downloads again
    stats = dataset.stats()
    assert stats.cache is not None
    assert (stats.cache.resident_bytes, stats.cache.in_flight_bytes, stats.cache.entries) == (0, 0, 0)
    assert (stats.streams[0].misses, stats.streams[0].streamed) == (40, 40)


# ------------------------------------------------------------------ a cache of one's own
@pytest.mark.both_backends
def test_a_file_cache_given_as_cache_dir_is_the_one_read_through(
    s3_volume: Volume, s3: S3TestServer, tmp_path: Path
) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 6)
    cache = FileCache(tmp_path / "mine", max_bytes=12_345, min_free_bytes=0)
    dataset = UCVolumeDataset(path, cache_dir=cache)
    assert read_all(list(dataset)) == [files[k] for k in sorted(files)]
    assert read_all(list(dataset)) == [files[k] for k in sorted(files)]
    assert s3.stats()["requests"]["GET"] == 6  # the second pass hit that cache
    stats = dataset.stats().cache
    assert stats is not None and stats.max_bytes == 12_345 and stats.entries == 6


@pytest.mark.both_backends
def test_a_file_cache_keeps_its_own_budget(s3_volume: Volume, tmp_path: Path) -> None:
    path, folder = s3_volume()
    write_files(folder, 2)
    cache = FileCache(tmp_path / "mine", max_bytes=10_000, min_free_bytes=0)
    for given in ({"cache_max_bytes": 5000}, {"min_free_bytes": 0}):
        with pytest.raises(ValueError, match=r"^invalid cache_max_bytes/min_free_bytes with cache_dir=FileCache"):
            UCVolumeDataset(path, cache_dir=cache, **given)  # type: ignore[arg-type]


@pytest.mark.parametrize("cache", ["auto", "always"])
def test_workers_take_what_they_inherited_out_of_the_collectors_reach(local_volume: Volume, cache: str) -> None:
    """A DataLoader worker freezes the objects it started with (gc.freeze: the collector's full
    runs no longer walk torch's modules every few files); the training process's are left alone."""
    path, folder = local_volume()
    write_files(folder, 4)
    dataset = UCVolumeDataset(path, cache=cache, transform=lambda _: gc.get_freeze_count())  # type: ignore[arg-type]
    here = gc.get_freeze_count()
    assert min(loader_items(dataset, 2, "fork")) > here  # each worker froze what it inherited
    assert set(loader_items(dataset, 0)) == {here}  # without workers: nothing frozen
    assert gc.get_freeze_count() == here


# ------------------------------------------------------------------ what the filters leave out


@pytest.mark.both_backends
def test_files_left_out_by_include_and_exclude_are_counted(local_volume: Volume) -> None:
    path, folder = local_volume()
    write_files(folder, 5)
    write_files(folder, 3, sub="sub/")
    (folder / ".hidden").write_bytes(b"x")  # hidden and marker files are not the user's: never counted
    (folder / "_SUCCESS").write_bytes(b"")
    picked = UCVolumeDataset(path, recursive=True, include="sub/*", exclude="*2.bin")
    assert (len(picked), picked.skipped, picked.stats().skipped_files) == (2, 6, 6)
    assert UCVolumeDataset(path, recursive=True).skipped == 0


@pytest.mark.parametrize("workers", [0, 2])
def test_the_skipped_count_reaches_the_loaders_telemetry_once_across_ranks(
    local_volume: Volume, monkeypatch: pytest.MonkeyPatch, workers: int
) -> None:
    from uc_jupyter.data import DataLoader

    path, folder = local_volume()
    write_files(folder, 12)
    write_files(folder, 7, prefix="g")
    total = 0
    for rank in range(2):
        monkeypatch.setenv("RANK", str(rank))
        monkeypatch.setenv("WORLD_SIZE", "2")
        loader = DataLoader(UCVolumeDataset(path, include="f*"), batch_size=2, num_workers=workers, monitor=False)
        assert sum(len(batch) for batch in loader) == 6
        total += loader.stats().skipped
    assert total == 7


@pytest.mark.both_backends
def test_a_folder_whose_files_are_all_in_sub_folders_says_to_add_recursive(local_volume: Volume) -> None:
    path, folder = local_volume()
    for sub in ("b", "a", "c", "d"):
        write_files(folder, 2, sub=f"{sub}/")
    with pytest.raises(ValueError, match="add --recursive") as caught:
        UCVolumeDataset(path)
    assert str(caught.value) == (
        f"{path} holds no files at its top, only in sub-folders (a, b, c, ...): add --recursive (recursive=True)"
    )
    with pytest.raises(
        ValueError, match=re.escape(f"{path} holds no matching files at its top, only in sub-folders (b)")
    ):
        UCVolumeDataset(path, include="b/*")
    (folder / "e").mkdir()
    with pytest.raises(ValueError, match=re.escape(f"{path}/e holds no files to read")):
        UCVolumeDataset(f"{path}/e")
    assert len(UCVolumeDataset(path, recursive=True)) == 8


@pytest.mark.parametrize("where", ["local", pytest.param("s3", marks=pytest.mark.servers)])  # the S3 test server
def test_files_beside_unread_sub_folders_come_with_one_notice(
    request: pytest.FixtureRequest, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    from uc_jupyter import notices

    notices.reset()
    path, folder = request.getfixturevalue(f"{where}_volume")()
    write_files(folder, 2)
    for sub in ("b", "a", ".hidden"):
        write_files(folder, 1, sub=f"{sub}/")
    assert len(UCVolumeDataset(path)) == 2
    assert capsys.readouterr().err == (
        f"{path}: reading the 2 files at its top only, not its sub-folders (a, b): "
        "add --recursive (recursive=True) to read them\n"
    )
    assert len(UCVolumeDataset(path)) == 2  # once per folder and process
    assert len(UCVolumeDataset(path, recursive=True)) == 4
    assert len(UCVolumeDataset(f"{path}/a")) == 1  # a folder without sub-folders says nothing
    assert capsys.readouterr().err == ""
