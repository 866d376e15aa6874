"""Catalog tables as Spark Connect DataFrames, checked through the catalog, analysed early.

Example:
    >>> from uc_jupyter.tables import table, to_numpy
    >>> df = table("main.ml.iris")                     # doctest: +SKIP
    >>> features = to_numpy(df.select("sepal_length", "petal_length"))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
from datetime import datetime
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.catalog.storage import delta_uri

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["table", "to_numpy", "to_pandas"]

_registered: set[int] = set()


def table(
    name: str,
    *,
    version: int | None = None,
    timestamp: str | datetime | None = None,
    spark: SparkSession | None = None,
    catalog: Catalog | None = None,
) -> DataFrame:
    """The Delta table ``name`` as a Spark DataFrame, pinned to one version.

    SELECT is checked, a missing table raises ``NotFound`` and the plan is analysed here, so
    mistakes surface now rather than at the first action. ``version`` or ``timestamp`` travel in
    time. Read through :class:`~uc_jupyter.tables.delta_source.DeltaSource` (no Delta jars needed).
    """
    from uc_jupyter.tables.delta import open_delta
    from uc_jupyter.tables.spark import get_spark

    if version is not None and timestamp is not None:
        raise ValueError("give version or timestamp, not both")
    cat = catalog or get_catalog()
    resolved = cat.resolve_table(name)
    snapshot = open_delta(name, version=version, catalog=cat)
    if timestamp is not None:
        snapshot.load_as_version(timestamp)
    session = spark or get_spark()
    _register(session)
    frame = (
        session.read.format("uc_delta")
        .option("path", delta_uri(resolved.storage_location))
        .option("version", str(snapshot.version()))
        .option("storage_options", json.dumps(resolved.storage_options or {}))
        .load()
    )
    return _checked(frame)


def to_pandas(frame: DataFrame) -> pd.DataFrame:
    """``frame.toPandas()`` (Arrow-based over Spark Connect)."""
    return frame.toPandas()


def to_numpy(frame: DataFrame) -> np.ndarray[Any, Any]:
    """The frame's rows as one NumPy array (numeric columns give a numeric dtype)."""
    return to_pandas(frame).to_numpy()


_CHECKED: dict[str, type] = {}


def _checked(frame: DataFrame) -> DataFrame:
    """``frame``, analysed now, whose ``select``/``filter``/``where``/``withColumn`` results are
    analysed at once too: a missing column fails at the call that names it, not at the first
    action (Spark Connect defers analysis otherwise)."""
    # An analysis round trip; not .schema, which pyspark copies from the parent for filters.
    frame.isStreaming  # noqa: B018
    cls = _CHECKED.get("class")
    if cls is None:
        base = type(frame)

        def checking(name: str) -> Any:
            method = getattr(base, name)

            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                return _checked(method(self, *args, **kwargs))

            call.__name__, call.__doc__ = name, method.__doc__
            return call

        names = ("select", "selectExpr", "filter", "where", "withColumn", "withColumns", "drop", "orderBy", "sort")
        cls = type("CheckedDataFrame", (base,), {name: checking(name) for name in names})
        _CHECKED["class"] = cls
    with contextlib.suppress(TypeError):  # an implementation that forbids it: unchecked, still working
        frame.__class__ = cls
    return frame


def _register(session: SparkSession) -> None:
    """Register the data source once per session; ship it by value so a remote server needs only
    deltalake and pyarrow, not uc_jupyter."""
    if id(session) in _registered:
        return
    import cloudpickle

    from uc_jupyter.tables import delta_source

    cloudpickle.register_pickle_by_value(delta_source)
    session.dataSource.register(delta_source.DeltaSource)
    _registered.add(id(session))
