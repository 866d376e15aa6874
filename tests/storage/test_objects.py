"""Listings through object_store (uc_jupyter.storage.objects): a store that cannot be reached fails
within seconds, in one line naming the volume, the endpoint and why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from uc_jupyter.server.browse import status_of
from uc_jupyter.storage.errors import StorageUnreachable
from uc_jupyter.storage.reads import open_storage
from uc_jupyter.testing.s3_server import S3TestServer

pytestmark = pytest.mark.in_a_fork  # object_store requests: keep the test process clean (conftest)


def test_a_store_that_refuses_connections_fails_within_a_second_naming_its_endpoint(tmp_path: Path) -> None:
    (tmp_path / "b" / "data").mkdir(parents=True)
    (tmp_path / "b" / "data" / "a.bin").write_bytes(b"x")
    with S3TestServer(tmp_path) as server:  # a volume's store, then gone (as tutorial 02 leaves one)
        options, endpoint = server.storage_options, server.endpoint
    storage = open_storage("s3://b/data", options, where="/Volumes/main/ml/remote_images")
    started = time.monotonic()
    with pytest.raises(OSError, match="refused the connection") as refused:
        list(storage.pages(recursive=False))
    took = time.monotonic() - started
    assert str(refused.value) == (
        f"cannot list /Volumes/main/ml/remote_images: {endpoint} refused the connection (nothing listens "
        "there); check the volume's endpoint, or that its store runs"
    )
    assert took < 5, took  # object_store's default retries took 3-10 s here
    # One line in a notebook too (no traceback), and the sidebar's answer is that line (502).
    assert isinstance(refused.value, StorageUnreachable)
    assert refused.value._render_traceback_() == [f"StorageUnreachable: {refused.value}"]
    assert status_of(refused.value) == 502


def test_an_endpoint_whose_name_does_not_resolve_says_so() -> None:
    options = {"key": "k", "secret": "s", "endpoint_url": "http://no-such-store.invalid:9000"}
    storage = open_storage("s3://b/data", options, where="/Volumes/main/ml/typo")
    with pytest.raises(
        OSError,
        match=r"^cannot list /Volumes/main/ml/typo: http://no-such-store.invalid:9000: "
        r"the name no-such-store.invalid does not resolve; check",
    ):
        list(storage.pages(recursive=False))
