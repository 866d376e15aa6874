"""``write_delta(ds, "main.ml.t", mode=...)``: a Ray Dataset written into a catalog table in one Delta
commit, the table created (and registered) only when that commit is made.

Ray's own ``Dataset.write_delta(catalog=...)`` resolves a table that exists, writes Parquet files in its
tasks and commits them on the driver; it has no step after the commit, so it cannot register a new
table, and a failed write leaves the files its finished tasks wrote. This writes with Ray's Delta
datasink (the same tasks and the same one commit) and adds the catalog's steps around it:

- a new table (CREATE TABLE checked): a staging table first (the catalog picks the managed storage),
  the files and the first commit there, then the registration; a write or registration that fails
  gives the staging table back with its files (a driver killed meanwhile: the staging table expires
  and the catalog's sweep removes it), so a failed write leaves neither a table nor files;
- an existing table (MODIFY checked): the append or overwrite commits at its location, then the
  catalog reads its columns again; a write that fails before its commit removes the files it wrote,
  and only those (each is named with this write's id: another writer's files are left alone).

An append must bring the table's columns (names and Delta types; any order): anything else is refused
before a task starts, as the catalog's ``create_table`` refuses it; ``mode="overwrite"`` replaces them.

Example:
    >>> import ray, uc_jupyter.ray                                                  # doctest: +SKIP
    >>> ds = ray.data.from_items([{"x": 1}, {"x": 2}])                               # doctest: +SKIP
    >>> uc_jupyter.ray.write_delta(ds, "main.ml.new").full_name                      # doctest: +SKIP
    'main.ml.new'
"""

from __future__ import annotations

import logging
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ray.data._internal.datasource.delta_datasink import DeltaDatasink
from ray.data._internal.planner.plan_write_op import WRITE_UUID_KWARG_NAME
from ray.data._internal.savemode import SaveMode

from uc_jupyter.catalog import (
    AlreadyExists,
    Catalog,
    NotFound,
    ResolvedTable,
    StagingTableInfo,
    TableInfo,
    get_catalog,
)
from uc_jupyter.catalog.delta_files import arrow_columns, delta_columns, remove_unreferenced
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.ray.checks import append_mismatch, delta_format, table_name
from uc_jupyter.ray.resolver import UCCatalog
from uc_jupyter.storage.urls import delta_uri

if TYPE_CHECKING:
    import pyarrow as pa
    import ray.data

__all__ = ["write_delta"]

log = logging.getLogger(__name__)

Mode = Literal["append", "overwrite", "error"]


def write_delta(
    ds: ray.data.Dataset,
    name: str,
    *,
    mode: Mode = "append",
    catalog: UCCatalog | Catalog | None = None,
    partition_by: list[str] | None = None,
    ray_remote_args: dict[str, Any] | None = None,
    concurrency: int | None = None,
) -> TableInfo:
    """Write ``ds`` into the catalog table ``name`` in one Delta commit (see the module docstring) and
    return the table as the catalog has it afterwards.

    Args:
        ds: the Ray Dataset.
        name: ``catalog.schema.table``.
        mode: ``"append"`` (the default) or ``"overwrite"`` an existing table, creating it when missing;
            ``"error"`` creates it and refuses an existing one.
        catalog: a :func:`uc_jupyter.ray.catalog` or a project catalog (default ``get_catalog()``'s).
        partition_by: the columns of a new table's partitions (an existing table's are kept).
        ray_remote_args, concurrency: for the write tasks, as ``Dataset.write_datasink`` takes them.

    Raises:
        NotFound, PermissionDenied: the catalog's, one line, before any task starts (MODIFY on an
            existing table; USE CATALOG, USE SCHEMA and CREATE TABLE for a new one).
        AlreadyExists: ``mode="error"`` and the table exists.
        ValueError: an append whose columns are not the table's, or a bad ``mode``.

    Example:
        >>> uc_jupyter.ray.write_delta(ds, "main.ml.t", mode="overwrite").columns  # doctest: +SKIP
        (ColumnInfo(name='x', type_text='long', nullable=True),)
    """
    if mode not in ("append", "overwrite", "error"):
        raise ValueError(f"invalid mode {mode!r}: use 'append', 'overwrite' or 'error'")
    cat = catalog.catalog if isinstance(catalog, UCCatalog) else catalog or get_catalog()
    target = _Target.checked(cat, table_name(name, "write_delta"), mode)
    sink = _CatalogDeltaSink(target, "overwrite" if mode == "overwrite" else "append", partition_by)
    try:
        if mode == "append":
            target.check_append(_schema(ds))
        ds.write_datasink(sink, ray_remote_args=ray_remote_args, concurrency=concurrency)
    except BaseException as exc:
        if not sink.failure_handled:  # failed before Ray's write began: the sink never heard of it
            sink.on_write_failed(exc if isinstance(exc, Exception) else RuntimeError(str(exc)))
        raise
    assert sink.table is not None  # on_write_complete set it, or the write raised
    return sink.table


@dataclass
class _Target:
    """The table a write goes to, checked: an existing one resolved for writing, or a new one staged."""

    catalog: Catalog
    name: str
    resolved: ResolvedTable
    staged: StagingTableInfo | None

    @property
    def options(self) -> dict[str, Any]:
        return dict(self.resolved.storage_options)

    @classmethod
    def checked(cls, catalog: Catalog, name: str, mode: Mode) -> _Target:
        try:
            resolved = catalog.resolve_table(name, write=True)
        except NotFound as exc:
            if not str(exc).startswith("table "):  # a missing catalog or schema is the answer
                raise
        else:
            if mode == "error":
                raise AlreadyExists(
                    f"table {name} already exists; write with mode 'overwrite' or 'append' to change it"
                )
            delta_format(name, resolved.table.data_source_format, "write_delta")
            return cls(catalog, name, resolved, None)
        staged = catalog.create_staging_table(name)
        try:
            return cls(catalog, name, catalog.resolve_staging_table(staged), staged)
        except BaseException:
            cls(catalog, name, ResolvedTable(staged.table, staged.staging_location), staged).abandon()
            raise

    def check_append(self, schema: pa.Schema | None) -> None:
        """Refuse an append of ``schema`` (None: not known yet) to an existing table with other columns."""
        if self.staged is not None or schema is None:
            return
        existing = delta_columns(parse_name(self.name, levels=(3,)), self.resolved.storage_location, self.options)
        mismatch = append_mismatch(existing, arrow_columns(schema))
        if mismatch:
            raise ValueError(
                f"table {self.name}: the data's columns do not match the table's ({mismatch}); "
                "write with mode='overwrite' to replace them"
            )

    def abandon(self) -> None:
        """Give the staging table back with its files; the write's own error is the one to raise."""
        assert self.staged is not None
        try:
            self.catalog.abandon_staging_table(self.staged.id)
        except Exception as exc:
            log.warning(
                "could not give back staging table %s of %s (it expires by itself): %s", self.staged.id, self.name, exc
            )


class _CatalogDeltaSink(DeltaDatasink):
    """Ray's Delta datasink with the catalog's steps after its commit (register or refresh) and after a
    failure (abandon, or remove this write's files). Pickled into the write tasks without the catalog:
    they get the table's path and options and nothing else."""

    def __init__(self, target: _Target, mode: Literal["append", "overwrite"], partition_by: list[str] | None) -> None:
        super().__init__(
            delta_uri(target.resolved.storage_location),
            mode=SaveMode(mode),
            partition_by=partition_by,
            storage_options=target.options or None,
            # Ray would add new columns to the table on append; the catalog's tables change columns by
            # overwrite only, and write_delta checks an append's columns before it starts.
            schema_mode="error",
        )
        self._target: _Target | None = target
        self._write_id = uuid.uuid4().hex
        self._started = time.time()
        self._committed = False
        self.failure_handled = False
        self.table: TableInfo | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_target"] = None  # the catalog (a token, a connection) stays on the driver
        return state

    def on_write_start(self, schema: pa.Schema | None = None) -> None:
        import pyarrow as pa

        target = self._target
        assert target is not None, "on_write_start runs on the driver"
        if self._mode is SaveMode.APPEND and isinstance(schema, pa.Schema):  # a schema Ray learnt only now
            target.check_append(schema)
        super().on_write_start(schema)

    def write(self, blocks: Any, ctx: Any) -> Any:
        # Ray names each file with one id per write job; this write's own id instead, so that a failed
        # write can find exactly its files among those of any other writer of the table.
        ctx.kwargs[WRITE_UUID_KWARG_NAME] = self._write_id
        return super().write(blocks, ctx)

    def on_write_complete(self, write_result: Any) -> None:
        target = self._target
        assert target is not None, "on_write_complete runs on the driver"
        super().on_write_complete(write_result)  # Ray's one commit
        self._committed = True
        if target.staged is None:
            self.table = target.catalog.refresh_table(target.name)
        else:
            self.table = target.catalog.register_staged_table(
                target.name, target.staged.staging_location, staging_id=target.staged.id
            )

    def on_write_failed(self, error: Exception) -> None:
        self.failure_handled = True
        target = self._target
        if target is None:
            return
        if target.staged is not None:  # nothing refers to the staging table: it goes, files and all
            target.abandon()
        elif not self._committed:
            try:
                gone = remove_unreferenced(
                    target.resolved.storage_location, target.options, since=self._started, named_with=self._write_id
                )
            except Exception as exc:  # the write's own error is the one to see; these files are never read
                log.warning("could not remove the files of a failed write of %s: %s", target.name, exc)
                return
            log.info("removed %d file(s) of a failed write of %s", len(gone), target.name)


def _schema(ds: ray.data.Dataset) -> pa.Schema | None:
    """The dataset's arrow schema when Ray knows it without running anything, else None."""
    import pyarrow as pa

    schema = ds.schema(fetch_if_missing=False)
    base = getattr(schema, "base_schema", None)
    return base if isinstance(base, pa.Schema) else None
