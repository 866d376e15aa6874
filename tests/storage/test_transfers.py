"""Downloads through object_store on the process's event loop, against the project's S3 server:
retries by the dataset's policy, permanent errors at once, cancels that still end the future, large
bodies streamed, stores let go of when their downloads close (a renewal keeps no old client), and
objects changed after the listing refused at once, the server having sent at most one byte more."""

from __future__ import annotations

import gc
import os
import uuid
import weakref
from pathlib import Path

import pytest

from uc_jupyter.data.stream.renewal import RenewingDownloads
from uc_jupyter.storage.downloads import Job
from uc_jupyter.storage.errors import VolumeReadError
from uc_jupyter.storage.objects import ObjectStorage
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.storage.transfers import DownloadCancelled, ObjectDownloads
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.waits import wait_until

pytestmark = pytest.mark.in_a_fork  # object_store requests: keep the test process clean (conftest)

FAST = RetryPolicy(attempts=3, base_seconds=0.001)
WHERE = "/Volumes/c/s/v"


def storage_of(s3: S3TestServer, bucket: str) -> ObjectStorage:
    storage = open_storage(f"s3://{bucket}/data", s3.storage_options, where=WHERE)
    assert isinstance(storage, ObjectStorage)
    return storage


def fetch(downloads: ObjectDownloads | object, bucket: str, name: str, local: Path, size: int) -> None:
    assert isinstance(downloads, ObjectDownloads)
    [future] = downloads.start([Job(f"{bucket}/data/{name}", str(local), f"{WHERE}/{name}", size)])
    future.result(60)


def test_transient_answers_are_retried_by_the_policy_and_permanent_ones_are_not(
    s3: S3TestServer, tmp_path: Path
) -> None:
    folder = s3.bucket("flaky") / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a" * 100)
    retries: list[int] = []
    downloads = storage_of(s3, "flaky").downloads(FAST, on_retry=lambda: retries.append(1), threads=4)
    s3.configure(fail_first=2, fail_status=503)
    fetch(downloads, "flaky", "a.bin", tmp_path / "a", 100)
    assert (tmp_path / "a").read_bytes() == b"a" * 100
    assert (len(retries), s3.stats()["gets"]) == (2, {"data/a.bin": 1})  # two 503s (SlowDown), then the body
    with pytest.raises(VolumeReadError, match=rf"^cannot read {WHERE}/missing.bin: FileNotFoundError: 404 NoSuchKey"):
        fetch(downloads, "flaky", "missing.bin", tmp_path / "m", 100)
    assert s3.stats()["requests"]["GET"] == 4  # the 404 once, never retried
    s3.configure(fail_first=100, fail_status=500)
    with pytest.raises(VolumeReadError, match=r"after 3 attempts: StorageResponseError: 500 InternalError"):
        fetch(downloads, "flaky", "a.bin", tmp_path / "b", 100)
    assert not (tmp_path / "m").exists() and not (tmp_path / "b").exists()
    downloads.close()


def test_a_large_body_is_streamed_into_its_file(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("large") / "data"
    folder.mkdir()
    body = os.urandom(3_500_000)  # past the in-memory limit: written chunk by chunk
    (folder / "big.bin").write_bytes(body)
    downloads = storage_of(s3, "large").downloads(FAST, on_retry=lambda: None, threads=1)
    fetch(downloads, "large", "big.bin", tmp_path / "big", len(body))
    downloads.close()
    assert (tmp_path / "big").read_bytes() == body
    assert (tmp_path / "big").stat().st_mode & 0o777 == 0o600


def test_a_target_that_became_a_symlink_is_not_followed(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("links") / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"payload")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep me")
    (tmp_path / "target").symlink_to(victim)
    downloads = storage_of(s3, "links").downloads(FAST, on_retry=lambda: None, threads=1)
    with pytest.raises(VolumeReadError, match=rf"^cannot read {WHERE}/a.bin: OSError"):
        fetch(downloads, "links", "a.bin", tmp_path / "target", 7)
    downloads.close()
    assert victim.read_bytes() == b"keep me"


def in_flight_at_server(s3: S3TestServer) -> None:
    wait_until(lambda: s3.stats()["in_flight"]["now"] >= 1, "the download to reach the server", interval_s=0.02)


def test_a_cancelled_download_stops_and_its_future_still_ends(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("slow") / "data"
    folder.mkdir()
    (folder / "slow.bin").write_bytes(b"s" * 500_000)
    s3.configure(bandwidth=20_000)  # 25 s for the whole file: it is cancelled long before
    downloads = storage_of(s3, "slow").downloads(FAST, on_retry=lambda: None, threads=1)
    [future] = downloads.start([Job("slow/data/slow.bin", str(tmp_path / "slow"), f"{WHERE}/slow.bin", 500_000)])
    in_flight_at_server(s3)
    downloads.cancel([future])
    with pytest.raises(DownloadCancelled):
        future.result(20)
    downloads.close()  # returns: nothing runs any more
    assert not (tmp_path / "slow").exists()


def test_a_download_cancelled_between_two_attempts_ends_at_once(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("waits") / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a" * 100)
    s3.configure(fail_first=100, fail_status=503)
    retries: list[int] = []
    patient = RetryPolicy(attempts=5, base_seconds=60)  # the next attempt would wait about a minute
    downloads = storage_of(s3, "waits").downloads(patient, on_retry=lambda: retries.append(1), threads=1)
    [future] = downloads.start([Job("waits/data/a.bin", str(tmp_path / "a"), f"{WHERE}/a.bin", 100)])
    # The first answer was a 503: it waits for its next attempt now.
    wait_until(lambda: retries, "the first attempt to come back", interval_s=0.02)
    downloads.cancel([future])
    with pytest.raises(DownloadCancelled):
        future.result(20)
    downloads.close()
    assert not (tmp_path / "a").exists() and s3.stats()["requests"]["GET"] == 1


def test_a_large_download_cancelled_while_it_streams_leaves_no_file(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("streams") / "data"
    folder.mkdir()
    (folder / "big.bin").write_bytes(os.urandom(3_500_000))
    s3.configure(bandwidth=1_000_000)  # the first range (1 MiB) in about 1 s, then the whole body in 3.5 s
    downloads = storage_of(s3, "streams").downloads(FAST, on_retry=lambda: None, threads=1)
    [future] = downloads.start([Job("streams/data/big.bin", str(tmp_path / "big"), f"{WHERE}/big.bin", 3_500_000)])
    # Its one GET (listed past the in-memory limit: streamed), its first bytes sent.
    wait_until(lambda: s3.stats()["bytes_sent"] > 0, "the download to stream", interval_s=0.02)
    downloads.cancel([future])
    with pytest.raises(DownloadCancelled):
        future.result(20)
    downloads.close()
    assert not (tmp_path / "big").exists()


def test_closed_downloads_let_go_of_their_store_and_a_renewal_keeps_none(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("renew") / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a")
    made: list[weakref.ref[object]] = []

    def make() -> ObjectDownloads:
        downloads = storage_of(s3, "renew").downloads(FAST, on_retry=lambda: None, threads=1)
        assert isinstance(downloads, ObjectDownloads)
        made.append(weakref.ref(downloads._store))
        return downloads

    due = iter([False, True, True, False])
    renewing = RenewingDownloads(make, lambda: next(due))
    for i in range(4):  # a pass that renews twice
        [future] = renewing.start([Job("renew/data/a.bin", str(tmp_path / f"{i}"), f"{WHERE}/a.bin", 1)])
        future.result(60)
    assert len(made) == 3
    renewing.close()
    gc.collect()
    assert [ref() for ref in made] == [None, None, None]  # no store (keys, connections) outlives the pass
    closed = ObjectDownloads(None, "renew/data", FAST)
    closed.close()
    [refused] = closed.start([Job("renew/data/a.bin", str(tmp_path / "x"), f"{WHERE}/a.bin", 1)])
    with pytest.raises(VolumeReadError, match="the downloads are closed"):
        refused.result(10)


def test_empty_small_and_just_larger_objects_all_arrive_whole(s3: S3TestServer, tmp_path: Path) -> None:
    folder = s3.bucket("sizes") / "data"
    folder.mkdir()
    bodies = {"empty": b"", "one": b"1", "limit": os.urandom(1 << 20), "over": os.urandom((1 << 20) + 1)}
    for name, body in bodies.items():
        (folder / name).write_bytes(body)
    downloads = storage_of(s3, "sizes").downloads(FAST, on_retry=lambda: None, threads=4)
    jobs = [
        Job(f"sizes/data/{name}", str(tmp_path / name), f"{WHERE}/{name}", len(body)) for name, body in bodies.items()
    ]
    futures = downloads.start(jobs)
    for future in futures:
        future.result(60)
    downloads.close()
    assert {name: (tmp_path / name).read_bytes() for name in bodies} == bodies


@pytest.mark.parametrize(
    ("listed", "now", "said", "asked"),
    [
        (16384, 50 << 20, "more than 16384", "GET"),  # grown far past the listing: one byte more is sent
        ((1 << 20) + 1, 50 << 20, str(50 << 20), "GET"),  # listed past the in-memory limit: its answer's size
        (16384, 100, "100", "GET"),  # shrunk
        (16384, 0, "0", "GET"),  # emptied: the store refuses a range of an empty object
        (0, 50 << 20, str(50 << 20), "HEAD"),  # empty when listed: asked its size only
    ],
    ids=["grown", "grown-large", "shrunk", "emptied", "empty-grown"],
)
def test_an_object_changed_after_the_listing_fails_at_once_with_at_most_one_byte_more_sent(
    s3: S3TestServer, tmp_path: Path, listed: int, now: int, said: str, asked: str
) -> None:
    bucket = f"changed-{uuid.uuid4().hex[:8]}"
    folder = s3.bucket(bucket) / "data"
    folder.mkdir()
    with open(folder / "a.bin", "wb") as handle:
        handle.truncate(now)  # sparse: only how much is sent matters
    downloads = storage_of(s3, bucket).downloads(FAST, on_retry=lambda: None, threads=1)
    with pytest.raises(VolumeReadError) as failed:
        fetch(downloads, bucket, "a.bin", tmp_path / "a", listed)
    downloads.close()
    assert str(failed.value) == (
        f"cannot read {WHERE}/a.bin: it changed since the dataset listed it ({listed} bytes then, {said} now); "
        "make the dataset again to list the folder again"
    )
    stats = s3.stats()
    assert stats["bytes_sent"] <= listed + 1
    assert stats["requests"] == {asked: 1}  # never retried
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("size", [16_384, 3_500_000])  # a body taken whole, and one streamed
def test_a_same_size_rewrite_after_the_listing_is_refused_by_its_entity_tag_and_the_listed_one_read(
    s3: S3TestServer, tmp_path: Path, size: int
) -> None:
    """The job carries the ETag the listing gave; the store answers only that version (If-Match):
    a file rewritten with as many bytes is a 412, one line, nothing written, never retried."""
    bucket = f"etag-{uuid.uuid4().hex[:8]}"
    folder = s3.bucket(bucket) / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(os.urandom(size))
    storage = storage_of(s3, bucket)
    ((_, _, listed_tag),) = [entry for page in storage.pages(recursive=False) for entry in page.files]
    job = Job(f"{bucket}/data/a.bin", str(tmp_path / "a"), f"{WHERE}/a.bin", size, listed_tag)
    downloads = storage.downloads(FAST, on_retry=lambda: None, threads=1)
    [future] = downloads.start([job])
    future.result(60)
    assert (tmp_path / "a").read_bytes() == (folder / "a.bin").read_bytes()  # the listed version: read

    rewritten = os.urandom(size)
    (folder / "a.bin").unlink()
    (folder / "a.bin").write_bytes(rewritten)  # as many bytes, another object
    [future] = downloads.start([job._replace(local=str(tmp_path / "b"))])
    with pytest.raises(VolumeReadError) as failed:
        future.result(60)
    downloads.close()
    assert str(failed.value) == (
        f"cannot read {WHERE}/a.bin: it changed since the dataset listed it ({size} bytes, rewritten since with "
        "as many: its ETag is another); make the dataset again to list the folder again"
    )
    assert s3.stats()["requests"]["412"] == 1 and not (tmp_path / "b").exists()


def test_a_download_asked_with_its_entity_tag_ends_with_the_time_the_store_took_to_answer(
    s3: S3TestServer, tmp_path: Path
) -> None:
    """The store's latency comes before its answer and the link's pace after it: the future's result
    is the first (the time to first byte), whatever the bytes took; a ranged GET cannot tell it."""
    bucket = f"answer-{uuid.uuid4().hex[:8]}"
    folder = s3.bucket(bucket) / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(os.urandom(400_000))  # past the server's 64 KiB chunk: answered, then sent
    storage = storage_of(s3, bucket)
    ((_, size, tag),) = [entry for page in storage.pages(recursive=False) for entry in page.files]
    s3.configure(latency=0.05, bandwidth=2e6)  # 50 ms to answer, then 200 ms for the bytes
    downloads = storage.downloads(FAST, on_retry=lambda: None, threads=1)
    [tagged] = downloads.start([Job(f"{bucket}/data/a.bin", str(tmp_path / "a"), f"{WHERE}/a.bin", size, tag)])
    answered = tagged.result(60)
    [plain] = downloads.start([Job(f"{bucket}/data/a.bin", str(tmp_path / "b"), f"{WHERE}/a.bin", size)])
    untold = plain.result(60)
    downloads.close()
    assert answered is not None and 0.045 <= answered < 0.15, answered
    assert untold is None
    assert (tmp_path / "a").read_bytes() == (tmp_path / "b").read_bytes() == (folder / "a.bin").read_bytes()
