"""The Spark Connect session: a remote server when configured, else one local server per machine.

``get_spark()`` connects to ``UC_JUPYTER_SPARK_REMOTE`` (``sc://host:port``) when it is set.
Otherwise it starts, once, a Spark Connect server from the installed pyspark, bound to 127.0.0.1 on
a free port, with its state, pid and log under ``$UC_JUPYTER_HOME/spark``; later kernels reuse it,
and ``uc-jupyter spark stop`` (or :func:`stop_local_server`) stops it.

Example:
    >>> from uc_jupyter.tables.spark import get_spark
    >>> spark = get_spark()          # doctest: +SKIP
    starting a local Spark Connect server on 127.0.0.1:40123 (log: ~/.uc_jupyter/spark/logs) ...
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from uc_jupyter.config import settings
from uc_jupyter.processes import alive, free_port

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["LocalServer", "SparkUnavailable", "get_spark", "local_server", "running_server", "stop_local_server"]

_START_TIMEOUT_S = 180.0
_sessions: dict[str, SparkSession] = {}  # sessions made here, by URL, stopped with their server


class SparkUnavailable(ConnectionError):
    """No Spark Connect server could be reached or started; the message says what to do."""


@dataclass(frozen=True)
class LocalServer:
    port: int
    pid: int
    log_dir: str

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


def get_spark(progress: Callable[[str], object] = print) -> SparkSession:
    """A Spark Connect session: to ``UC_JUPYTER_SPARK_REMOTE``, or to the local server (started
    when needed; ``progress`` gets one line while it starts, which takes seconds)."""
    # PySpark 4.3 warns on every session that pandas >= 3 is untested; everything we use works
    # (shared/ENVIRONMENT.md), so that one warning is silenced rather than repeated to users.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
    from pyspark.sql import SparkSession

    remote = settings().spark_remote or local_server(progress=progress).url
    try:
        session = SparkSession.builder.remote(remote).getOrCreate()
    except Exception as exc:
        raise SparkUnavailable(f"cannot reach Spark Connect at {remote}: {exc}") from exc
    _sessions[remote] = session
    return session


def local_server(progress: Callable[[str], object] = print) -> LocalServer:
    """The running local server, started first when there is none (one per ``UC_JUPYTER_HOME``)."""
    folder = _folder()
    with _locked(folder / "start.lock"):
        running = _running(folder)
        if running is not None:
            return running
        java = shutil.which("java", path=_java_path())
        if java is None:
            raise SparkUnavailable(
                "Java is needed for the local Spark Connect server: install Java 17 "
                "(apt-get install -y openjdk-17-jre-headless) or set UC_JUPYTER_SPARK_REMOTE=sc://host:port"
            )
        port = free_port()
        log_dir = folder / "logs"
        progress(f"starting a local Spark Connect server on 127.0.0.1:{port} (log: {log_dir}) ...")
        subprocess.run(
            [str(_spark_home() / "sbin" / "start-connect-server.sh"), *_server_args(port, folder)],
            env=_server_env(folder, port),
            check=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
        )
        pid = _wait_for(port, folder)
        server = LocalServer(port=port, pid=pid, log_dir=str(log_dir))
        (folder / "server.json").write_text(json.dumps(asdict(server)))
        return server


def running_server() -> LocalServer | None:
    """The local server of this ``UC_JUPYTER_HOME`` when it runs, without starting one."""
    return _running(_folder())


def stop_local_server(timeout: float = 60.0) -> bool:
    """Stop the local server; False when none was running."""
    folder = _folder()
    with _locked(folder / "start.lock"):
        running = _running(folder)
        (folder / "server.json").unlink(missing_ok=True)
        if running is None:
            return False
        session = _sessions.pop(running.url, None)
        if session is not None:
            # pyspark's exit hook would otherwise retry a dead server for minutes before exiting.
            with contextlib.suppress(Exception):
                session.stop()
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, 15)
        deadline = time.monotonic() + timeout
        while alive(running.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if alive(running.pid):
            os.kill(running.pid, 9)
        return True


def _server_args(port: int, folder: Path) -> list[str]:
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        # Tables made in the session catalog go here, not into whatever folder the first kernel ran in.
        "spark.sql.warehouse.dir": str(folder / "warehouse"),
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
    }
    args = ["--master", "local[2]"]
    for key, value in confs.items():
        args += ["--conf", f"{key}={value}"]
    return args


def _server_env(folder: Path, port: int) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_HOME": str(_spark_home()),
            "SPARK_LOG_DIR": str(folder / "logs"),
            "SPARK_PID_DIR": str(folder / "run"),
            "SPARK_IDENT_STRING": f"uc-jupyter-{port}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            # The server's Python workers must import uc_jupyter (the Delta data source): same venv.
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
            "PATH": _java_path(),
        }
    )
    return env


def _wait_for(port: int, folder: Path) -> int:
    deadline = time.monotonic() + _START_TIMEOUT_S
    pid_files = list((folder / "run").glob("*.pid"))
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
            pid_files = sorted((folder / "run").glob(f"*uc-jupyter-{port}*.pid"))
            if pid_files:
                return int(pid_files[-1].read_text().strip())
        time.sleep(0.25)
    raise SparkUnavailable(
        f"the local Spark Connect server did not open port {port} within {_START_TIMEOUT_S:.0f} s; "
        f"see the log in {folder / 'logs'} ({len(pid_files)} pid files)"
    )


def _running(folder: Path) -> LocalServer | None:
    try:
        server = LocalServer(**json.loads((folder / "server.json").read_text()))
    except (FileNotFoundError, ValueError, TypeError):
        return None
    if not alive(server.pid):
        return None
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=2):
        return server
    return None


def _folder() -> Path:
    folder = settings().home / "spark"
    for sub in ("logs", "run"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return folder


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _java_path() -> str:
    path = os.environ.get("PATH", "")
    java_home = os.environ.get("JAVA_HOME")
    return f"{java_home}/bin:{path}" if java_home else path


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
