"""Spark's analysis errors as one line, through the real Spark Connect server, and pyspark's client
logs kept out of the notebook's stderr (uc_jupyter.tables.analysis, tables.spark.quiet_client_logs)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.errors import set_verbose
from uc_jupyter.tables import QueryError, table, to_pandas


@pytest.fixture
def quiet() -> Iterator[None]:
    set_verbose(False)
    yield
    set_verbose(None)


@pytest.mark.parametrize(
    ("query", "said"),
    [
        (
            lambda t: t.select("idx"),
            "table main.ml.points has no column 'idx'; did you mean 'id'? Its columns are id, x, tag",
        ),
        (lambda t: t.filter("tga = 't1'"), "table main.ml.points has no column 'tga'; did you mean 'tag'?"),
        (lambda t: t.select("id").select("x"), "this DataFrame has no column 'x'; its columns are id"),
        (lambda t: t.filter("zzz > 1"), "table main.ml.points has no column 'zzz'; its columns are id, x, tag"),
    ],
)
def test_a_column_that_does_not_exist_is_one_line_naming_the_closest(
    catalog: LocalCatalog, spark_remote: str, capfd: pytest.CaptureFixture[str], quiet: None, query: object, said: str
) -> None:
    import mlflow  # noqa: F401  # its logging set-up turned pyspark's client logger back on

    with pytest.raises(QueryError) as refused:
        query(table("main.ml.points"))  # type: ignore[operator]
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)
    assert isinstance(refused.value, ValueError)  # a user's mistake: the magic says it as a UsageError
    assert capfd.readouterr().err == ""  # no 'GRPC Error received', no query context, no JVM stack


def test_a_type_mismatch_is_sparks_own_sentence_in_one_line(
    catalog: LocalCatalog, spark_remote: str, capfd: pytest.CaptureFixture[str], quiet: None
) -> None:
    with pytest.raises(QueryError) as refused:
        table("main.ml.points").filter("id > array(1)")
    message = str(refused.value)
    assert message.startswith('Cannot resolve "(id > array(1))" due to data type mismatch') and "\n" not in message
    assert "SQLSTATE" not in message and "JVM" not in message
    assert capfd.readouterr().err == ""


@pytest.fixture
def client_records() -> Iterator[list[logging.LogRecord]]:
    """What pyspark's client loggers let through (after their filters), whatever stream their own
    handlers were made with (pytest replaces stderr per test)."""
    from pyspark.logger import PySparkLogger

    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    loggers = [PySparkLogger.getLogger(name) for name in ("pyspark.sql.connect.logging", "DataFrameQueryContextLogger")]
    for logger in loggers:
        logger.addHandler(handler)
    yield records
    for logger in loggers:
        logger.removeHandler(handler)


def test_verbose_shows_pysparks_client_logs_and_quiet_keeps_them_out(
    catalog: LocalCatalog, spark_remote: str, client_records: list[logging.LogRecord]
) -> None:
    frame = table("main.ml.points")
    with pytest.raises(QueryError):
        frame.select("idx")
    assert client_records == []  # quiet: nothing reaches any handler
    set_verbose(True)
    try:
        with pytest.raises(QueryError):
            frame.select("idx")
    finally:
        set_verbose(None)
    assert any("UNRESOLVED_COLUMN" in record.getMessage() for record in client_records), client_records
    assert len(to_pandas(frame.select("id"))) == 50  # the frame is unharmed
