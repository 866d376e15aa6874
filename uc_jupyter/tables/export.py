"""Tables too big for ``toPandas()``: export as Parquet into a volume, load with Hugging Face ``datasets``.

``export_table`` writes into a temporary sibling folder and swaps it in only when complete, so a
failed export leaves the previous contents intact. ``load_hf_dataset`` reads the Parquet files of
a volume folder (marker and hidden files skipped) with ``datasets.load_dataset("parquet")``, split
by node when ranks exist.

Example:
    >>> export_table("main.ml.iris", "/Volumes/main/ml/exports/iris")      # doctest: +SKIP
    >>> ds = load_hf_dataset("/Volumes/main/ml/exports/iris")              # doctest: +SKIP
    >>> ds.num_rows                                                         # doctest: +SKIP
    3000
"""

from __future__ import annotations

import contextlib
import uuid
from typing import TYPE_CHECKING, Any, Literal

from uc_jupyter.catalog import AlreadyExists, Catalog, NotFound, get_catalog
from uc_jupyter.catalog import storage as st
from uc_jupyter.catalog.names import parse_volume_path

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["export_table", "load_hf_dataset"]


def export_table(
    name: str,
    path: str,
    *,
    mode: Literal["overwrite", "error"] = "overwrite",
    spark: SparkSession | None = None,
    catalog: Catalog | None = None,
) -> str:
    """Write table ``name`` as Parquet files into the volume folder ``path``; return ``path``.

    Needs SELECT on the table and WRITE VOLUME on the volume; the volume must be on storage the
    Spark server can write (local volumes here; object storage lacks an atomic folder swap and the
    local server has no S3 connector). ``mode="error"`` refuses an existing folder.
    """
    from uc_jupyter.tables.frames import table

    if mode not in ("overwrite", "error"):
        raise ValueError(f"invalid mode {mode!r}: use 'overwrite' or 'error'")
    cat = catalog or get_catalog()
    target_path = parse_volume_path(path)
    if not target_path.relative:
        raise ValueError(f"{path} is a whole volume; export into a folder of it, e.g. {path.rstrip('/')}/{name}")
    resolved = cat.resolve_volume_path(str(target_path), write=True)
    cat.resolve_table(name)  # SELECT, checked before anything is written
    if not st.is_local(resolved.url):
        raise ValueError(
            f"cannot export into {target_path}: its volume is at {resolved.volume.storage_location}, and exports "
            "go to volumes on local storage for now; export into a managed volume"
        )
    fs, target = resolved.fs, resolved.path.rstrip("/")
    if fs.exists(target) and mode == "error":
        raise AlreadyExists(f"{target_path} exists; export with mode='overwrite' to replace it")
    parent, leaf = target.rsplit("/", 1)
    staging = f"{parent}/.{leaf}.export-{uuid.uuid4().hex[:8]}"
    try:
        table(name, catalog=cat, spark=spark).write.mode("overwrite").parquet(staging)
        _swap(fs, staging, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            if fs.exists(staging):
                fs.rm(staging, recursive=True)
    return str(target_path)


def load_hf_dataset(
    path: str,
    *,
    streaming: bool = False,
    split: str = "train",
    catalog: Catalog | None = None,
    **load_options: Any,
) -> Any:
    """The Parquet files under the volume folder ``path`` as a Hugging Face dataset.

    Under ``torch.distributed`` (or RANK/WORLD_SIZE) the dataset is split by node, so every rank
    reads its own part. ``load_options`` go to ``datasets.load_dataset``.
    """
    import datasets

    from uc_jupyter.config import settings
    from uc_jupyter.data.grid import current_rank
    from uc_jupyter.data.remote import list_volume

    resolved = (catalog or get_catalog()).resolve_volume_path(path)
    listing = list_volume(resolved, recursive=True, include="*.parquet")
    if st.is_local(resolved.url):
        files = [f"{resolved.path.rstrip('/')}/{f.relative}" for f in listing.files]
        options = None
    else:
        files = [f"{resolved.url}/{f.relative}" for f in listing.files]
        options = resolved.storage_options
    load_options.setdefault("cache_dir", str(settings().home / "hf"))
    loaded = datasets.load_dataset(
        "parquet", data_files=files, split=split, streaming=streaming, storage_options=options, **load_options
    )
    rank, world = current_rank()
    if world > 1:
        from datasets.distributed import split_dataset_by_node

        loaded = split_dataset_by_node(loaded, rank=rank, world_size=world)
    return loaded


def _swap(fs: Any, staging: str, target: str) -> None:
    """Put ``staging`` where ``target`` is; the old contents are removed only after that."""
    old = None
    if fs.exists(target):
        old = f"{target.rsplit('/', 1)[0]}/.{target.rsplit('/', 1)[1]}.old-{uuid.uuid4().hex[:8]}"
        fs.mv(target, old, recursive=True)
    try:
        fs.mv(staging, target, recursive=True)
    except BaseException:
        if old is not None:
            fs.mv(old, target, recursive=True)
        raise
    if old is not None:
        with contextlib.suppress(FileNotFoundError, NotFound):
            fs.rm(old, recursive=True)
