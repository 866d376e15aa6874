"""UCVolumeDataset over az://, abfss:// and gs:// volumes, read through the storage seam (obstore)
from Azurite and fake-gcs-server on 127.0.0.1: every file listed and read, bytes checked; keys that
Azurite refuses (a wrong account key, a SAS of another container) end in one line naming the
/Volumes path.

The datasets are made and read in a spawned process: object_store's runtime does not survive fork,
and the pytest process, whose other tests fork listings and DataLoader workers, must not start it.
The catalog (the home's SQLite metastore) is made here and opened again there."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import threading
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.testing.azurite import ACCOUNT, Azurite, azurite
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.gcs_emulator import GcsEmulator, gcs_emulator

VOLUME = "/Volumes/main/ml/images"


def _files(count: int) -> dict[str, bytes]:
    """{key below the volume: distinct content}, in three class folders, names with a space and a '+'."""
    return {f"c{i % 3}/f {i}+x.bin": f"{i}:".encode() + os.urandom(50 + i) for i in range(count)}


FILES = {**_files(30), "c1/empty.bin": b""}  # an empty file: downloads only ask its size (HEAD)


@pytest.fixture(scope="module")
def az() -> Iterator[Azurite]:
    with azurite([ACCOUNT, "other"]) as running:
        for key, content in FILES.items():
            running.put("raw", f"images/{key}", content)
        running.put("private", "images/secret.bin", b"secret")
        yield running


@pytest.fixture(scope="module")
def gcs() -> Iterator[GcsEmulator]:
    with gcs_emulator() as running:
        for key, content in FILES.items():
            running.put("lake", f"images/{key}", content)
        yield running


@pytest.fixture
def child() -> Iterator[ProcessPoolExecutor]:
    """A fresh spawned process per test: one that has read through object_store forks no usable workers."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        yield pool


def _home(tmp_path: Path, location: str, volume: str, options: dict[str, Any]) -> str:
    """A home whose main.ml.images volume lies at ``volume`` inside external location ``location``."""
    home = tmp_path / "home"
    cat = LocalCatalog(home)
    external_location(cat, location, options)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    cat.create_volume("main.ml.images", volume)
    return str(home)


def _content(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read()


def _read_volume(home: str, workers: int, catalog_url: str = "") -> list[bytes]:
    """In the child: every file of the volume, through the dataset (and ``workers`` forked DataLoader
    workers; ``-n``: read here first, then through ``n`` forked workers); an error comes back as a
    RuntimeError with its type and message. ``catalog_url``: read through a RestCatalog there."""
    from uc_jupyter.catalog.rest.client import RestCatalog
    from uc_jupyter.data import DataLoader, UCVolumeDataset

    try:
        dataset = UCVolumeDataset(
            VOLUME,
            recursive=True,
            catalog=RestCatalog(catalog_url, "ucj_token") if catalog_url else LocalCatalog(home),
            transform=_content,
            cache_dir=f"{home}/cache",
            cache="never" if workers < 0 else "auto",  # the workers' pass must download again
        )
        if workers <= 0:
            read_here = list(dataset)
            if workers == 0:
                return read_here
        # fork, named: a spawned process's default start method is spawn
        loader = DataLoader(
            dataset, batch_size=None, num_workers=abs(workers), multiprocessing_context="fork", mlflow=False
        )
        return list(loader)
    except Exception as exc:
        raise RuntimeError(f"{type(exc).__name__}: {exc}") from None


def _read(child: ProcessPoolExecutor, home: str, workers: int = 0, catalog_url: str = "") -> list[bytes]:
    return child.submit(_read_volume, home, workers, catalog_url).result(timeout=180)


def test_an_az_volume_is_listed_and_every_file_read_from_azurite(
    az: Azurite, child: ProcessPoolExecutor, tmp_path: Path
) -> None:
    home = _home(tmp_path, "az://raw", "az://raw/images", az.options())
    assert sorted(_read(child, home)) == sorted(FILES.values())


def test_an_abfss_volume_with_its_account_in_the_url_reads_through_forked_workers(
    az: Azurite, child: ProcessPoolExecutor, tmp_path: Path
) -> None:
    url = f"abfss://raw@{ACCOUNT}.dfs.core.windows.net"
    options = {"account_key": az.keys[ACCOUNT], "endpoint": az.endpoint()}
    home = _home(tmp_path, url, f"{url}/images", options)
    assert sorted(_read(child, home, workers=2)) == sorted(FILES.values())


def test_a_gs_volume_is_listed_and_every_file_read_from_fake_gcs_server(
    gcs: GcsEmulator, child: ProcessPoolExecutor, tmp_path: Path
) -> None:
    home = _home(tmp_path, "gs://lake", "gs://lake/images", gcs.options())
    assert sorted(_read(child, home)) == sorted(FILES.values())


@pytest.mark.parametrize(
    "options",
    [
        pytest.param(lambda az: {"connection_string": az.connection_string(key=az.keys["other"])}, id="wrong-key"),
        pytest.param(
            lambda az: {"account_name": ACCOUNT, "sas_token": az.container_sas("private"), "endpoint": az.endpoint()},
            id="sas-of-another-container",
        ),
    ],
)
def test_keys_azurite_refuses_end_in_one_line_naming_the_volume_path(
    az: Azurite, child: ProcessPoolExecutor, tmp_path: Path, options: Any
) -> None:
    home = _home(tmp_path, "az://raw", "az://raw/images", options(az))
    with pytest.raises(RuntimeError) as caught:
        _read(child, home)
    message = str(caught.value)
    assert VOLUME in message and "\n" not in message
    assert "403" in message or "denied" in message.lower() or "refused" in message.lower()


def test_options_naming_another_account_than_the_volumes_url_are_refused(az: Azurite, tmp_path: Path) -> None:
    url = f"abfss://raw@{ACCOUNT}.dfs.core.windows.net"
    # As the location is made (before any volume in it is read): one line naming the location.
    with pytest.raises(ValueError, match=r"^external location \w+ with credential \w+: abfss://raw@") as caught:
        _home(tmp_path, url, f"{url}/images", az.options("other"))  # the other account's key and endpoint
    assert f"lies in account '{ACCOUNT}' but its storage options are for 'other'" in str(caught.value)
    # Options given with the volume itself: the same refusal as the volume is made, naming the volume.
    home = _home(tmp_path, url, f"{url}/images", {})
    cat = LocalCatalog(home)
    cat.drop_volume("main.ml.images")
    with pytest.raises(ValueError, match=r"^volume main.ml.images: abfss://raw@") as made:
        cat.create_volume("main.ml.images", f"{url}/images", storage_options=az.options("other"))
    assert f"lies in account '{ACCOUNT}' but its storage options are for 'other'" in str(made.value)
    assert "images" not in [v.name for v in cat.list_volumes("main.ml")]


def test_workers_forked_after_this_process_read_through_object_store_say_what_to_do(
    az: Azurite, child: ProcessPoolExecutor, tmp_path: Path
) -> None:
    # object_store's runtime does not survive fork, and gs/Azure have no fsspec filesystem to fall back on.
    home = _home(tmp_path, "az://raw", "az://raw/images", az.options())
    with pytest.raises(RuntimeError) as caught:
        _read(child, home, workers=-1)
    last = str(caught.value).splitlines()[-1]  # torch puts the worker's traceback before the error itself
    assert f"cannot read {VOLUME}: this process was forked" in last and "spawn" in last


@contextlib.contextmanager
def _vending_catalog(url: str, vended: dict[str, object]) -> Iterator[str]:
    """A Unity Catalog server of another make, playing two routes: GET of volume main.ml.images (at
    ``url``) and its temporary credentials (``vended``, what a Databricks workspace answers for Azure)."""
    volume = {
        "catalog_name": "main",
        "schema_name": "ml",
        "name": "images",
        "volume_type": "EXTERNAL",
        "storage_location": url,
        "volume_id": "5b1e8a52-0000-4000-8000-000000000001",
        "owner": "admin",
    }

    class Handler(BaseHTTPRequestHandler):
        def _json(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if "/volumes/main.ml.images" in self.path:
                self._json(200, volume)
            else:
                self._json(404, {"error_code": "NOT_FOUND", "message": f"{self.path} is not played here"})

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path.endswith("/temporary-volume-credentials"):
                self._json(200, {"url": url, **vended})
            else:
                self._json(404, {"error_code": "NOT_FOUND", "message": f"{self.path} is not played here"})

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_a_sas_vended_by_a_catalog_server_reads_the_volume_and_only_its_container(
    az: Azurite, child: ProcessPoolExecutor, tmp_path: Path
) -> None:
    url = f"abfss://raw@{ACCOUNT}.dfs.core.windows.net/images"
    endpoint = {"uc_jupyter_storage_options": {"endpoint_url": az.endpoint()}}  # Azurite, not Azure's own host
    own = {"azure_user_delegation_sas": {"sas_token": az.container_sas("raw")}, **endpoint}
    with _vending_catalog(url, own) as catalog_url:
        assert sorted(_read(child, str(tmp_path), catalog_url=catalog_url)) == sorted(FILES.values())
    other = {"azure_user_delegation_sas": {"sas_token": az.container_sas("private")}, **endpoint}
    with _vending_catalog(url, other) as catalog_url, pytest.raises(RuntimeError) as caught:
        _read(child, str(tmp_path), catalog_url=catalog_url)
    assert f"cannot list {VOLUME}" in str(caught.value) and "403" in str(caught.value)


def test_a_google_token_vended_by_a_catalog_server_reads_a_gs_volume(
    gcs: GcsEmulator, child: ProcessPoolExecutor, tmp_path: Path
) -> None:
    # fake-gcs-server checks no token: this shows the vended token's way to the store, not a refusal.
    vended = {
        "gcp_oauth_token": {"oauth_token": "ya29.vended"},
        "uc_jupyter_storage_options": {"endpoint_url": gcs.url},
    }
    with _vending_catalog("gs://lake/images", vended) as catalog_url:
        assert sorted(_read(child, str(tmp_path), catalog_url=catalog_url)) == sorted(FILES.values())
