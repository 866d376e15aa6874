"""A project error raised in a DataLoader worker reaches the loop as itself: its type and its one line
(the file and why), not torch's "Caught ... in DataLoader worker process N." (uc_jupyter.data.loader.worker_errors)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.data.conftest import write_files
from uc_jupyter.catalog import PermissionDenied
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.data.loader.worker_errors import unwrapped
from uc_jupyter.errors import OneLine
from uc_jupyter.storage.errors import VolumeReadError


def test_a_file_swapped_for_a_symlink_in_a_worker_is_the_volume_read_error_naming_it(
    local_volume: Callable[..., tuple[str, Path]], tmp_path: Path
) -> None:
    path, folder = local_volume()
    write_files(folder, 8)
    dataset = UCVolumeDataset(path, cache="never")  # read in place: the worker opens what was listed
    (tmp_path / "secret").write_bytes(b"x" * 100)
    os.replace(folder / "f00005.bin", folder / "moved")
    (folder / "f00005.bin").symlink_to(tmp_path / "secret")
    loader = DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=lambda batch: batch, mlflow=False)
    with pytest.raises(VolumeReadError) as raised:
        list(loader)
    said = str(raised.value)
    assert f"{path}/f00005.bin" in said and "symbolic link" in said, said
    assert "\n" not in said and "Caught" not in said
    assert raised.value.__cause__ is None  # the worker's frames are the project's: nothing for the user there


def test_an_error_torch_could_not_make_again_comes_back_with_its_fields() -> None:
    # torch makes Type(text) of a worker's error, else RuntimeError(text): PermissionDenied takes three fields.
    text = (
        "Caught PermissionDenied in DataLoader worker process 1.\nOriginal Traceback (most recent call last):\n"
        '  File "x.py", line 1, in f\nuc_jupyter.catalog.PermissionDenied: alice lacks READ VOLUME on main.ml.v\n'
    )
    error = unwrapped(RuntimeError(text))
    assert isinstance(error, PermissionDenied) and isinstance(error, OneLine)
    assert (error.principal, error.privilege, error.securable) == ("alice", "READ VOLUME", "main.ml.v")


@pytest.mark.parametrize(
    "text",
    [
        "Caught ValueError in DataLoader worker process 0.\n...\nValueError: the user's own",  # not the project's
        "Caught OSError in DataLoader worker process 0.\n...\nuc_jupyter.storage.errors.VolumeReadError: x",  # mismatch
        "a plain message naming no worker",
        "Caught KeyError in DataLoader worker process 0.\n...\nuc_jupyter.catalog.NoSuchName: x",  # no such type
        "Caught Gone in DataLoader worker process 0.\n...\nuc_jupyter.no_such_module.Gone: x",  # no such module
        "",  # an error without a message
    ],
)
def test_anything_else_is_left_as_torch_raised_it(text: str) -> None:
    assert unwrapped(RuntimeError(text)) is None


def test_an_os_error_keeps_its_errno() -> None:
    text = (
        "Caught CacheBudgetError in DataLoader worker process 0.\n...\n"
        "uc_jupyter.data.cache.errors.CacheBudgetError: [Errno 28] the disk holding the cache is full"
    )
    from uc_jupyter.data.cache.errors import CacheBudgetError

    error = unwrapped(CacheBudgetError(text))
    assert isinstance(error, CacheBudgetError) and error.errno == 28
    assert error.strerror == "the disk holding the cache is full"
