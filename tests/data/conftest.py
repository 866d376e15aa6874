"""Volumes for the data tests: local ones, and ones on a real S3-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch.utils.data

from uc_jupyter.catalog import Catalog
from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.processes import free_port
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.waits import wait_until

FileMaker = Callable[..., dict[str, bytes]]


def write_files(folder: Path, count: int, size: int = 100, prefix: str = "f", sub: str = "") -> dict[str, bytes]:
    """``count`` files of ``size`` distinct bytes each; returns {relative path: content}."""
    written: dict[str, bytes] = {}
    for i in range(count):
        relative = f"{sub}{prefix}{i:05d}.bin"
        content = (f"{relative}:".encode() + os.urandom(size))[:size].ljust(size, b".")
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written[relative] = content
    return written


@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """An independent S3 implementation (moto's server) on 127.0.0.1, one per test module (tests
    may switch its signature checks on); yields its endpoint once it answers."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    last: list[OSError] = []

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/reset-auth", timeout=5).close()
        except urllib.error.HTTPError:
            return True  # it answers (a GET there is refused): it is up
        except OSError as exc:
            last[:] = [exc]
            return False
        return True

    try:
        wait_until(answers, lambda: f"moto's server at {endpoint} to answer (last: {last[-1:]})", 60, interval_s=0.2)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def s3(s3_server: S3TestServer) -> Iterator[S3TestServer]:
    """The shared server, with counters and injected faults reset around each test."""
    s3_server.configure(latency=0.0, bandwidth=0.0, fail_first=0, fail_status=503, list_latency=0.0, store_then_fail="")
    s3_server.reset()
    yield s3_server
    s3_server.configure(latency=0.0, bandwidth=0.0, fail_first=0, fail_status=503, list_latency=0.0, store_then_fail="")


@pytest.fixture
def s3_volume(catalog: Catalog, s3: S3TestServer) -> Callable[..., tuple[str, Path]]:
    """Make an external volume on the S3 server; returns (its /Volumes path, its folder on disk).
    Its credential vends its own keys (``vending: static``: the test server checks no signature), so
    RestCatalog reads it with what ``uc-jupyter serve`` vends; the embedded catalog ignores the option."""

    def make(name: str = "remote", **options: Any) -> tuple[str, Path]:
        bucket = f"b{uuid.uuid4().hex[:12]}"
        folder = s3.bucket(bucket) / "data"
        folder.mkdir()
        storage_options = {**s3.storage_options, "vending": "static", **options}
        external_location(catalog, f"s3://{bucket}", storage_options)
        catalog.create_volume(f"main.ml.{name}", f"s3://{bucket}/data")
        return f"/Volumes/main/ml/{name}", folder

    return make


@pytest.fixture
def local_volume(catalog: LocalCatalog) -> Callable[..., tuple[str, Path]]:
    """Make a managed volume; returns (its /Volumes path, its folder on disk)."""

    def make(name: str = "local") -> tuple[str, Path]:
        info = catalog.create_volume(f"main.ml.{name}")
        return info.path, Path(info.storage_location.removeprefix("file://"))

    return make


def wall_clock() -> ManualClock:
    """A manual clock that starts at the wall clock's time: the cache dates the entries it rebuilds
    from the disk by their files' mtimes, and tests compare its readings with ``time.time()``."""
    return ManualClock(now=time.time())


class WorkerTagged(torch.utils.data.IterableDataset[int]):
    """Worker ``w`` yields ``counts[w]`` items, each its own number."""

    def __init__(self, counts: list[int]) -> None:
        self.counts = counts

    def __iter__(self) -> Any:
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else info.id
        return iter([worker] * self.counts[worker])
