"""Datasets renew vended credentials before they expire (issue 15): a RestCatalog over an in-process
``uc-jupyter serve`` whose s3 credential vends one IAM role per vend on an enforcing moto
(:mod:`uc_jupyter.testing.moto_iam`), whose reaper ends each vend's keys at its expiry. With a
3-second vend lifetime a dataset's first keys are dead by its second pass, which must still read every
file; with the default hour, an injected clock shows the dataset asks again inside the vended cache's
margin and not before."""

from __future__ import annotations

import contextlib
import pickle
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import torch.utils.data

from uc_jupyter.catalog import Catalog, PermissionDenied, ResolvedVolumePath, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.catalog.rest.vended import refresh_due
from uc_jupyter.data import UCTableDataset, UCVolumeDataset
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.served import ADMIN, Served, serving
from uc_jupyter.testing.waits import wait_until

BUCKET = "lake"
FILES = {f"f{i}.bin": f"file {i} of volume a".encode() for i in range(6)}
VOLUME = "/Volumes/v/s/a"


@pytest.fixture(scope="module")
def iam() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        s3 = running.admin_client("s3")
        for name, body in FILES.items():
            s3.put_object(Bucket=BUCKET, Key=f"vols/a/{name}", Body=body)
        yield running


def _serve(iam: MotoIam, home: Path, lifetime_s: str | None) -> contextlib.AbstractContextManager[Served]:
    """A server whose vends live ``lifetime_s`` (None: the default hour), with volume v.s.a and table
    v.s.t that alice may read."""

    @contextlib.contextmanager
    def running() -> Iterator[Served]:
        with pytest.MonkeyPatch.context() as env:
            if lifetime_s is not None:
                env.setenv("UC_JUPYTER_VEND_SECONDS", lifetime_s)  # read by the server's Vendor as it starts
            else:
                env.delenv("UC_JUPYTER_VEND_SECONDS", raising=False)
            with serving(home) as served:
                with as_principal(ADMIN):
                    cat = served.catalog
                    cat.create_storage_credential("moto_role", iam.options(vending="iam-role-per-vend"))
                    cat.create_external_location("vols", f"s3://{BUCKET}/vols", "moto_role")
                    cat.create_catalog("v")
                    cat.create_schema("v.s")
                    cat.create_volume("v.s.a", f"s3://{BUCKET}/vols/a")
                    cat.create_principal("alice")
                    cat.grant("v", "USE CATALOG", "alice")
                    cat.grant("v.s", "USE SCHEMA", "alice")
                    cat.grant("v.s.a", "READ VOLUME", "alice")
                yield served

    return running()


@pytest.fixture(scope="module")
def short(iam: MotoIam, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """Vends that live 3 s (less than the 60 s margin: every pass renews)."""
    with _serve(iam, tmp_path_factory.mktemp("short_vends"), "3") as served:
        admin = RestCatalog(served.url, served.admin_token)
        admin.create_table("v.s.t", pa.table({"x": list(range(10))}), storage_location=f"s3://{BUCKET}/vols/t")
        admin.grant("v.s.t", "SELECT", "alice")
        yield served


@pytest.fixture(scope="module")
def hour(iam: MotoIam, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with _serve(iam, tmp_path_factory.mktemp("hour_vends"), None) as served:
        yield served


class Recording:
    """A catalog that passes every call to ``inner`` and keeps what ``resolve_volume_path`` answered."""

    def __init__(self, inner: Catalog) -> None:
        self.inner = inner
        self.resolved: list[ResolvedVolumePath] = []

    def resolve_volume_path(self, path: str, *, write: bool = False) -> ResolvedVolumePath:
        answer = self.inner.resolve_volume_path(path, write=write)
        self.resolved.append(answer)
        return answer

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _contents(items: Any) -> list[bytes]:
    return sorted(Path(path).read_bytes() for path in items)


def _ended(resolved: ResolvedVolumePath) -> Callable[[], bool]:
    """Whether S3 refuses the keys of ``resolved`` now (the reaper has ended their vend)."""

    def refused() -> bool:
        try:
            resolved.fs.cat_file(f"{resolved.path}/f0.bin")
        except PermissionError:
            return True
        return False

    return refused


def _alice(served: Served) -> RestCatalog:
    return RestCatalog(served.url, served.admin_token, token_for=served.token_for)


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_a_second_epoch_reads_every_file_after_the_first_keys_are_ended(short: Served, tmp_path: Path) -> None:
    rest = _alice(short)
    with rest.as_principal("alice"):
        # cache="never": each pass downloads again, so the second one needs live keys.
        dataset = UCVolumeDataset(VOLUME, catalog=rest, cache="never", cache_dir=tmp_path / "cache")
        later = rest.resolve_volume_path(VOLUME)
    assert later.expires_at is not None and set(later.storage_options) >= {"key", "secret", "token"}
    assert _contents(dataset) == sorted(FILES.values())
    # Keys vended after the dataset's: once S3 refuses them, the dataset's first keys are ended too.
    wait_until(_ended(later), "the reaper to end a 3 s vend", 60, interval_s=0.2)
    # Iterated outside alice's block: the dataset renews as alice, who made it.
    assert _contents(dataset) == sorted(FILES.values())


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_dataloader_workers_renew_their_own_keys(short: Served, tmp_path: Path) -> None:
    token = short.token_for("alice")
    assert token is not None
    # alice's own token, as a notebook has it (token_for reads the server's metastore, which a
    # forked worker must not touch).
    rest = RestCatalog(short.url, token)
    dataset = UCVolumeDataset(VOLUME, catalog=rest, cache="never", cache_dir=tmp_path / "cache")
    later = rest.resolve_volume_path(VOLUME)
    wait_until(_ended(later), "the reaper to end a 3 s vend", 60, interval_s=0.2)

    def read(batch: list[str]) -> list[bytes]:
        return [Path(path).read_bytes() for path in batch]  # inside the worker, while the path is valid

    # Forked workers: each renews through the catalog it inherited, on connections of its own.
    loader = torch.utils.data.DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=read)
    assert sorted(body for batch in loader for body in batch) == sorted(FILES.values())


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_a_renewal_refused_as_a_persistent_workers_epoch_starts_reaches_the_loop(short: Served, tmp_path: Path) -> None:
    """torch starts a persistent worker's next epoch outside its error handling: a pass that failed to
    start there would end the worker ("exited unexpectedly"); it fails at its first item instead."""
    token = short.token_for("alice")
    assert token is not None
    rest = RestCatalog(short.url, token)
    dataset = UCVolumeDataset(VOLUME, catalog=rest, cache="never", cache_dir=tmp_path / "cache")

    def read(batch: list[str]) -> list[bytes]:
        return [Path(path).read_bytes() for path in batch]

    loader = torch.utils.data.DataLoader(
        dataset, batch_size=2, num_workers=2, collate_fn=read, persistent_workers=True, multiprocessing_context="fork"
    )
    assert sorted(body for batch in loader for body in batch) == sorted(FILES.values())
    later = rest.resolve_volume_path(VOLUME)
    with as_principal(ADMIN):
        short.catalog.revoke("v.s.a", "READ VOLUME", "alice")
    try:
        wait_until(_ended(later), "the reaper to end a 3 s vend", 60, interval_s=0.2)  # the workers' keys too
        with pytest.raises(RuntimeError, match="^Caught PermissionDenied in DataLoader worker process") as raised:
            list(loader)  # each worker renews as its epoch starts: refused, and torch re-raises it
        assert "alice lacks READ VOLUME on v.s.a" in str(raised.value)
    finally:
        with as_principal(ADMIN):
            short.catalog.grant("v.s.a", "READ VOLUME", "alice")
        loader._iterator = None  # the persistent workers stop now


def test_a_spawned_table_reader_renews_before_reading_the_snapshot_again(
    short: Served, monkeypatch: pytest.MonkeyPatch
) -> None:
    rest = _alice(short)
    with rest.as_principal("alice"):
        dataset = UCTableDataset("v.s.t", catalog=rest, batch_size=4)
        later = rest.resolve_volume_path(VOLUME)
    wait_until(_ended(later), "the reaper to end a 3 s vend", 60, interval_s=0.2)
    # What a spawned worker gets: no catalog object, no rows; the environment names the server.
    monkeypatch.setenv("UC_JUPYTER_CATALOG_URL", short.url)
    token = short.token_for("alice")
    assert token is not None
    monkeypatch.setenv("UC_JUPYTER_TOKEN", token)
    spawned = pickle.loads(pickle.dumps(dataset))
    assert sorted(x for batch in spawned for x in batch["x"].tolist()) == list(range(10))


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_keys_are_asked_for_inside_the_margin_and_not_before(hour: Served, tmp_path: Path) -> None:
    now = [1_000.0]
    recording = Recording(_alice(hour))
    with as_principal("alice"):
        dataset = UCVolumeDataset(
            VOLUME, catalog=recording, cache="never", cache_dir=tmp_path / "cache", clock=lambda: now[0]
        )
    [first] = recording.resolved
    assert isinstance(first.expires_at, datetime)
    due = refresh_due(first.expires_at.timestamp(), 1_000.0)  # the vended cache's own margin
    assert first.expires_at.timestamp() - due == pytest.approx(0.1 * (first.expires_at.timestamp() - 1_000.0))

    now[0] = due - 1
    assert _contents(dataset) == sorted(FILES.values())
    assert len(recording.resolved) == 1  # not yet due: the first keys serve

    now[0] = due
    assert _contents(dataset) == sorted(FILES.values())
    assert len(recording.resolved) == 2  # due: asked again, as the pass began

    assert _contents(dataset) == sorted(FILES.values())
    assert len(recording.resolved) == 2  # the renewed keys are due only near their own expiry


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_keys_falling_due_during_a_pass_are_renewed_before_the_next_downloads(hour: Served, tmp_path: Path) -> None:
    now = [1_000.0]
    recording = Recording(_alice(hour))
    with as_principal("alice"):
        dataset = UCVolumeDataset(
            VOLUME, catalog=recording, cache="never", cache_dir=tmp_path / "cache", prefetch=1, clock=lambda: now[0]
        )
    [first] = recording.resolved
    assert first.expires_at is not None
    got = []
    for path in dataset:  # one download in flight: the later ones start after the clock moved on
        got.append(Path(path).read_bytes())
        now[0] = refresh_due(first.expires_at.timestamp(), 1_000.0)
    assert sorted(got) == sorted(FILES.values())
    assert len(recording.resolved) == 2  # renewed once, mid-pass


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_a_renewal_is_a_new_privilege_check(hour: Served, tmp_path: Path) -> None:
    now = [1_000.0]
    recording = Recording(_alice(hour))
    with as_principal("alice"):
        dataset = UCVolumeDataset(
            VOLUME, catalog=recording, cache="never", cache_dir=tmp_path / "cache", clock=lambda: now[0]
        )
    with as_principal(ADMIN):
        hour.catalog.revoke("v.s.a", "READ VOLUME", "alice")
    try:
        now[0] = 10.0**12
        with pytest.raises(PermissionDenied, match="alice lacks READ VOLUME on v.s.a"):
            _contents(dataset)
    finally:
        with as_principal(ADMIN):
            hour.catalog.grant("v.s.a", "READ VOLUME", "alice")


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_embedded_options_do_not_expire_and_are_never_asked_for_again(tmp_path: Path) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"a")
    catalog = LocalCatalog(tmp_path / "home")
    catalog.create_catalog("c")
    catalog.create_schema("c.s")
    catalog.create_external_location("files", folder.as_uri())
    catalog.create_volume("c.s.v", folder.as_uri())
    recording = Recording(catalog)
    far = [1_000.0]
    dataset = UCVolumeDataset(
        "/Volumes/c/s/v", catalog=recording, cache="always", cache_dir=tmp_path / "cache", clock=lambda: far[0]
    )
    assert recording.resolved[0].expires_at is None
    far[0] = 10.0**12  # far past any margin: still nothing to renew
    assert _contents(dataset) == [b"a"]
    assert len(recording.resolved) == 1


def test_a_clock_that_is_not_a_function_is_refused_before_the_catalog_is_asked(tmp_path: Path) -> None:
    with pytest.raises(TypeError, match="invalid clock 5: give a function"):
        UCVolumeDataset("/Volumes/c/s/v", catalog=LocalCatalog(tmp_path / "home"), clock=5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="invalid clock 5: give a function"):
        UCTableDataset("c.s.t", catalog=LocalCatalog(tmp_path / "home"), clock=5)  # type: ignore[arg-type]
