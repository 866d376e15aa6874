"""The Spark Connect session: a remote server when configured, else the local server of this machine.

``get_spark()`` connects to ``UC_JUPYTER_SPARK_REMOTE`` (``sc://host:port``) when it is set.
Otherwise it connects to the local server of :mod:`uc_jupyter.tables.spark_server` (started on first
use, with a progress line, and stopped by its watchdog after 30 idle minutes); when that server has
gone and a new one started, the next ``get_spark()`` connects to the new one.

A process whose server has gone away still exits within seconds: pyspark's exit hook asks the
server to clean its ML cache with its default retry policy (15 retries over about 10 minutes), so a
hook of ours, run just before it, gives that clean-up one attempt and at most
``EXIT_CLEANUP_TIMEOUT_S`` seconds, then closes the channel. Calls to the local server retry for
about 5 seconds, not 10 minutes: a local server that does not answer has stopped.

Example:
    >>> from uc_jupyter.tables.spark import get_spark
    >>> spark = get_spark()          # doctest: +SKIP
    starting Spark Connect (first use: about 20 s) ... 6 s
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uc_jupyter.config import settings
from uc_jupyter.errors import first_line, verbose
from uc_jupyter.processes import unreachable
from uc_jupyter.progress import ProgressOutput
from uc_jupyter.tables.query_progress import QueryProgress
from uc_jupyter.tables.spark_server import (
    LocalServer,
    SparkUnavailable,
    local_server,
    running_server,
    server_status,
    stop_server,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = [
    "EXIT_CLEANUP_TIMEOUT_S",
    "LocalServer",
    "SparkUnavailable",
    "get_spark",
    "local_server",
    "quiet_client_logs",
    "quiet_pandas_version_warning",
    "running_server",
    "server_status",
    "stop_local_server",
]

EXIT_CLEANUP_TIMEOUT_S = 3.0
# A gRPC channel with no call for this long drops its connection (and reconnects on the next call),
# so the local server's watchdog sees an unused kernel as idle.
_CHANNEL_IDLE_MS = 60_000
# Retries against the local server: 0.1 + 0.3 + 0.9 + 2 + 2 s (pyspark's default waits up to 10 min).
_LOCAL_RETRIES: dict[str, Any] = {
    "max_retries": 5,
    "initial_backoff": 100,
    "backoff_multiplier": 3.0,
    "max_backoff": 2000,
}

_sessions: dict[str, SparkSession] = {}  # the sessions made here, by URL
_local_urls: set[str] = set()  # those of them to a local server
_lock = threading.Lock()

Progress = ProgressOutput | Callable[[str], object] | None


def get_spark(progress: Progress = None) -> SparkSession:
    """A Spark Connect session: to ``UC_JUPYTER_SPARK_REMOTE``, or to the local server, started when
    needed (``progress`` shows the start: a :class:`~uc_jupyter.progress.ProgressOutput`, a function
    given each line, or None for a widget in a kernel and a rewritten line on a terminal).

    Example:
        >>> get_spark(progress=print).range(3).count()   # doctest: +SKIP
        starting Spark Connect (first use: about 20 s) ... 1 s
        starting Spark Connect (first use: about 20 s): done in 9 s
        3
    """
    quiet_pandas_version_warning()
    quiet_client_logs()
    configured = settings()
    remote = configured.spark_remote
    url = remote or local_server(progress=progress).url
    with _lock:
        session = _sessions.get(url)
        if session is not None and not getattr(session, "is_stopped", False):
            return session
        if remote is None:
            for old_url in sorted(_local_urls - {url}):  # their server has gone: the new one has a new port
                _local_urls.discard(old_url)
                old = _sessions.pop(old_url, None)
                if old is not None:
                    _close(old)
            _local_urls.add(url)
        try:
            session = _connect(url, local=remote is None, timeout=configured.spark_connect_timeout)
        except Exception as exc:
            raise SparkUnavailable(f"cannot reach Spark Connect at {url}: {first_line(exc)}") from exc
        _sessions[url] = session
        return session


def stop_local_server(timeout: float = 60.0) -> bool:
    """Stop the local server (after closing this process's sessions to it); False when none ran."""
    running = running_server()
    if running is not None:
        with _lock:
            session = _sessions.pop(running.url, None)
        if session is not None:
            _close(session)
    return stop_server(timeout=timeout) is not None


def quiet_pandas_version_warning() -> None:
    """Silence PySpark's warning that pandas >= 3 is untested, in this process.

    PySpark 4.3 warns whenever its pandas helpers are imported (a session, ``toPandas``, or MLflow
    importing them in a process where a session set ``SPARK_CONNECT_MODE_ENABLED``); everything we use
    works with the pandas we install (shared/ENVIRONMENT.md), so users are not shown it. Cheap and
    idempotent; the kernel extension and the ranks call it too.
    """
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


# pyspark's client-side loggers: a gRPC error received (a JSON line with a stack, logged before the
# exception is raised), and an analysis error's query context (its JVM stack). The exception says it
# all, in one line where we raise it.
_CLIENT_LOGGERS = ("pyspark.sql.connect.logging", "DataFrameQueryContextLogger", "SQLQueryContextLogger")


class _UnlessVerbose(logging.Filter):
    """Lets a record through only while :func:`uc_jupyter.errors.verbose` says so (read at each record)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return verbose()


def quiet_client_logs() -> None:
    """Keep pyspark's client-side error logs out of notebooks and terminals, unless verbose.

    The gRPC logger is off unless ``SPARK_CONNECT_LOG_LEVEL`` is set, but a ``logging.dictConfig``
    that keeps existing loggers (MLflow's, at its import) turns it back on, and every refused call
    then printed kilobytes of JSON to stderr (a table's first read, a column typo). A filter on each
    logger holds whatever configures them later; ``UC_JUPYTER_VERBOSE=1`` (or ``%config
    UCMagics.verbose = True``) shows them again. Idempotent; :func:`get_spark` calls it.

    gRPC's own C-level lines (``fork_posix.cc:71] Other threads are currently calling into gRPC,
    skipping fork() handlers`` at each DataLoader worker's fork) are INFO: ``GRPC_VERBOSITY`` is set
    to ``ERROR`` unless it is set already or verbose, before gRPC is first imported (it reads it then).
    """
    if not verbose():
        os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    from pyspark.logger import PySparkLogger

    for name in _CLIENT_LOGGERS:
        logger = PySparkLogger.getLogger(name)  # of pyspark's class: its calls pass keywords a plain logger refuses
        if not any(isinstance(kept, _UnlessVerbose) for kept in logger.filters):
            logger.addFilter(_UnlessVerbose())


def _connect(url: str, *, local: bool, timeout: float) -> SparkSession:
    """A session to ``url``. A remote server must accept a connection, then answer, each within
    ``timeout`` seconds (pyspark's own retries wait up to 10 minutes, and a call on a silent address
    never returns): refused or unresolvable at once, silent after ``timeout``."""
    from pyspark.sql.connect.client import DefaultChannelBuilder
    from pyspark.sql.connect.client.retries import DefaultPolicy
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    if not local:
        _accepts(url, timeout)
    # What SparkSession.builder.remote() sets: pyspark.sql.functions and friends then take the
    # Spark Connect path (the builder below, which takes channel options, does not set it).
    os.environ["SPARK_CONNECT_MODE_ENABLED"] = "1"
    options = [("grpc.client_idle_timeout_ms", _CHANNEL_IDLE_MS)] if local else None
    session: Any = ConnectSession.builder.channelBuilder(DefaultChannelBuilder(url, channelOptions=options)).create()
    if local:
        session.client.set_retry_policies([DefaultPolicy(**_LOCAL_RETRIES)])
    else:
        session.client.set_retry_policies([DefaultPolicy(**_remote_retries(timeout))])
        _answers(session, timeout)
    _bound_exit(session.client)
    # Queries that take a while show the project's progress line (a .show(), a toPandas(), a first query).
    session.registerProgressHandler(QueryProgress())
    return session  # type: ignore[no-any-return]


def _accepts(url: str, timeout: float) -> None:
    """ConnectionError in one line unless something accepts a TCP connection at ``url`` within ``timeout``."""
    reason = unreachable(*_endpoint(url), timeout)
    if reason is not None:
        bound = " (UC_JUPYTER_SPARK_CONNECT_TIMEOUT)" if reason.startswith("no answer within") else ""
        raise ConnectionError(f"{reason}{bound}; check UC_JUPYTER_SPARK_REMOTE and that the server runs")


def _answers(session: Any, timeout: float) -> None:
    """ConnectionError unless the server answers a first call (its version) within ``timeout``: a
    port that accepts but never speaks Spark Connect must not hold the notebook. The call left
    waiting ends with its channel, which is closed."""
    answered: list[BaseException | None] = []
    thread = threading.Thread(target=_ask_version, args=(session, answered), name="uc_jupyter-spark-probe", daemon=True)
    thread.start()
    thread.join(timeout)
    if not answered:
        _abandon(session)
        raise ConnectionError(
            f"it accepted a connection but did not answer within {timeout:g} s (UC_JUPYTER_SPARK_CONNECT_TIMEOUT); "
            "is it a Spark Connect server?"
        )
    if answered[0] is not None:
        _abandon(session)
        raise ConnectionError(first_line(answered[0])) from answered[0]


def _abandon(session: Any) -> None:
    """Close a session that never answered, at once: its channel, which ends the call left waiting
    (``session.stop()`` would hold pyspark's session lock, and the next session's creation with it,
    until that call gave up)."""
    with contextlib.suppress(Exception):
        session.client.set_retry_policies([])
    with contextlib.suppress(Exception):
        session.client.close()


def _ask_version(session: Any, answered: list[BaseException | None]) -> None:
    try:
        _ = session.version
    except BaseException as exc:  # reported by the waiting caller
        answered.append(exc)
    else:
        answered.append(None)


def _endpoint(url: str) -> tuple[str, int]:
    """(host, port) of ``sc://host:port[/;params]`` (Spark Connect's default port 15002)."""
    rest = url.removeprefix("sc://").split("/", 1)[0].split(";", 1)[0]
    host, colon, port = rest.rpartition(":")
    if not colon or not port.isdigit():
        return rest, 15002
    return host, int(port)


def _remote_retries(timeout: float) -> dict[str, Any]:
    """pyspark's retry policy, bounded: its backoffs add up to about ``timeout`` (not 10 minutes)."""
    most = max(100, int(timeout * 1000 / 4))
    return {"max_retries": 4, "initial_backoff": min(250, most), "backoff_multiplier": 2.0, "max_backoff": most}


def _bound_exit(client: Any) -> None:
    """Run pyspark's exit clean-up for ``client`` first, with one attempt and a time bound.

    atexit runs hooks last-registered first; pyspark registered its own when ``client`` was made,
    just before this, so ours runs first and leaves the client closed, which pyspark's hook skips.
    """

    def on_exit() -> None:
        if client.is_closed:
            return
        with contextlib.suppress(Exception):
            client.set_retry_policies([])  # best-effort clean-up: a dead server gets one attempt
        cleanup = getattr(client, "_on_exit", None)
        if cleanup is not None:
            _run_bounded(cleanup, EXIT_CLEANUP_TIMEOUT_S)
        with contextlib.suppress(Exception):
            client.close()  # cancels a clean-up call still waiting on a server that does not answer

    atexit.register(on_exit)


def _run_bounded(call: Callable[[], object], timeout: float) -> None:
    try:
        worker = threading.Thread(target=call, name="uc-jupyter-spark-exit", daemon=True)
        worker.start()
    except RuntimeError:  # Python >= 3.12 refuses new threads at exit: no retries are left, run it here
        with contextlib.suppress(Exception):
            call()
        return
    worker.join(timeout)


def _close(session: Any) -> None:
    """Close a session without waiting on a server that may be gone (no retries, no release)."""
    with contextlib.suppress(Exception):
        session.client.set_retry_policies([])
    with contextlib.suppress(Exception):
        session.stop()
