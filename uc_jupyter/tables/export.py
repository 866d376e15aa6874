"""Tables too big for ``toPandas()``: export as Parquet into a volume, load with Hugging Face ``datasets``.

``export_table`` has Spark write the table as Parquet into a private local folder (the local Spark
server has no object-storage connector), uploads the files under a hidden prefix of the target
folder (``<folder>/.uc-export-<id>/``), and makes them visible in one step by writing the committed
manifest ``<folder>/_uc_export.json`` (:mod:`uc_jupyter.storage.export_manifest`); then the previous
export's files go. Local (``file://``) and object-storage volumes take the same layout, through the
volume write seam (:mod:`uc_jupyter.storage.writes`: no symlink followed on local volumes).
Readers (``load_hf_dataset``, ``UCVolumeDataset``) read only what the manifest names
(:mod:`uc_jupyter.data.volume.committed`), so a failed or killed export leaves the previous one whole and
readable. An exception removes its own upload, unless it came from the commit's write and the
manifest read back names this export (the write landed: the upload stays, and the error is raised
after a warning saying so); a killed export's upload is removed by a later export once it is
:data:`~uc_jupyter.storage.export_manifest.STALE_AFTER_S` old (exports take no lock, and a younger
prefix may be an export still running beside it) or at once when its ``_writer`` stamp names a
process of this machine that is gone. Its local staging folder is held by its process
(:mod:`uc_jupyter.storage.staged`) and removed by the next export (or save, or ``uc-jupyter gc``)
once that process is gone. Folders exported before manifests (Parquet files at the top) still load,
and the next export replaces their files.

Example:
    >>> export_table("main.ml.iris", "/Volumes/main/ml/exports/iris")      # doctest: +SKIP
    >>> ds = load_hf_dataset("/Volumes/main/ml/exports/iris")              # doctest: +SKIP
    >>> ds.num_rows                                                         # doctest: +SKIP
    3000
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from uc_jupyter.catalog import AlreadyExists, Catalog, NotFound, ResolvedVolumePath, get_catalog
from uc_jupyter.catalog.rules.names import parse_volume_path
from uc_jupyter.errors import UcJupyterWarning
from uc_jupyter.processes import stamp, stamp_alive
from uc_jupyter.storage import staged
from uc_jupyter.storage import urls as st
from uc_jupyter.storage.export_manifest import (
    MANIFEST,
    PREFIX,
    WRITER,
    ExportFile,
    Manifest,
    ManifestError,
    leftovers,
    new_export_id,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from uc_jupyter.data.volume.listing import Listing
    from uc_jupyter.storage.writes import VolumeWrites

__all__ = ["ExportTarget", "commit_export", "export_table", "export_target", "load_hf_dataset", "remove_upload"]

_UPLOADS_AT_ONCE = 4  # files uploaded at once (each large one also sends its parts at once)


def export_table(
    name: str,
    path: str,
    *,
    mode: Literal["overwrite", "error"] = "overwrite",
    spark: SparkSession | None = None,
    catalog: Catalog | None = None,
) -> str:
    """Write table ``name`` as Parquet files into the volume folder ``path``; return ``path``.

    Needs SELECT on the table and WRITE VOLUME on the volume, both checked before anything is
    written. The volume may be local or on object storage (s3://, gs://, Azure); the Spark server
    must be able to write this machine's local disk (the local server does). ``mode="error"``
    refuses a folder that already holds files.
    """
    from uc_jupyter.storage.writes import staging_folder
    from uc_jupyter.tables.delta import open_delta
    from uc_jupyter.tables.frames import table

    cat = catalog or get_catalog()
    target = export_target(path, mode, catalog=cat, example=name)  # WRITE VOLUME
    full_name = cat.resolve_table(name).table.full_name  # SELECT, checked before anything is written
    writes = target.writes
    version = open_delta(name, catalog=cat).version()
    manifest = Manifest(new_export_id(), full_name, version, ())
    staged.sweep(staging_folder())  # what killed exports and uploads left on this disk
    # 0700 (only we, and the local Spark server as us, write it), on the disk uploads are staged on,
    # held by this process until it is removed.
    with staged.staged_folder(staging_folder(), "export-") as folder:
        out = Path(folder) / "out"
        try:
            # First: the prefix names its writer, so a later export removes it at once if this one is killed.
            writes.put_bytes(f"{manifest.prefix}/{WRITER}", stamp().encode())
            table(name, version=version, catalog=cat, spark=spark).write.mode("overwrite").parquet(str(out))
            manifest = Manifest(manifest.id, full_name, version, tuple(_parquet_files(out)))
            _upload(writes, manifest, out)
        except BaseException:
            remove_upload(writes, manifest)
            raise
    commit_export(target, manifest)
    return target.where


@dataclass(frozen=True)
class ExportTarget:
    """A volume folder an export writes into, WRITE VOLUME checked: its /Volumes path, its write seam and
    the export committed there before (None: none)."""

    where: str
    resolved: ResolvedVolumePath
    writes: VolumeWrites
    previous: Manifest | None


def export_target(
    path: str, mode: Literal["overwrite", "error"], *, catalog: Catalog | None = None, example: str = "out"
) -> ExportTarget:
    """The folder ``path`` an export (``export_table``'s, or a Ray Dataset's) writes into, WRITE VOLUME
    checked; ``mode="error"`` refuses a folder that already holds files, a whole volume is refused
    (``example`` names a folder to suggest).

    Example:
        >>> export_target("/Volumes/main/ml/exports/points", "overwrite").previous  # doctest: +SKIP
    """
    from uc_jupyter.storage.writes import open_writes

    if mode not in ("overwrite", "error"):
        raise ValueError(f"invalid mode {mode!r}: use 'overwrite' or 'error'")
    cat = catalog or get_catalog()
    target_path = parse_volume_path(path)
    if not target_path.relative:
        raise ValueError(f"{path} is a whole volume; export into a folder of it, e.g. {path.rstrip('/')}/{example}")
    where = str(target_path)
    resolved = cat.resolve_volume_path(where, write=True)  # WRITE VOLUME
    writes = open_writes(resolved.url, resolved.storage_options, where=where, root=resolved.volume.storage_location)
    keys = _keys(writes)
    if mode == "error" and any(not key.startswith(".") for key in keys):
        raise AlreadyExists(f"{where} exists; export with mode='overwrite' to replace it")
    return ExportTarget(where, resolved, writes, _committed(writes, keys, where))


def commit_export(target: ExportTarget, manifest: Manifest) -> None:
    """Make ``manifest``'s files, all uploaded under its prefix, the folder's export: one PUT of the
    manifest, then the files it replaced removed (see the module docstring for a commit that fails).

    Example:
        >>> commit_export(target, Manifest(export_id, "main.ml.t", 3, files))  # doctest: +SKIP
    """
    writes, where = target.writes, target.where
    try:
        writes.put_bytes(MANIFEST, manifest.to_bytes())  # the commit: one PUT, visible whole or not at all
    except BaseException:
        # A write can raise after it landed (a reply lost after S3 stored it, a failed fsync of the
        # folder after the rename, Ctrl-C between the two): the manifest then names our prefix, so it
        # stays, and so do the previous export's files (the commit may not be durable yet). The error
        # is raised all the same, after a warning saying so; a later export removes what is left
        # (the older prefix once it is stale).
        landed: bool | None
        try:
            found = _committed(writes, [MANIFEST], where)
            landed = found is not None and found.id == manifest.id
        except Exception:
            landed = None  # not known: its files stay (a later export removes them once stale)
        if landed is False:
            remove_upload(writes, manifest)
        else:
            done = "committed nevertheless" if landed else "may have committed"
            message = f"{where}: export {manifest.id} {done}; its files and the previous export's stay"
            warnings.warn(message, UcJupyterWarning, stacklevel=3)  # beside the error (no add_note on 3.10)
        raise
    _remove_replaced(writes, manifest, target.previous, where)


def load_hf_dataset(
    path: str,
    *,
    streaming: bool = False,
    split: str = "train",
    catalog: Catalog | None = None,
    **load_options: Any,
) -> Any:
    """The Parquet files under the volume folder ``path`` as a Hugging Face dataset; of an export
    folder, only the files its committed manifest names (one line if one of them is missing).

    Under ``torch.distributed`` (or RANK/WORLD_SIZE) the dataset is split by node, so every rank
    reads its own part. ``load_options`` go to ``datasets.load_dataset``. A local volume's files are
    opened as a dataset's are, from the volume's root without following a symlink
    (:mod:`uc_jupyter.storage.local_volume_fs`): Hugging Face copies them into its cache (as it does an
    object store's: under ``cache_dir``, by default ``$UC_JUPYTER_HOME/hf``) before it makes its
    memory-mapped Arrow files, and a stream reads them in place, in DataLoader workers too. A file
    swapped for a symlink meanwhile is a one-line ``VolumeReadError``, never read. On object storage
    each file is read as the version listed (:mod:`uc_jupyter.storage.pinned_versions`: its ETag sent
    with every read): one rewritten since, even with as many bytes, is a one-line ``VolumeReadError``.

    Example:
        >>> ds = load_hf_dataset("/Volumes/main/ml/exports/iris")                  # doctest: +SKIP
        >>> rows = load_hf_dataset("/Volumes/main/ml/exports/iris", streaming=True)  # doctest: +SKIP
    """
    import datasets

    from uc_jupyter.config import settings
    from uc_jupyter.data.stream.grid import current_rank
    from uc_jupyter.data.volume.listing import list_volume

    resolved = (catalog or get_catalog()).resolve_volume_path(path)
    listing = list_volume(resolved, recursive=True, include="*.parquet")
    local = st.is_local(resolved.url)
    files, options = _local_sources(resolved, listing) if local else _pinned_sources(resolved, listing)
    load_options.setdefault("cache_dir", str(settings().home / "hf"))
    with _without_progress_bars(datasets), _local_copies_offline(datasets, local=local):
        loaded = datasets.load_dataset(
            "parquet", data_files=files, split=split, streaming=streaming, storage_options=options, **load_options
        )
    rank, world = current_rank()
    if world > 1:
        from datasets.distributed import split_dataset_by_node

        loaded = split_dataset_by_node(loaded, rank=rank, world_size=world)
    return loaded


def _local_sources(resolved: ResolvedVolumePath, listing: Listing) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """What Hugging Face is handed for a local volume's listed files: not their local paths (it
    opens them later, as it copies them into its cache or as a stream's rows are asked for, in
    DataLoader workers too, and a file swapped for a symlink meanwhile would be read outside the
    volume), but their URLs on a filesystem that walks from the volume's root without following a
    symlink, in whichever process opens them (storage.local_volume_fs, whose docstring says why
    neither descriptors nor our own copies)."""
    from uc_jupyter.storage.local_volume_fs import PROTOCOL, VolumeRoot, url_of

    volume_path = resolved.volume_path[: len(resolved.volume_path) - len(resolved.relative)].rstrip("/")
    root = VolumeRoot(st.local_path(resolved.volume.storage_location), volume_path)
    below = f"{resolved.relative}/" if resolved.relative else ""
    return [url_of(root, f"{below}{f.relative}") for f in listing.files], {PROTOCOL: {"volume": root}}


def _pinned_sources(resolved: ResolvedVolumePath, listing: Listing) -> tuple[list[str], dict[str, dict[str, Any]]]:
    """What Hugging Face is handed for an object store's listed files: not the objects' own URLs
    (it would read whatever each holds when it gets to it, and one rewritten with as many bytes
    since the listing would be read silently), but their URLs on a filesystem that reads each as the
    version listed, its ETag sent with every read (storage.pinned_versions)."""
    from uc_jupyter.storage.pinned_versions import PROTOCOL, Pins, url_of

    top = st.storage_path(resolved.url).rstrip("/")
    listed = {f"{top}/{f.relative}": (f.size, f.etag) for f in listing.files}
    scheme = resolved.url.split("://", 1)[0]
    pins = Pins(scheme, dict(resolved.storage_options), listed, where=resolved.volume_path, root=top)
    return [url_of(path) for path in listed], {PROTOCOL: {"pins": pins}}


@contextlib.contextmanager
def _local_copies_offline(datasets: Any, *, local: bool) -> Iterator[None]:
    """Hugging Face's offline mode (``HF_HUB_OFFLINE``) lifted while it copies a local volume's files
    into its cache: it refuses any copy through a filesystem that is not its local one, and a local
    volume's files reach it through ``ucvolume://`` (see :func:`_local_sources`), though nothing leaves
    this machine. The packaged Parquet builder asks the Hub for nothing; restored as it was."""
    offline = local and bool(datasets.config.HF_HUB_OFFLINE)
    if offline:
        datasets.config.HF_HUB_OFFLINE = False
    try:
        yield
    finally:
        if offline:
            datasets.config.HF_HUB_OFFLINE = True


@contextlib.contextmanager
def _without_progress_bars(datasets: Any) -> Iterator[None]:
    """Hugging Face's progress bars off while it reads the export: the caller's progress line says
    the load is under way, and its "Generating train split: 3000/0" bar (no total: Parquet files it
    has not opened) stayed in the notebook as a widget that looked stuck. Restored as it was."""
    enabled = datasets.is_progress_bar_enabled()
    if enabled:
        datasets.disable_progress_bars()
    try:
        yield
    finally:
        if enabled:
            datasets.enable_progress_bars()


def _keys(writes: VolumeWrites) -> list[str]:
    """Every file below the export folder (none when it does not exist yet)."""
    try:
        return writes.list()
    except (FileNotFoundError, NotFound):
        return []


def _committed(writes: VolumeWrites, keys: list[str], where: str) -> Manifest | None:
    """The folder's committed manifest, or None (none, or one too damaged to say what it names:
    the files of such a folder that are not hidden go when this export commits)."""
    if MANIFEST not in keys:
        return None
    try:
        return Manifest.parse(writes.read_bytes(MANIFEST), where=where)
    except (ManifestError, FileNotFoundError):
        return None


def remove_upload(writes: VolumeWrites, manifest: Manifest) -> None:
    """Remove the files of an export that did not commit (best effort: the error that stopped the
    export is the one to see, and a leftover is removed by a later export once stale)."""
    with contextlib.suppress(Exception):
        writes.delete(writes.list(manifest.prefix))


def _remove_replaced(writes: VolumeWrites, manifest: Manifest, previous: Manifest | None, where: str) -> None:
    """Once ``manifest`` committed, remove the files it replaced; a failure is one warning (the export
    stands, and the next one removes what is left). Keys the seam cannot address (a backslash in a
    local file's name) are left where they are."""
    try:
        keys = _keys(writes)
        dead = _dead_prefixes(writes, keys)
        gone = leftovers(keys, committed=manifest, replaced=previous, now=time.time(), dead=dead)
        from uc_jupyter.storage.keys import is_addressable

        addressable = [key for key in gone if is_addressable(key)]
        writes.delete(addressable)
    except Exception as exc:
        warnings.warn(f"{where}: exported, but the previous export's files stay: {exc}", UcJupyterWarning, stacklevel=3)
        return
    if len(addressable) < len(gone):
        odd = next(key for key in gone if key not in addressable)
        warnings.warn(
            f"{where}: exported, but {len(gone) - len(addressable)} file(s) whose names cannot be written "
            f"through the volume stay, such as {odd!r}: remove them by hand",
            UcJupyterWarning,
            stacklevel=3,
        )


def _dead_prefixes(writes: VolumeWrites, keys: list[str]) -> set[str]:
    """The export prefixes in ``keys`` whose ``_writer`` stamp names a process of this machine that is
    gone (a stamp that cannot be read or judged: not dead, its prefix waits until it is stale)."""
    dead: set[str] = set()
    for key in keys:
        top, _, rest = key.partition("/")
        if rest != WRITER or not top.startswith(PREFIX):
            continue
        with contextlib.suppress(Exception):
            if stamp_alive(writes.read_bytes(key)[:256].decode()) is False:
                dead.add(top)
    return dead


def _parquet_files(folder: Path) -> list[ExportFile]:
    """The Parquet files Spark wrote into ``folder`` (its markers and checksums left out), with rows."""
    import pyarrow.parquet as pq

    if not (folder / "_SUCCESS").is_file():  # a Spark server on another machine wrote its own disk
        raise OSError(
            f"the Spark server wrote no export into {folder} on this machine: export_table needs a Spark "
            "server on this machine (such as the local one)"
        )
    found = sorted(p for p in folder.iterdir() if p.suffix == ".parquet" and not p.name.startswith((".", "_")))
    return [ExportFile(p.name, p.stat().st_size, pq.read_metadata(p).num_rows) for p in found]


def _upload(writes: VolumeWrites, manifest: Manifest, folder: Path) -> None:
    """Put the manifest's files under its prefix, a few at once, and check that all are there."""
    with cf.ThreadPoolExecutor(_UPLOADS_AT_ONCE, thread_name_prefix="uc-jupyter-export") as pool:
        sent = [pool.submit(writes.put_file, f"{manifest.prefix}/{f.name}", folder / f.name) for f in manifest.files]
        for done in sent:
            done.result()
    # A concurrent export removes a prefix only once it is stale: one that did is caught here, not
    # committed as a manifest naming files that are gone.
    missing = sorted(set(manifest.file_keys()) - set(writes.list(manifest.prefix)))
    if missing:
        raise OSError(f"export {manifest.id}: {missing[0]} was removed while uploading; export the table again")
