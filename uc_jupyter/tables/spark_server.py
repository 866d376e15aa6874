"""The local Spark Connect server: one per ``UC_JUPYTER_HOME``, started on first use, stopped when idle.

:func:`local_server` starts, once, a Spark Connect server from the installed pyspark, bound to
127.0.0.1 on a free port, with its state, pid and log under ``$UC_JUPYTER_HOME/spark``; later
kernels reuse it. Beside it runs a watchdog (:mod:`uc_jupyter.tables.spark_watchdog`) that stops it
once no client has been connected for the idle timeout: ``UC_JUPYTER_SPARK_IDLE_TIMEOUT``
(``30m`` by default; ``90s``, ``2h``, a number of seconds, or ``never``), or
``uc-jupyter spark start --idle-timeout``. ``uc-jupyter spark status`` shows it and
``uc-jupyter spark stop`` (or :func:`stop_server`) stops it at once.

Example:
    >>> server = local_server()   # doctest: +SKIP
    starting Spark Connect (first use: about 20 s) ... 6 s
    >>> server_status().idle_timeout_s  # doctest: +SKIP
    1800.0
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from uc_jupyter.config import settings
from uc_jupyter.processes import alive, free_port, listening
from uc_jupyter.progress import ProgressOutput, as_output, format_duration, waiting

__all__ = [
    "DEFAULT_IDLE_TIMEOUT_S",
    "IDLE_TIMEOUT_ENV",
    "LocalServer",
    "ServerStatus",
    "SparkUnavailable",
    "idle_timeout_from_env",
    "local_server",
    "parse_duration",
    "running_server",
    "server_folder",
    "server_status",
    "start_lock",
    "stop_locked",
    "stop_server",
]

IDLE_TIMEOUT_ENV = "UC_JUPYTER_SPARK_IDLE_TIMEOUT"
DEFAULT_IDLE_TIMEOUT_S = 30 * 60.0
_START_TIMEOUT_S = 180.0
_FIRST_START_GUESS_S = 20  # what the first start takes on a laptop; later labels use the last start
_UNITS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600}
_NEVER = ("never", "off", "none", "0")


class SparkUnavailable(ConnectionError):
    """No Spark Connect server could be reached or started; the message says what to do."""


@dataclass(frozen=True)
class LocalServer:
    """A running local server: its port and JVM pid, its log folder, its idle timeout (None: it
    never stops by itself) and the pid of its watchdog."""

    port: int
    pid: int
    log_dir: str
    idle_timeout_s: float | None = None
    watchdog_pid: int | None = None

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"


@dataclass(frozen=True)
class ServerStatus:
    """What ``uc-jupyter spark status`` shows: the server, how many clients are connected, for how
    long it has been idle and when it stops (None: never, or no watchdog runs)."""

    server: LocalServer
    clients: int | None
    idle_s: float
    stops_in_s: float | None
    watchdog_running: bool

    @property
    def idle_timeout_s(self) -> float | None:
        return self.server.idle_timeout_s

    def lines(self) -> list[str]:
        """The status as ``uc-jupyter spark status`` prints it: tab-separated label and value."""
        server = self.server
        if self.clients:
            use = f"{self.clients} connected"
        elif self.clients is None:
            use = "not watched" if not self.watchdog_running else f"idle for {format_duration(self.idle_s)}"
        else:
            use = f"none connected, idle for {format_duration(self.idle_s)}"
        if server.idle_timeout_s is None:
            stops = "never by itself (idle timeout: never; uc-jupyter spark stop stops it)"
        elif not self.watchdog_running:
            stops = f"never by itself: its watchdog (pid {server.watchdog_pid}) is not running"
        else:
            after = format_duration(server.idle_timeout_s)
            stops = f"after {after} without clients (in {format_duration(self.stops_in_s or 0.0)} if none connect)"
        return [
            f"running\t{server.url}\tpid {server.pid}",
            f"clients\t{use}",
            f"stops\t{stops}",
            f"log\t{server.log_dir}",
        ]

    def document(self) -> dict[str, object]:
        """The status as ``uc-jupyter spark status --json`` prints it."""
        server = self.server
        return {
            "running": True,
            "url": server.url,
            "port": server.port,
            "pid": server.pid,
            "log_dir": server.log_dir,
            "clients": self.clients,
            "idle_s": round(self.idle_s, 1),
            "idle_timeout_s": server.idle_timeout_s,
            "stops_in_s": None if self.stops_in_s is None else round(self.stops_in_s, 1),
            "watchdog_pid": server.watchdog_pid,
            "watchdog_running": self.watchdog_running,
        }


def parse_duration(text: str) -> float | None:
    """An idle timeout in seconds from ``90``, ``90s``, ``30m``, ``1.5h``; None for ``never``/``0``.

    Example:
        >>> parse_duration("30m"), parse_duration("90"), parse_duration("never")
        (1800.0, 90.0, None)
    """
    value = text.strip().lower()
    if value in _NEVER:
        return None
    match = re.fullmatch(r"(\d+(?:\.\d+)?)\s*(s|sec|m|min|h)?", value)
    if match is None or float(match.group(1)) <= 0:
        raise ValueError(f"invalid idle timeout {text!r}: give seconds or a number with s, m or h (e.g. 30m), or never")
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def idle_timeout_from_env() -> float | None:
    """The idle timeout ``UC_JUPYTER_SPARK_IDLE_TIMEOUT`` asks for (default 30 minutes)."""
    text = os.environ.get(IDLE_TIMEOUT_ENV)
    if not text:
        return DEFAULT_IDLE_TIMEOUT_S
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ValueError(f"{IDLE_TIMEOUT_ENV}: {exc}") from None


def local_server(
    progress: ProgressOutput | Callable[[str], object] | None = None,
    *,
    idle_timeout_s: float | str | None = "env",
) -> LocalServer:
    """The running local server, started first when there is none (one per ``UC_JUPYTER_HOME``).

    A start shows its progress on ``progress`` (default: a widget in a kernel, a rewritten line on a
    terminal; a function gets each line). ``idle_timeout_s`` applies to a server started now:
    seconds, None (never stop), or ``"env"`` for ``UC_JUPYTER_SPARK_IDLE_TIMEOUT`` (default 30 min).
    """
    timeout = idle_timeout_from_env() if idle_timeout_s == "env" else idle_timeout_s
    if isinstance(timeout, str):
        raise TypeError(f"invalid idle_timeout_s {timeout!r}: give seconds, None or 'env'")
    folder = server_folder()
    with start_lock(folder):
        running = _running(folder)
        if running is None:
            running = _start(folder, timeout, as_output(progress))
        # A handed-out server counts as used now: the watchdog will not stop it while this caller
        # is still on its way to connecting.
        _stamp(folder / "used")
        return running


def _stamp(path: Path) -> None:
    """Set ``path``'s modification time to now, creating it (0600); a symlink there is refused, not
    followed, so the stamp never touches another file."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        os.utime(descriptor)
    finally:
        os.close(descriptor)


def running_server() -> LocalServer | None:
    """The local server of this ``UC_JUPYTER_HOME`` when it runs, without starting one."""
    return _running(server_folder())


def server_status() -> ServerStatus | None:
    """The running local server with what its watchdog last saw; None when none runs."""
    folder = server_folder()
    server = _running(folder)
    if server is None:
        return None
    watchdog_running = server.watchdog_pid is not None and alive(server.watchdog_pid)
    try:
        seen = json.loads((folder / "watchdog.json").read_text())
        if seen["pid"] != server.watchdog_pid:
            raise ValueError("written by the watchdog of an earlier server")
        clients = None if seen["clients"] is None else int(seen["clients"])
        idle_since = float(seen["idle_since"])
    except (OSError, ValueError, KeyError, TypeError):  # not looked yet (or cannot count: macOS)
        clients, idle_since = None, time.time()
    idle = 0.0 if clients else max(0.0, time.time() - idle_since)
    stops_in = None
    if watchdog_running and server.idle_timeout_s is not None:
        stops_in = max(0.0, server.idle_timeout_s - idle)
    return ServerStatus(server, clients, idle, stops_in, watchdog_running)


def stop_server(timeout: float = 60.0) -> LocalServer | None:
    """Stop the local server and its watchdog; the server that was stopped, or None."""
    folder = server_folder()
    with start_lock(folder):
        return stop_locked(folder, timeout=timeout)


def stop_locked(folder: Path, *, timeout: float = 60.0, watchdog: bool = True) -> LocalServer | None:
    """Stop the server recorded in ``folder`` while holding its start lock (the watchdog's way in)."""
    running = _running(folder)
    (folder / "server.json").unlink(missing_ok=True)
    if running is None:
        return None
    if watchdog and running.watchdog_pid is not None and running.watchdog_pid != os.getpid():
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.watchdog_pid, 15)
    with contextlib.suppress(ProcessLookupError):
        os.kill(running.pid, 15)
    deadline = time.monotonic() + timeout
    while alive(running.pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(running.pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(running.pid, 9)
    return running


def server_folder() -> Path:
    """``$UC_JUPYTER_HOME/spark``: the server's state, pid files and logs."""
    folder = settings().home / "spark"
    for sub in ("logs", "run"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return folder


# ----------------------------------------------------------------------------- starting
def _start(folder: Path, idle_timeout_s: float | None, progress: ProgressOutput | None) -> LocalServer:
    java = shutil.which("java", path=_java_path())
    if java is None:
        raise SparkUnavailable(
            "Java is needed for the local Spark Connect server: install Java 17 "
            "(apt-get install -y openjdk-17-jre-headless) or set UC_JUPYTER_SPARK_REMOTE=sc://host:port"
        )
    port = free_port()
    label = f"starting Spark Connect ({_start_guess(folder)})"
    began = time.monotonic()
    try:
        with waiting(label, output=progress):
            subprocess.run(
                [str(_spark_home() / "sbin" / "start-connect-server.sh"), *_server_args(port, folder)],
                env=_server_env(folder, port),
                check=True,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                # Its own session: a kernel restart (which signals the kernel's process group) must not
                # take down a server other kernels use; the watchdog ends it when it is idle.
                start_new_session=True,
            )
            pid = _wait_for(port, folder)
        _write_atomic(folder / "start_seconds", f"{time.monotonic() - began:.1f}")
        watchdog = _start_watchdog(folder, port, pid, idle_timeout_s)
        server = LocalServer(port, pid, str(folder / "logs"), idle_timeout_s, watchdog)
        _write_atomic(folder / "server.json", json.dumps(asdict(server)))
    except BaseException:  # Ctrl-C included: a server that nobody would ever stop is worse than none
        _kill_started(folder, port)
        raise
    return server


def _kill_started(folder: Path, port: int) -> None:
    for pid_file in (folder / "run").glob(f"*uc-jupyter-{port}*.pid"):
        with contextlib.suppress(OSError, ValueError):
            os.kill(int(pid_file.read_text().strip()), 9)
        pid_file.unlink(missing_ok=True)


def _start_guess(folder: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        return f"about {round(float((folder / 'start_seconds').read_text()))} s"
    return f"first use: about {_FIRST_START_GUESS_S} s"


def _start_watchdog(folder: Path, port: int, pid: int, idle_timeout_s: float | None) -> int | None:
    if idle_timeout_s is None:
        return None
    launcher = subprocess.run(
        [
            sys.executable,
            "-m",
            "uc_jupyter.tables.spark_watchdog",
            str(folder),
            str(port),
            str(pid),
            str(idle_timeout_s),
        ],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if launcher.returncode != 0 or not launcher.stdout.strip().isdigit():
        raise SparkUnavailable(
            f"the Spark Connect server's idle watchdog did not start: {launcher.stderr.strip()[-300:]}; "
            f"set {IDLE_TIMEOUT_ENV}=never to run without it"
        )
    return int(launcher.stdout.strip())


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


# ----------------------------------------------------------------------------- state
def _running(folder: Path) -> LocalServer | None:
    try:
        record = json.loads((folder / "server.json").read_text())
        server = LocalServer(**{f.name: record[f.name] for f in fields(LocalServer) if f.name in record})
    except (FileNotFoundError, ValueError, TypeError, KeyError):
        return None
    if not alive(server.pid):
        return None
    listens = listening(server.port)
    if listens is not None:
        return server if listens else None
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", server.port), timeout=2):
        return server
    return None


def _write_atomic(path: Path, text: str) -> None:
    partial = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    partial.write_text(text)
    partial.replace(path)


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _java_path() -> str:
    path = os.environ.get("PATH", "")
    java_home = os.environ.get("JAVA_HOME")
    return f"{java_home}/bin:{path}" if java_home else path


@contextlib.contextmanager
def start_lock(folder: Path) -> Iterator[None]:
    """The start lock: held to start, hand out or stop the server, so none of these overlap."""
    fd = os.open(folder / "start.lock", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
