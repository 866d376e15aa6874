"""A checkpoint through a catalog server: RestCatalog over an in-process ``uc-jupyter serve`` vends keys
for the volume (a role per vend on moto with IAM enforcement), and the writer and reader use only them:
WRITE VOLUME vends keys that write, READ VOLUME keys that read, and neither reaches another volume."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch.distributed.checkpoint as dcp

from tests.checkpoint.conftest import assert_bit_equal, every_kind, zeros_like
from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.checkpoint import UCVolumeReader, UCVolumeWriter, latest
from uc_jupyter.errors import UcJupyterWarning
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.served import ADMIN, Served, serving

pytestmark = pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
BUCKET = "ckpt-lake"


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        yield running


@pytest.fixture
def served(moto: MotoIam, tmp_path: Path) -> Iterator[Served]:
    """Volumes ``v.s.runs`` and ``v.s.other`` on one bucket; alice may write and read runs, reader only read it."""
    with serving(tmp_path / "home") as running:
        cat = running.catalog
        with as_principal(ADMIN):
            cat.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
            cat.create_external_location("lake", f"s3://{BUCKET}/vols", "moto_role")
            cat.create_catalog("v")
            cat.create_schema("v.s")
            for volume in ("runs", "other"):
                cat.create_volume(f"v.s.{volume}", f"s3://{BUCKET}/vols/{volume}")
            for who in ("alice", "reader"):
                cat.create_principal(who)
                cat.grant("v", "USE CATALOG", who)
                cat.grant("v.s", "USE SCHEMA", who)
                cat.grant("v.s.runs", "READ VOLUME", who)
            cat.grant("v.s.runs", "WRITE VOLUME", "alice")
        yield running


@pytest.mark.in_a_fork
def test_save_and_load_with_vended_keys(served: Served, moto: MotoIam) -> None:
    rest = RestCatalog(served.url, served.admin_token, token_for=served.token_for)
    try:
        state = every_kind(4)
        with as_principal("alice"):
            writer = UCVolumeWriter("/Volumes/v/s/runs/a/step-4", catalog=rest)
            # The commit then deletes the in-progress marker in one multi-object request, which moto
            # authorises against the bucket (S3 checks each key: tests/storage/test_writes.py), so
            # alice's keys for the volume's prefix are refused: the save stands, with the one warning.
            with pytest.warns(UcJupyterWarning, match=r"step-4 is committed, but removing .* Access Denied"):
                dcp.save(state, storage_writer=writer, no_dist=True)
        listed = moto.admin_client("s3").list_objects_v2(Bucket=BUCKET, Prefix="vols/")["Contents"]
        assert {o["Key"].rsplit("/", 1)[0] for o in listed} == {"vols/runs/a/step-4"}
        with as_principal("reader"):
            assert latest("/Volumes/v/s/runs/a", catalog=rest) == "/Volumes/v/s/runs/a/step-4"
            target = zeros_like(state)
            dcp.load(target, storage_reader=UCVolumeReader("/Volumes/v/s/runs/a/step-4", catalog=rest), no_dist=True)
            assert_bit_equal(target, state)
            with pytest.raises(PermissionError, match="^cannot save the checkpoint .*: reader lacks WRITE VOLUME"):
                UCVolumeWriter("/Volumes/v/s/runs/a/step-5", catalog=rest)
            with pytest.raises(PermissionError, match="reader lacks READ VOLUME on v.s.other"):
                UCVolumeReader("/Volumes/v/s/other/a/step-4", catalog=rest)
    finally:
        rest.close()
