"""A Spark query that takes a while shows the project's progress line: from pyspark's progress
reports in a test's handler, and from a real Spark Connect server's through get_spark()'s session."""

from __future__ import annotations

import pytest
from pyspark.sql.connect.shell.progress import StageInfo

from uc_jupyter.progress import LineCallback, waiting
from uc_jupyter.tables.query_progress import QueryProgress
from uc_jupyter.tables.spark import get_spark
from uc_jupyter.testing.clocks import ManualClock


def stage(done: int, of: int, read: int = 0) -> StageInfo:
    return StageInfo(stage_id=0, num_tasks=of, num_completed_tasks=done, num_bytes_read=read, done=done == of)


def test_a_query_that_reports_shows_its_tasks_and_bytes_then_how_long_it_took() -> None:
    lines: list[str] = []
    clock = ManualClock()
    progress = QueryProgress(output=lambda: LineCallback(lines.append), clock=clock)
    progress([stage(0, 8)], 2, "op", False)
    clock.advance(0.5)
    progress([stage(1, 8)], 2, "op", False)  # within a second of the first report: nothing yet
    assert lines == []
    clock.advance(0.5)
    progress([stage(2, 8)], 2, "op", False)
    clock.advance(1.0)
    progress([stage(5, 8, read=12_345_678)], 2, "op", False)
    clock.advance(1.0)
    progress([stage(8, 8, read=20_000_000)], 0, "op", True)
    assert lines == [
        "Spark query: 2 of 8 tasks ... 1 s",
        "Spark query: 5 of 8 tasks, 12.3 MB read ... 2 s",
        "Spark query, 8 tasks: done in 3 s",
    ]


def test_a_quick_query_shows_nothing_and_queries_of_two_threads_keep_apart() -> None:
    lines: list[str] = []
    clock = ManualClock()
    quiet = QueryProgress(output=lambda: LineCallback(lines.append), clock=clock)
    quiet([], 0, "before its first report", True)
    quiet([stage(3, 8)], 1, "within a second of it", False)
    clock.advance(0.9)
    quiet([stage(8, 8)], 0, "within a second of it", True)
    assert lines == []
    progress = QueryProgress(output=lambda: LineCallback(lines.append), clock=lambda: 0.0, delay=0.0)
    progress([stage(1, 4)], 1, "a", False)
    progress([stage(2, 6)], 1, "b", False)
    progress([], 0, "a", True)
    progress([], 0, "b", True)
    assert lines == [
        "Spark query: 1 of 4 tasks ... 0 s",
        "Spark query: 2 of 6 tasks ... 0 s",
        "Spark query, 4 tasks: done in 0 s",
        "Spark query, 6 tasks: done in 0 s",
    ]


def test_inside_a_load_the_loads_line_says_the_query_and_goes_back_to_its_own_label() -> None:
    own: list[str] = []
    progress = QueryProgress(output=lambda: LineCallback(own.append), clock=lambda: 5.0)
    with waiting("loading main.ml.iris", interval=None) as load:
        progress([stage(3, 17)], 2, "op", False)
        during = load.label
        progress([], 0, "op", True)
        after = load.label
    assert during == "loading main.ml.iris: Spark query: 3 of 17 tasks"
    assert after == "loading main.ml.iris" and own == []  # no second line


@pytest.mark.usefixtures("spark_remote")
def test_a_real_querys_reports_reach_the_progress_line_of_the_session() -> None:
    spark = get_spark()
    # The session's own handler (a line a second after the query's first report), and one that shows
    # at once, so that a query of a second or two says what the server reported.
    assert sum(isinstance(h, QueryProgress) for h in spark.client._progress_handlers) == 1
    lines: list[str] = []
    at_once = QueryProgress(output=lambda: LineCallback(lines.append), delay=0.0)
    spark.registerProgressHandler(at_once)
    spark.conf.set("spark.connect.progress.reportInterval", "200ms")
    try:
        total = spark.range(0, 10**8, numPartitions=8).selectExpr("sum(id % 7) AS s").collect()[0]["s"]
    finally:
        spark.conf.unset("spark.connect.progress.reportInterval")
        spark.removeProgressHandler(at_once)
    assert total == 21 * (10**8 // 7) + 1  # 0+1+...+6 per 7 ids; the 2 ids left over add 0 and 1
    assert any(line.startswith("Spark query: ") and " of 8 tasks" in line for line in lines), lines
    assert lines[-1].startswith("Spark query, ") and ": done in " in lines[-1], lines
