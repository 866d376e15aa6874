"""Catalog tables as Spark Connect DataFrames, checked through the catalog, analysed early.

Example:
    >>> from uc_jupyter.tables import table, to_numpy
    >>> df = table("main.ml.iris")                     # doctest: +SKIP
    >>> features = to_numpy(df.select("sepal_length", "petal_length"))  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import re
from datetime import datetime
from typing import TYPE_CHECKING, Any

from uc_jupyter import options as opt
from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.storage.urls import delta_uri
from uc_jupyter.tables.analysis import one_line

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["table", "to_numpy", "to_pandas"]

_registered: set[int] = set()
_parallelism_by_session: dict[int, dict[str, str]] = {}


def table(
    name: str,
    *,
    version: int | None = None,
    timestamp: str | datetime | None = None,
    spark: SparkSession | None = None,
    catalog: Catalog | None = None,
) -> DataFrame:
    """The Delta table ``name`` as a Spark DataFrame.

    SELECT is checked through our catalog, a missing table raises ``NotFound`` and the plan is
    analysed here, so mistakes surface now rather than at the first action. ``version`` or
    ``timestamp`` travel in time.

    When the Spark session's own catalog knows ``name`` too (a Unity-Catalog-enabled Spark), the
    frame is ``spark.table(name)``, which that catalog resolves at each action, and time travel is
    its ``VERSION AS OF``/``TIMESTAMP AS OF``. Otherwise, and for time travel on a session table
    that cannot do it, the Delta files are read through
    :class:`~uc_jupyter.tables.delta_source.DeltaSource` (no Delta jars needed), pinned to the
    version current when ``table()`` was called.

    Example:
        >>> frame = table("main.ml.iris", version=3)                      # doctest: +SKIP
        >>> frame.where("label = 1").select("sepal_length").toPandas()    # doctest: +SKIP
    """
    from uc_jupyter.tables.delta import open_delta
    from uc_jupyter.tables.spark import get_spark

    version = opt.maybe_whole_number("version", version)
    if timestamp is not None and not isinstance(timestamp, (str, datetime)):
        raise TypeError(f"invalid timestamp {timestamp!r}: give an ISO 8601 str or a datetime")
    if version is not None and timestamp is not None:
        raise ValueError("give version or timestamp, not both")
    cat = catalog or get_catalog()
    resolved = cat.resolve_table(name)
    session = spark or get_spark()
    full_name = resolved.table.full_name
    if _session_knows(session, full_name):
        native = _session_table(session, full_name, version, timestamp)
        if native is not None:
            return native
    snapshot = open_delta(name, version=version, catalog=cat)
    if timestamp is not None:
        snapshot.load_as_version(timestamp)
    _register(session)
    frame = (
        session.read.format("uc_delta")
        .option("path", delta_uri(resolved.storage_location))
        .option("table", full_name)
        .option("version", str(snapshot.version()))
        .option("storage_options", json.dumps(resolved.storage_options or {}))
        .options(**_parallelism(session))
        .load()
    )
    return _checked(frame, f"table {full_name}")


def _session_knows(session: SparkSession, name: str) -> bool:
    """Whether the session's own catalog has a table ``name`` (the three-part name, quoted)."""
    from pyspark.errors import AnalysisException

    try:
        return bool(session.catalog.tableExists(name))
    except AnalysisException:
        # A catalog the session does not have reads as a namespace of its session catalog, which
        # Spark refuses (REQUIRES_SINGLE_PART_NAMESPACE): the session does not know the table.
        return False


def _session_table(
    session: SparkSession, name: str, version: int | None, timestamp: str | datetime | None
) -> DataFrame | None:
    """``name`` read through the session's catalog, travelling in time with SQL; None when that
    table cannot travel in time (it is not Delta there), so the caller reads the Delta files."""
    from pyspark.errors import AnalysisException

    if version is None and timestamp is None:
        return _checked(session.table(name), f"table {name}")
    if version is not None:
        clause = f"VERSION AS OF {int(version)}"
    else:
        moment = timestamp.isoformat() if isinstance(timestamp, datetime) else str(timestamp)
        if isinstance(timestamp, datetime) and timestamp.tzinfo is None:
            moment += "+00:00"  # naive means UTC, as for the Delta files
        clause = "TIMESTAMP AS OF '" + moment.replace("\\", "\\\\").replace("'", "\\'") + "'"
    try:
        return _checked(session.sql(f"SELECT * FROM {name} {clause}"), f"table {name}")
    except AnalysisException as exc:
        if (exc.getCondition() or "").startswith("UNSUPPORTED_FEATURE.TIME_TRAVEL"):
            return None
        raise


def to_pandas(frame: DataFrame) -> pd.DataFrame:
    """``frame.toPandas()`` (Arrow-based over Spark Connect)."""
    return frame.toPandas()


def to_numpy(frame: DataFrame) -> np.ndarray[Any, Any]:
    """The frame's rows as one NumPy array (numeric columns give a numeric dtype)."""
    return to_pandas(frame).to_numpy()


_CHECKED: dict[str, type] = {}
_OWNER = "_uc_jupyter_owner"  # what a checked frame's errors name: "table main.ml.t", or "this DataFrame"


def _checked(frame: DataFrame, owner: str = "this DataFrame") -> DataFrame:
    """``frame``, analysed now, whose ``select``/``filter``/``where``/``withColumn`` results are
    analysed at once too: a missing column fails at the call that names it, not at the first
    action (Spark Connect defers analysis otherwise), with one line
    (:class:`~uc_jupyter.tables.analysis.QueryError`: the column and the closest of this frame's,
    named for ``owner``: the table for the frame ``table()`` returns, "this DataFrame" for those
    made from it, whose columns may be others)."""
    # An analysis round trip; not .schema, which pyspark copies from the parent for filters.
    frame.isStreaming  # noqa: B018
    cls = _CHECKED.get("class")
    if cls is None:
        base = type(frame)

        def checking(name: str) -> Any:
            method = getattr(base, name)

            def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                from pyspark.errors import AnalysisException

                try:
                    return _checked(method(self, *args, **kwargs))
                except AnalysisException as refused:  # one line, not the JVM's stack
                    raise one_line(refused, getattr(self, _OWNER, "this DataFrame"), self.columns) from None

            call.__name__, call.__doc__ = name, method.__doc__
            return call

        names = ("select", "selectExpr", "filter", "where", "withColumn", "withColumns", "drop", "orderBy", "sort")
        cls = type("CheckedDataFrame", (base,), {name: checking(name) for name in names})
        _CHECKED["class"] = cls
    with contextlib.suppress(TypeError, AttributeError):  # an implementation that forbids it: unchecked, still working
        frame.__class__ = cls
        setattr(frame, _OWNER, owner)
    return frame


def _parallelism(session: SparkSession) -> dict[str, str]:
    """``{"parallelism": N}`` with N the splits Spark gives a leaf scan (its task slots), asked once
    per session; ``{}`` when the plan does not say. The data source plans where it cannot ask, and
    the CPUs it sees there can be many more than the slots (the local server is ``local[2]``):
    pieces of a file beyond the slots only queue, each decoding row groups its neighbours decode too."""
    key = id(session)
    if key not in _parallelism_by_session:
        # The physical plan of a range without a split count shows Spark's leaf-node default parallelism.
        row = session.sql("EXPLAIN SELECT id FROM range(1)").first()
        plan = str(row[0]) if row is not None else ""
        found = re.search(r"splits=(\d+)", plan)
        _parallelism_by_session[key] = {"parallelism": found.group(1)} if found else {}
    return _parallelism_by_session[key]


def _register(session: SparkSession) -> None:
    """Register the data source once per session; ship it by value so a remote server needs only
    deltalake and pyarrow, not uc_jupyter."""
    if id(session) in _registered:
        return
    # pyspark pickles with its own copy of cloudpickle: the module must be registered with that one.
    from pyspark import cloudpickle

    from uc_jupyter.storage import delta_snapshot
    from uc_jupyter.tables import delta_source

    for module in (delta_source, delta_snapshot):  # delta_source opens snapshots with delta_snapshot's opener
        cloudpickle.register_pickle_by_value(module)  # type: ignore[no-untyped-call]  # pyspark's copy has no hints
    session.dataSource.register(delta_source.DeltaSource)
    _registered.add(id(session))
