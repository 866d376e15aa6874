"""The idle watchdog beside the local Spark Connect server: it stops the server nobody uses.

Idle means no client connection: the watchdog counts the established TCP connections to the
server's port (``/proc/net/tcp``, ``/proc/net/tcp6``), so every client counts, ours or not, and a
running query always holds one. Our sessions let their gRPC channel drop its connection after a
minute without calls (:mod:`uc_jupyter.tables.spark`), so an open kernel that no longer uses Spark
stops counting soon after its last call, and reconnects on its next one. Each hand-out of the server
(``local_server()``) touches ``spark/used``, which counts as use too: a kernel on its way to
connecting is never stopped under it. Once the server has been idle for the timeout, the watchdog
takes the start lock, looks once more, and stops the server; it exits when the server is gone
however it went. What it last saw is in ``spark/watchdog.json`` (``uc-jupyter spark status``).

Where ``/proc`` is missing (macOS), only the hand-outs count as use.

Example:
    >>> watch = IdleWatch(timeout_s=60.0, idle_since=0.0)
    >>> watch.observe(now=30.0, clients=1)       # in use: the idle time starts again
    >>> watch.observe(now=80.0, clients=0)
    >>> watch.idle_for(80.0), watch.due(80.0), watch.due(95.0)
    (50.0, False, True)
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from uc_jupyter.processes import alive, client_connections

__all__ = ["IdleWatch", "main", "watch"]


@dataclass
class IdleWatch:
    """The pure decision: idle since the last moment the server was seen in use, due to stop once
    idle for ``timeout_s``. Times are on one clock (the watchdog uses wall time, as file stamps do)."""

    timeout_s: float
    idle_since: float

    def observe(self, now: float, clients: int | None, used_at: float | None = None) -> None:
        """Record one look: ``clients`` connected now (None: cannot tell), last hand-out ``used_at``."""
        if clients:
            self.idle_since = now
        if used_at is not None and used_at > self.idle_since:
            self.idle_since = min(used_at, now)

    def idle_for(self, now: float) -> float:
        return max(0.0, now - self.idle_since)

    def due(self, now: float) -> bool:
        return self.idle_for(now) >= self.timeout_s


def watch(
    folder: Path,
    port: int,
    pid: int,
    timeout_s: float,
    *,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], object] = time.sleep,
    connections: Callable[[int], int | None] = client_connections,
) -> str:
    """Watch the server until it is gone or idle-stopped; returns why the watch ended."""
    from uc_jupyter.tables.spark_server import start_lock, stop_locked

    poll = min(5.0, max(0.2, timeout_s / 10))
    with start_lock(folder):  # the starter holds it until it has recorded the server (and us)
        idle = IdleWatch(timeout_s, idle_since=clock())
    while True:
        if not _ours(folder, pid):
            return "the server is gone"
        clients = connections(port)
        idle.observe(clock(), clients, _used_at(folder))
        _report(folder, idle, clients, clock())
        if idle.due(clock()):
            with start_lock(folder):
                clients = connections(port)
                idle.observe(clock(), clients, _used_at(folder))
                if idle.due(clock()) and _ours(folder, pid):
                    stop_locked(folder, watchdog=False)
                    return f"stopped the server after {idle.idle_for(clock()):.0f} s without clients"
        sleep(poll)


def _ours(folder: Path, pid: int) -> bool:
    """The server we watch still runs and is still the one recorded (not a newer one)."""
    try:
        recorded = json.loads((folder / "server.json").read_text()).get("pid")
    except (OSError, ValueError, AttributeError):
        return False
    return recorded == pid and alive(pid)


def _used_at(folder: Path) -> float | None:
    try:
        return (folder / "used").stat().st_mtime
    except OSError:
        return None


def _report(folder: Path, idle: IdleWatch, clients: int | None, now: float) -> None:
    record = {"pid": os.getpid(), "clients": clients, "idle_since": idle.idle_since, "checked_at": now}
    partial = folder / f".watchdog.json.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        partial.write_text(json.dumps(record))
        partial.replace(folder / "watchdog.json")


def main(argv: list[str] | None = None) -> int:
    """``python -m uc_jupyter.tables.spark_watchdog FOLDER PORT PID TIMEOUT_S``: print the watchdog's
    pid and leave it running on its own (detached from the caller, which may exit at once)."""
    folder_arg, port, pid, timeout_s = argv if argv is not None else sys.argv[1:]
    folder = Path(folder_arg)
    child = os.fork()
    if child:  # the launcher: say who watches, and go (the watchdog is reparented, never a zombie here)
        print(child, flush=True)
        return 0
    os.setsid()
    null = os.open(os.devnull, os.O_RDWR)
    log = os.open(folder / "logs" / "watchdog.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"{started} watching Spark Connect pid {pid} on port {port}: stop after {timeout_s} s idle", flush=True)
    try:
        why = watch(folder, int(port), int(pid), float(timeout_s))
    except Exception as exc:
        why = f"failed: {type(exc).__name__}: {exc}"
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {why}", flush=True)
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
