"""``read_volume("/Volumes/main/ml/images", files="images", labels="folder")``: a volume folder's files
as a Ray Dataset, READ VOLUME checked; ``write_volume(ds, path)``: a Dataset as Parquet files in a volume
folder, WRITE VOLUME checked, visible by one commit (:func:`write_volume`).

The driver checks READ VOLUME and lists the folder once (:func:`uc_jupyter.data.volume.listing.list_volume`:
hidden and marker files left out, ``include`` / ``exclude`` globs, a table export's committed files
only); each read task gets a group of the listed files, the volume's description and its storage options
(over a server: credentials vended for that one volume), and opens each file as the catalog opens a
resolved path (:func:`uc_jupyter.catalog.volume_paths.open_volume_path`: on a local volume from its root
without following a symlink). Rows, as Ray's own readers make them:

- ``files="images"``: ``{"image": uint8 array, height x width x 3, "path"}`` (Pillow, RGB);
- ``files="binary"``: ``{"bytes", "path"}``; ``files="text"``: one ``{"text", "path"}`` per line;
- ``files="parquet"``: the Parquet files' rows, with ``"path"``;
- ``labels="folder"``: each file's class folder (the first folder below ``path``) as ``"label"``, an
  index into the sorted class folders (``recursive`` is then implied; files beside them are skipped).

Example:
    >>> import uc_jupyter.ray                                                              # doctest: +SKIP
    >>> ds = uc_jupyter.ray.read_volume("/Volumes/main/ml/images", files="images", labels="folder")  # doctest: +SKIP
    >>> ds.take(1)[0]["label"]                                                              # doctest: +SKIP
    0
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from ray.data.block import BlockMetadata
from ray.data.context import DataContext
from ray.data.datasource import Datasink, Datasource, ReadTask

from uc_jupyter.catalog import Catalog, VolumeInfo, get_catalog
from uc_jupyter.catalog.rules.names import parse_volume_path
from uc_jupyter.catalog.volume_paths import open_volume_path
from uc_jupyter.data.volume.decode import is_image_file
from uc_jupyter.data.volume.listing import list_volume
from uc_jupyter.ray.resolver import UCCatalog

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

    from uc_jupyter.storage.export_manifest import Manifest
    from uc_jupyter.tables.export import ExportTarget

__all__ = ["read_volume", "write_volume"]

Files = Literal["images", "binary", "text", "parquet"]
_FILES = ("images", "binary", "text", "parquet")


def read_volume(
    path: str,
    *,
    files: Files = "binary",
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    recursive: bool = False,
    labels: Literal["folder"] | None = None,
    catalog: UCCatalog | Catalog | None = None,
    override_num_blocks: int | None = None,
) -> ray.data.Dataset:
    """The files of the /Volumes folder ``path`` as a Ray Dataset (see the module docstring).

    Raises:
        NotFound, PermissionDenied, InvalidName: the catalog's, one line, before any task starts.
        ValueError: nothing to read, or a bad ``files`` / ``labels``.

    Example:
        >>> uc_jupyter.ray.read_volume("/Volumes/main/ml/docs", files="text", include="*.txt").count()  # doctest: +SKIP
        120
    """
    import ray.data

    if files not in _FILES:
        raise ValueError(f"invalid files {files!r}: use 'images', 'binary', 'text' or 'parquet'")
    if labels not in (None, "folder"):
        raise ValueError(f"invalid labels {labels!r}: use 'folder' (each file's class folder) or None")
    cat = catalog.catalog if isinstance(catalog, UCCatalog) else catalog or get_catalog()
    resolved = cat.resolve_volume_path(path)  # READ VOLUME
    keep = None
    if include is None and files in ("images", "parquet"):  # what the decoder can read, unless told
        keep = is_image_file if files == "images" else _is_parquet
    in_classes = labels == "folder"
    listing = list_volume(
        resolved,
        recursive=recursive or in_classes,
        include=include,
        exclude=exclude,
        keep=(lambda r: "/" in r and (keep is None or keep(r))) if in_classes else keep,
        kept=f"{files} files" + (" in class folders" if in_classes else ""),
    )
    relatives = [f.relative for f in listing.files]
    classes = sorted({r.split("/", 1)[0] for r in relatives}) if in_classes else []
    source = _VolumeFiles(
        resolved.volume,
        parse_volume_path(resolved.volume_path).relative,
        dict(resolved.storage_options),
        [(f.relative, f.size) for f in listing.files],
        files,
        classes,
    )
    dataset: ray.data.Dataset = ray.data.read_datasource(source, override_num_blocks=override_num_blocks)
    return dataset


def _is_parquet(relative: str) -> bool:
    return relative.lower().endswith(".parquet")


class _VolumeFiles(Datasource):
    """Listed files of one volume folder, read in groups of about equal bytes, one group per task."""

    def __init__(
        self,
        volume: VolumeInfo,
        folder: str,
        options: dict[str, Any],
        listed: list[tuple[str, int]],
        files: Files,
        classes: list[str],
    ) -> None:
        self._volume, self._folder, self._options = volume, folder, options
        self._listed, self._files, self._classes = listed, files, classes

    def get_name(self) -> str:
        return f"UCVolume({self._volume.full_name})"

    def estimate_inmemory_data_size(self) -> int | None:
        return sum(size for _, size in self._listed) or None

    def get_read_tasks(
        self, parallelism: int, per_task_row_limit: int | None = None, data_context: DataContext | None = None
    ) -> list[ReadTask]:
        count = max(1, min(parallelism, len(self._listed)))
        groups = [self._listed[i::count] for i in range(count)]  # sorted listing dealt out: sizes even out
        tasks = []
        for group in groups:
            metadata = BlockMetadata(
                num_rows=None if self._files in ("text", "parquet") else len(group),
                size_bytes=sum(size for _, size in group),
                input_files=None,
                exec_stats=None,
            )
            read = _ReadFiles(
                self._volume, self._folder, self._options, [r for r, _ in group], self._files, self._classes
            )
            tasks.append(ReadTask(read, metadata, per_task_row_limit=per_task_row_limit))
        return tasks


class _ReadFiles:
    """A read task's work (pickled to it): the files' paths below the folder, the volume's description
    and its storage options; never the catalog."""

    def __init__(
        self,
        volume: VolumeInfo,
        folder: str,
        options: dict[str, Any],
        relatives: list[str],
        files: Files,
        classes: list[str],
    ) -> None:
        self.volume, self.folder, self.options = volume, folder, options
        self.relatives, self.files, self.classes = relatives, files, classes

    def __call__(self) -> Iterator[pa.Table]:
        for relative in self.relatives:
            yield self._rows(relative)

    def _rows(self, relative: str) -> pa.Table:
        import pyarrow as pa

        below = f"{self.folder}/{relative}" if self.folder else relative
        where = parse_volume_path(f"{self.volume.path}/{below}")
        with open_volume_path(where, self.volume, self.options).open() as handle:
            data = handle.read()
        columns = self._decoded(data, str(where))
        rows = len(next(iter(columns.values())))
        columns["path"] = [str(where)] * rows
        if self.classes:
            columns["label"] = [self.classes.index(relative.split("/", 1)[0])] * rows
        if self.files == "images":  # Ray's tensor column: one array per row
            from ray.data.block import BlockAccessor

            block: pa.Table = BlockAccessor.batch_to_block({k: _stacked(v) for k, v in columns.items()})
            return block
        return pa.table(columns)

    def _decoded(self, data: bytes, where: str) -> dict[str, list[Any]]:
        if self.files == "binary":
            return {"bytes": [data]}
        if self.files == "text":
            return {"text": data.decode("utf-8").splitlines()}
        if self.files == "parquet":
            import pyarrow.parquet as pq

            rows: dict[str, list[Any]] = pq.read_table(io.BytesIO(data)).to_pydict()
            return rows
        import numpy as np
        from PIL import Image

        # Ray's read_images convention (height x width x channels), not the torch tensors of the
        # project's decode_image: rows of a Ray Dataset go to Ray's own transforms first.
        try:
            with Image.open(io.BytesIO(data)) as image:
                return {"image": [np.asarray(image.convert("RGB"))]}
        except Exception as exc:
            raise ValueError(f"{where}: not an image Pillow can read ({exc})") from None


def _stacked(values: list[Any]) -> Any:
    import numpy as np

    return np.stack(values) if values and isinstance(values[0], np.ndarray) else np.array(values)


def write_volume(
    ds: ray.data.Dataset,
    path: str,
    *,
    format: Literal["parquet"] = "parquet",
    mode: Literal["overwrite", "error"] = "overwrite",
    catalog: UCCatalog | Catalog | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    concurrency: int | None = None,
) -> str:
    """Write ``ds`` as Parquet files into the volume folder ``path`` (WRITE VOLUME) and make them visible
    in one commit, as a table export is (:func:`uc_jupyter.tables.export.commit_export`): each task
    writes its files under the export's hidden prefix with the volume's own credentials, the driver
    writes the manifest last, then the previous export's files go. A reader (``read_volume``,
    ``UCVolumeDataset``, ``load_hf_dataset``) sees the previous export whole or this one whole; a write
    that fails removes what it wrote. Returns ``path``.

    Example:
        >>> uc_jupyter.ray.write_volume(ds, "/Volumes/main/ml/exports/features")  # doctest: +SKIP
        '/Volumes/main/ml/exports/features'
    """
    from uc_jupyter.storage.export_manifest import WRITER, Manifest, new_export_id
    from uc_jupyter.tables.export import export_target

    if format != "parquet":
        raise ValueError(f"invalid format {format!r}: write_volume writes 'parquet'")
    cat = catalog.catalog if isinstance(catalog, UCCatalog) else catalog or get_catalog()
    target = export_target(path, mode, catalog=cat, example="ray")  # WRITE VOLUME
    manifest = Manifest(new_export_id(), _RAY_EXPORT, None, ())
    from uc_jupyter.processes import stamp

    # First: the prefix names its writer, so a later export removes it at once if this one is killed.
    target.writes.put_bytes(f"{manifest.prefix}/{WRITER}", stamp().encode())
    sink = _VolumeSink(target, manifest)
    try:
        ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    except BaseException as exc:
        if not sink.failure_handled:
            sink.on_write_failed(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        raise
    return target.where


_RAY_EXPORT = "ray.data.Dataset"  # what a manifest names as its source: a dataset, not a table


class _VolumeSink(Datasink[list[Any]]):
    """Parquet files under one export's prefix, committed by its manifest. Pickled into the tasks with
    the folder's URL, its storage options and the prefix: no catalog, no driver state."""

    def __init__(self, target: ExportTarget, manifest: Manifest) -> None:
        self._target: ExportTarget | None = target
        self._manifest = manifest
        resolved = target.resolved
        self._url, self._options = resolved.url, dict(resolved.storage_options)
        self._root, self._where = resolved.volume.storage_location, target.where
        self.failure_handled = False

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_target"] = None  # the write seam (clients, pools) stays on the driver
        return state

    def write(self, blocks: Iterable[Any], ctx: Any) -> list[Any]:
        import pyarrow.parquet as pq
        from ray.data.block import BlockAccessor

        from uc_jupyter.storage.export_manifest import ExportFile
        from uc_jupyter.storage.writes import open_writes

        writes = open_writes(self._url, self._options, where=self._where, root=self._root)
        written = []
        for index, block in enumerate(blocks):
            table = BlockAccessor.for_block(block).to_arrow()
            if table.num_rows == 0:
                continue
            out = io.BytesIO()
            pq.write_table(table, out)
            name = f"part-{ctx.task_idx:05d}-{index:05d}.parquet"
            writes.put_bytes(f"{self._manifest.prefix}/{name}", out.getvalue())
            written.append(ExportFile(name, out.tell(), table.num_rows))
        return written

    def on_write_complete(self, write_result: Any) -> None:
        from uc_jupyter.storage.export_manifest import Manifest
        from uc_jupyter.tables.export import commit_export

        target = self._target
        assert target is not None, "on_write_complete runs on the driver"
        files = sorted((f for done in write_result.write_returns for f in done), key=lambda f: f.name)
        manifest = Manifest(self._manifest.id, self._manifest.table, None, tuple(files))
        missing = sorted(set(manifest.file_keys()) - set(target.writes.list(manifest.prefix)))
        if missing:  # a concurrent export removed a stale-looking prefix: never commit what is gone
            raise OSError(f"export {manifest.id}: {missing[0]} was removed while writing; write again")
        commit_export(target, manifest)

    def on_write_failed(self, error: Exception) -> None:
        from uc_jupyter.tables.export import remove_upload

        self.failure_handled = True
        if self._target is not None:
            remove_upload(self._target.writes, self._manifest)
