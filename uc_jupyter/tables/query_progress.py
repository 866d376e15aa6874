"""Spark queries that take a while show the project's progress line while they run.

pyspark's Spark Connect client calls the progress handlers registered on a session with each of the
server's progress reports (stages, tasks done, bytes read; ``spark.connect.progress.reportInterval``
apart, the first once the query has run that long) and once more with ``done=True`` when the query
ends, however it ends. :class:`QueryProgress` turns them into the line of :mod:`uc_jupyter.progress`:
a ``.show()``, a ``toPandas()`` or a first query still running a second after its first report
shows ``Spark query: 9 of 17 tasks, 12.3 MB read ... 3 s`` (the time since that report), then
``Spark query, 17 tasks: done in 4 s``; inside a wait of ours (a table load) that wait's line says it
instead (``loading main.ml.iris: Spark query: 9 of 17 tasks ... 5 s``). A query that ends within a
second of its first report shows nothing: a loaded machine's short queries stay quiet.

Example:
    >>> from pyspark.sql.connect.shell.progress import StageInfo
    >>> from uc_jupyter.progress import LineCallback
    >>> lines = []
    >>> progress = QueryProgress(output=lambda: LineCallback(lines.append), clock=lambda: 0.0, delay=0.0)
    >>> stage = StageInfo(stage_id=0, num_tasks=8, num_completed_tasks=3, num_bytes_read=0, done=False)
    >>> progress([stage], 2, "op-1", False)
    >>> progress([stage], 0, "op-1", True)
    >>> lines
    ['Spark query: 3 of 8 tasks ... 0 s', 'Spark query, 8 tasks: done in 0 s']
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from uc_jupyter.progress import ProgressOutput, Wait, auto_output, current_wait

if TYPE_CHECKING:
    from pyspark.sql.connect.shell.progress import StageInfo

__all__ = ["QueryProgress"]


class _Shown:
    """One running query's line: a wait of its own, or the enclosing wait relabelled (and its label before)."""

    __slots__ = ("before", "tasks", "wait")

    def __init__(self, wait: Wait, before: str | None) -> None:
        self.wait, self.before, self.tasks = wait, before, 0


class QueryProgress:
    """A Spark Connect progress handler (``session.registerProgressHandler``); see the module docstring.

    Args:
        output: makes the output of a query's own line (default: a widget in a kernel, a rewritten
            line on a terminal, as every progress line of the project).
        clock: seconds, for the time shown.
        delay: seconds past a query's first report before its own line shows.
    """

    def __init__(
        self,
        *,
        output: Callable[[], ProgressOutput] = auto_output,
        clock: Callable[[], float] = time.monotonic,
        delay: float = 1.0,
    ) -> None:
        self._output, self._clock, self._delay = output, clock, delay
        self._shown: dict[str, _Shown] = {}
        self._lock = threading.Lock()  # queries of several threads report at once

    def __call__(
        self, stages: Iterable[StageInfo] | None, inflight_tasks: int, operation_id: str | None, done: bool
    ) -> None:
        key = operation_id or ""
        if done:
            with self._lock:
                shown = self._shown.pop(key, None)
            if shown is not None:
                self._end(shown)
            return
        stages = list(stages or ())
        tasks = sum(s.num_tasks for s in stages)
        if not tasks:
            return
        finished = sum(s.num_completed_tasks for s in stages)
        read = sum(s.num_bytes_read for s in stages)
        text = f"Spark query: {finished:,} of {tasks:,} tasks" + (f", {read / 1e6:,.1f} MB read" if read else "")
        with self._lock:
            shown = self._shown.get(key)
            if shown is None:
                shown = self._shown[key] = self._begin()
        shown.tasks = tasks
        shown.wait.label = text if shown.before is None else f"{shown.before}: {text}"  # redraws it

    def _begin(self) -> _Shown:
        outer = current_wait()
        if outer is not None:  # a load of ours waits for this query: its line says so
            return _Shown(outer, outer.label)
        return _Shown(Wait("Spark query", self._output(), clock=self._clock, delay=self._delay), None)

    def _end(self, shown: _Shown) -> None:
        if shown.before is not None:
            shown.wait.label = shown.before  # the load goes on: its own line again
            return
        shown.wait.finish(label=f"Spark query, {shown.tasks:,} tasks")
