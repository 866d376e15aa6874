"""Export folders read through their committed manifest: by UCVolumeDataset and load_hf_dataset, on local and
S3 volumes; exports into S3 (in a process of their own: the test process stays clean of object_store), a
kill -9 in the middle of an upload, and a second export replacing the first."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from uc_jupyter.catalog import PermissionDenied
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.data import UCVolumeDataset
from uc_jupyter.data.volume.committed import ExportIncomplete
from uc_jupyter.storage.export_manifest import MANIFEST, WRITER, ExportFile, Manifest, new_export_id
from uc_jupyter.tables import export_table, load_hf_dataset
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.scripts import run_python
from uc_jupyter.testing.waits import wait_until

VolumeMaker = Callable[..., tuple[str, Path]]
EXPORT = "import json, sys\nfrom uc_jupyter.tables import export_table\nprint(json.dumps(export_table(*sys.argv[1:])))"
BIG_FILES = (500, 8_000, 8_000, 8_000)  # rows of random floats: Parquet files of ~4 KB and ~64 KB


def write_export(
    folder: Path, rows: list[int], *, start: int = 0, export_id: str = "", commit: bool = True
) -> Manifest:
    """An export as export_table lays it out: a Parquet file of ``rows[i]`` ids per file under its prefix,
    and (``commit``) the manifest naming them."""
    export_id = export_id or new_export_id()
    prefix = folder / f".uc-export-{export_id}"
    prefix.mkdir(parents=True)
    files = []
    for i, count in enumerate(rows):
        name = f"part-{i:05d}.parquet"
        pq.write_table(pa.table({"id": list(range(start, start + count))}), prefix / name)
        start += count
        files.append(ExportFile(name, (prefix / name).stat().st_size, count))
    manifest = Manifest(export_id, "main.ml.t", 0, tuple(files))
    if commit:
        (folder / MANIFEST).write_bytes(manifest.to_bytes())
    return manifest


def ids(dataset: object) -> list[int]:
    return sorted(row["id"] for row in dataset)  # type: ignore[attr-defined]


def relatives(dataset: UCVolumeDataset) -> list[str]:
    return [f.relative for f in dataset.listing.files]


def test_a_local_export_folder_reads_only_its_committed_files(catalog: LocalCatalog, local_volume: VolumeMaker) -> None:
    path, folder = local_volume("exports")
    committed = write_export(folder / "t", [3, 4])
    write_export(folder / "t", [100], start=7, commit=False)  # an upload in progress, or killed
    (folder / "t" / "stray.parquet").write_bytes(b"put beside the export")
    for recursive in (False, True):
        assert relatives(UCVolumeDataset(f"{path}/t", recursive=recursive)) == committed.file_keys()
    assert ids(load_hf_dataset(f"{path}/t")) == list(range(7))
    # A parent folder's listing shows neither the manifest nor the hidden prefixes.
    assert relatives(UCVolumeDataset(path, recursive=True)) == ["t/stray.parquet"]


def test_a_manifest_naming_a_missing_or_changed_file_is_one_line_error(
    catalog: LocalCatalog, local_volume: VolumeMaker
) -> None:
    path, folder = local_volume("exports")
    committed = write_export(folder / "t", [3, 4])
    first, second = (folder / "t" / key for key in committed.file_keys())
    second.write_bytes(second.read_bytes()[:-1])
    with pytest.raises(ExportIncomplete, match=rf"names {committed.file_keys()[1]}, which has \d+ bytes, not \d+"):
        UCVolumeDataset(f"{path}/t")
    first.unlink()
    with pytest.raises(
        ExportIncomplete, match=rf"^{path}/t/_uc_export.json names {committed.file_keys()[0]}, which is missing"
    ):
        load_hf_dataset(f"{path}/t")


def test_an_s3_export_folder_reads_only_its_committed_files(catalog: LocalCatalog, s3_volume: VolumeMaker) -> None:
    path, folder = s3_volume()
    committed = write_export(folder / "t", [3, 4])
    write_export(folder / "t", [100], start=7, commit=False)
    for shuffle in (False, True):  # unshuffled and recursive: the listing that streams, unless an export
        dataset = UCVolumeDataset(f"{path}/t", recursive=True, shuffle=shuffle)
        assert sorted(relatives(dataset)) == committed.file_keys()
    read = [pq.read_table(local).column("id").to_pylist() for local in UCVolumeDataset(f"{path}/t")]
    assert sorted(i for chunk in read for i in chunk) == list(range(7))
    assert ids(load_hf_dataset(f"{path}/t")) == list(range(7))


@pytest.fixture
def big(catalog: LocalCatalog) -> int:
    """``main.ml.big``: an id and a random float in one small and three large Delta files (so that one
    Parquet file lands well before the others); made here, in the test's parent process: deltalake
    cannot run in a child forked from one that used it. Returns its number of rows."""
    import numpy as np

    rng = np.random.default_rng(0)
    start = 0
    for i, rows in enumerate(BIG_FILES):
        data = pa.table({"id": np.arange(start, start + rows), "x": rng.random(rows)})
        catalog.create_table("main.ml.big", data, mode="error" if i == 0 else "append")
        start += rows
    return start


def test_export_into_s3_survives_a_kill_mid_upload_and_the_next_replaces_the_previous(
    catalog: LocalCatalog, s3: S3TestServer, s3_volume: VolumeMaker, spark_remote: str, big: int
) -> None:
    path, folder = s3_volume()
    target = folder / "big"
    previous = write_export(target, [3, 4])  # the export in place (as an earlier export_table lays it out)

    # An export is killed once the first of its files has landed (the small one: the link is shared).
    s3.configure(bandwidth=32_000.0)
    killed = subprocess.Popen(
        [sys.executable, "-c", EXPORT, "main.ml.big", f"{path}/big"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:

        def uploading() -> list[Path]:
            assert killed.poll() is None, killed.communicate()[1][-2000:]
            return [p for p in target.glob(".uc-export-*/*.parquet") if previous.prefix not in str(p)]

        wait_until(uploading, "the export to upload its first file", 120, interval_s=0.02)
        os.kill(killed.pid, signal.SIGKILL)
    finally:
        killed.kill()
        killed.wait(timeout=30)
    s3.configure(bandwidth=0.0)
    (leftover,) = {p.parent.name for p in target.glob(".uc-export-*/*")} - {previous.prefix}
    killed_with = len([p for p in (target / leftover).iterdir() if p.name != WRITER])  # data files
    assert Manifest.parse((target / MANIFEST).read_bytes(), where=path) == previous  # still the committed one
    assert sorted(relatives(UCVolumeDataset(f"{path}/big"))) == previous.file_keys()
    assert ids(load_hf_dataset(f"{path}/big")) == list(range(7))

    # The next export replaces the previous one, whose files go, a stale leftover (its export began long
    # ago) and the killed one's, young but stamped by a process that is gone. A young leftover without a
    # stamp would stay: it may be an export still running beside it (STALE_AFTER_S).
    stale = target / ".uc-export-20200101T000000Z-0badf00d"
    stale.mkdir()
    (stale / "part-00000.parquet").write_bytes(b"left by an export killed long ago")
    assert run_python(EXPORT, "main.ml.big", f"{path}/big")[0] == f"{path}/big"
    committed = Manifest.parse((target / MANIFEST).read_bytes(), where=path)
    assert committed.rows == big and committed.table == "main.ml.big"
    assert 1 <= killed_with < len(committed.files)  # that export was killed mid-upload
    assert {p.parent.name for p in target.glob(".uc-export-*/*")} == {committed.prefix}
    assert [p.name for p in target.iterdir() if not p.name.startswith(".")] == [MANIFEST]
    assert sorted(relatives(UCVolumeDataset(f"{path}/big"))) == committed.file_keys()
    assert len(load_hf_dataset(f"{path}/big")) == big


def test_export_into_s3_needs_write_volume(catalog: LocalCatalog, s3_volume: VolumeMaker) -> None:
    path, folder = s3_volume()
    catalog.create_principal("alice")
    for securable, privilege in (("main", "USE CATALOG"), ("main.ml", "USE SCHEMA"), ("main.ml.remote", "READ VOLUME")):
        catalog.grant(securable, privilege, "alice")
    with (
        catalog.as_principal("alice"),
        pytest.raises(PermissionDenied, match="alice lacks WRITE VOLUME on main.ml.remote"),
    ):
        export_table("main.ml.t", f"{path}/mine")
    assert not any(folder.iterdir())


COMMIT_FAILS = (
    "import json, sys\nfrom uc_jupyter.tables import export_table\ntry:\n    export_table(*sys.argv[1:])\n"
    "    print(json.dumps(None))\nexcept OSError as exc:\n    print(json.dumps(str(exc)))"
)


@pytest.fixture
def twenty(catalog: LocalCatalog) -> str:
    """``main.ml.t``: ids 0..19, made in the test's parent process (as ``big``)."""
    catalog.create_table("main.ml.t", pa.table({"id": list(range(20))}))
    return "main.ml.t"


def test_an_s3_commit_that_fails_after_it_landed_keeps_the_files_its_manifest_names(
    catalog: LocalCatalog, s3: S3TestServer, s3_volume: VolumeMaker, spark_remote: str, twenty: str
) -> None:
    path, folder = s3_volume()
    previous = write_export(folder / "t", [3, 4])
    s3.configure(store_then_fail=MANIFEST)  # the manifest's PUT is stored, then answered with an error
    try:
        error, run = run_python(COMMIT_FAILS, twenty, f"{path}/t")
    finally:
        s3.configure(store_then_fail="")
    assert "cannot write" in error and "RequestTimeout" in error
    committed = Manifest.parse((folder / "t" / MANIFEST).read_bytes(), where=path)
    assert committed.id != previous.id and committed.rows == 20  # the commit landed
    assert ids(load_hf_dataset(f"{path}/t")) == list(range(20))  # every file it names is there
    said = (
        f"UcJupyterWarning: {path}/t: export {committed.id} committed nevertheless; "
        "its files and the previous export's stay"
    )
    assert said in run.stderr
    assert all((folder / "t" / key).is_file() for key in previous.file_keys())  # kept while the commit is unsure
