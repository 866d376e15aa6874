"""UCCatalog: a ``ray.data.Catalog`` over the project's catalog, so that Ray's own readers and writers
reach catalog tables by name with the catalog's checks and credentials.

``resolve`` is the catalog's :meth:`~uc_jupyter.catalog.Catalog.resolve_table`: SELECT checked for a read
and MODIFY for a write (the embedded catalog's grant checks, or the server's), and the storage options
it gives: over ``uc-jupyter serve`` credentials vended for that one table, never the storage
credential's own keys. Ray passes them to deltalake on the driver, and its read tasks get them inside
the file system deltalake builds from them; a write's tasks get them inside Ray's Delta datasink. The
catalog itself never travels: pickled (as Ray pickles a datasink that holds it) it becomes a catalog
that refuses to resolve, so no token or catalog connection reaches another node.

What Ray would get wrong is refused here, before Ray opens anything: a path instead of a table name, a
table that is not Delta, ``read_parquet`` on a Delta table (its folder holds files its log removed),
and a table with deletion vectors (``read_delta`` would return the rows they delete). A table that does
not exist is refused for a write too: Ray's ``write_delta`` has no step after its commit where the
table could be registered, so :func:`uc_jupyter.ray.write_delta` creates tables.

Example:
    >>> import ray, uc_jupyter.ray                                                       # doctest: +SKIP
    >>> ds = ray.data.read_delta("main.ml.t", catalog=uc_jupyter.ray.catalog())           # doctest: +SKIP
    >>> ds.write_delta("main.ml.t", catalog=uc_jupyter.ray.catalog(), mode="append")      # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from ray.data.catalog import Catalog as RayCatalog
from ray.data.catalog import CatalogAccessMode, ReaderFormat, ResolvedSource

from uc_jupyter.catalog import Catalog, CatalogError, NotFound, get_catalog
from uc_jupyter.catalog.delta_files import delta_snapshot
from uc_jupyter.ray.checks import delta_format, readable_by_ray, table_name
from uc_jupyter.storage.urls import delta_uri

__all__ = ["UCCatalog", "catalog"]

_CALLS = {
    (ReaderFormat.DELTA, CatalogAccessMode.READ): "ray.data.read_delta",
    (ReaderFormat.DELTA, CatalogAccessMode.WRITE): "Dataset.write_delta",
    (ReaderFormat.PARQUET, CatalogAccessMode.READ): "ray.data.read_parquet",
    (ReaderFormat.PARQUET, CatalogAccessMode.WRITE): "Dataset.write_parquet",
}


class UCCatalog(RayCatalog):
    """``ray.data.Catalog`` over ``catalog`` (default: :func:`~uc_jupyter.catalog.get_catalog`'s), called as
    the principal current at each call (``as_principal`` blocks included). See the module docstring.

    Example:
        >>> cat = UCCatalog()                                                    # doctest: +SKIP
        >>> ray.data.read_delta("main.ml.t", catalog=cat).count()                 # doctest: +SKIP
        3
    """

    def __init__(self, catalog: Catalog | None = None) -> None:
        self.catalog: Catalog = catalog if catalog is not None else get_catalog()

    def __repr__(self) -> str:
        return f"UCCatalog({self.catalog!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Ray pickles a datasink with its catalog into every write task: the tasks get the table's
        # options from the datasink, and nothing of the catalog (a token, a connection) with them.
        return (_DriverOnly, ())

    def resolve(
        self,
        table: str,
        *,
        reader: ReaderFormat,
        mode: CatalogAccessMode = CatalogAccessMode.READ,
    ) -> ResolvedSource:
        """Check and locate ``table`` for Ray's ``reader`` in ``mode`` (see the module docstring)."""
        reader, mode = ReaderFormat(reader), CatalogAccessMode(mode)
        call = _CALLS.get((reader, mode), f"a Ray {reader.value} reader")
        name = table_name(table, call)
        if reader is not ReaderFormat.DELTA and reader is not ReaderFormat.PARQUET:
            raise CatalogError(f"table {name}: {call} is not served by uc_jupyter's catalog, which holds Delta tables")
        write = mode is CatalogAccessMode.WRITE
        try:
            resolved = self.catalog.resolve_table(name, write=write)
        except NotFound as exc:
            if write and str(exc).startswith("table "):
                raise NotFound(
                    f"{exc}; Ray's write_delta cannot register a table when its write commits: create it with "
                    f"uc_jupyter.ray.write_delta(ds, {name!r})"
                ) from None
            raise
        delta_format(name, resolved.table.data_source_format, call)
        if reader is ReaderFormat.PARQUET:
            verb = "write it with Dataset.write_delta" if write else "read it with ray.data.read_delta"
            raise CatalogError(
                f"table {name} is a Delta table: its folder holds Parquet files its log has removed, and "
                f"only the log says which rows count; {verb}({name!r}, catalog=...)"
            )
        snapshot = delta_snapshot(name, resolved.storage_location, resolved.storage_options)
        if not write:
            readable_by_ray(name, snapshot)
        return ResolvedSource(
            path=delta_uri(resolved.storage_location),
            storage_options=dict(resolved.storage_options) or None,
            data_format=ReaderFormat.DELTA,
        )


class _DriverOnly(RayCatalog):
    """What a :class:`UCCatalog` becomes in another process: it resolves nothing. Ray asks a datasink's
    catalog again in a task only to renew credentials it gave as a file system, which UCCatalog never does."""

    def resolve(
        self,
        table: str,
        *,
        reader: ReaderFormat,
        mode: CatalogAccessMode = CatalogAccessMode.READ,
    ) -> ResolvedSource:
        raise CatalogError(
            f"table {table}: a uc_jupyter catalog resolves tables in the process that made it, never in a Ray "
            "task (its tasks get only the table's own credentials)"
        )


def catalog(catalog: Catalog | None = None) -> UCCatalog:
    """A ``ray.data.Catalog`` over the project's catalog (``get_catalog()``'s unless ``catalog`` is given):
    the embedded catalog, or ``uc-jupyter serve`` / another Unity Catalog server.

    Example:
        >>> import ray, uc_jupyter.ray                                                   # doctest: +SKIP
        >>> ray.data.read_delta("main.ml.t", catalog=uc_jupyter.ray.catalog()).take(2)    # doctest: +SKIP
        [{'x': 1}, {'x': 2}]
    """
    return UCCatalog(catalog)
