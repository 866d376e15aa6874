"""The idle watchdog: its decision on an injected clock, its connection count on real sockets, and its
loop against a real listening process that it stops (the real Spark server: test_spark_server.py)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.processes import alive, client_connections, free_port, listening
from uc_jupyter.tables.spark_watchdog import IdleWatch, watch
from uc_jupyter.testing.waits import wait_until


def test_idle_time_counts_from_the_last_client_or_hand_out() -> None:
    idle = IdleWatch(timeout_s=60.0, idle_since=0.0)
    idle.observe(now=10.0, clients=2)
    assert idle.idle_for(10.0) == 0.0
    idle.observe(now=40.0, clients=0)
    assert (idle.idle_for(40.0), idle.due(69.0), idle.due(70.0)) == (30.0, False, True)
    idle.observe(now=75.0, clients=0, used_at=72.0)  # handed out at 72 s: on its way to connect
    assert (idle.idle_for(75.0), idle.due(131.0), idle.due(132.0)) == (3.0, False, True)
    idle.observe(now=80.0, clients=None, used_at=50.0)  # an older stamp and no count change nothing
    assert idle.idle_for(80.0) == 8.0
    idle.observe(now=90.0, clients=0, used_at=500.0)  # a stamp from the future counts as now
    assert idle.idle_for(95.0) == 5.0


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield server
    server.close()


def test_connections_are_counted_at_the_servers_port(listener: socket.socket) -> None:
    port = listener.getsockname()[1]
    assert (client_connections(port), listening(port), listening(free_port())) == (0, True, False)
    clients = [socket.create_connection(("127.0.0.1", port)) for _ in range(2)]
    accepted = [listener.accept()[0] for _ in clients]
    assert client_connections(port) == 2  # each connection once, at the server's end
    for sock in clients + accepted:
        sock.close()
    assert client_connections(port) == 0


def test_without_proc_the_count_is_unknown(tmp_path: Path) -> None:
    assert client_connections(15002, proc_net=tmp_path) is None
    assert listening(15002, proc_net=tmp_path) is None


@pytest.fixture
def fake_server(tmp_path: Path) -> Iterator[tuple[Path, int, subprocess.Popen[bytes]]]:
    """A real process listening on a port, recorded in a spark folder as the local server."""
    port = free_port()
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            f"import socket,time; s=socket.socket(); s.bind(('127.0.0.1',{port})); s.listen(); time.sleep(600)",
        ]
    )

    def answers() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            assert process.poll() is None, f"the fake server exited with {process.returncode}"
            return False
        return True

    wait_until(answers, f"the fake server to listen on port {port}", 10, interval_s=0.02)
    folder = tmp_path / "spark"
    (folder / "logs").mkdir(parents=True)
    record = {"port": port, "pid": process.pid, "log_dir": str(folder / "logs"), "idle_timeout_s": 60.0}
    (folder / "server.json").write_text(json.dumps(record))
    yield folder, port, process
    process.kill()
    process.wait()


def test_the_watch_stops_the_server_once_idle_for_the_timeout(
    fake_server: tuple[Path, int, subprocess.Popen[bytes]],
) -> None:
    folder, port, process = fake_server
    now = [1000.0]
    seen = iter([1, 1, 0, 0, 1, 0])  # in use, gone, back, gone for good

    def sleep(seconds: float) -> None:
        now[0] += 20.0

    why = watch(
        folder,
        port,
        process.pid,
        60.0,
        clock=lambda: now[0],
        sleep=sleep,
        connections=lambda _port: next(seen, 0),
    )
    assert why == "stopped the server after 60 s without clients"
    # Last seen in use at 1000 + 4 looks * 20 s: idle from then for 60 s, three more looks.
    assert now[0] == 1000.0 + 7 * 20.0
    assert process.wait(timeout=30) is not None
    assert not (folder / "server.json").exists()
    status = json.loads((folder / "watchdog.json").read_text())
    assert (status["clients"], status["idle_since"]) == (0, 1080.0)


def test_the_watch_ends_when_the_server_is_gone_or_replaced(
    fake_server: tuple[Path, int, subprocess.Popen[bytes]],
) -> None:
    folder, port, process = fake_server
    record = json.loads((folder / "server.json").read_text())
    (folder / "server.json").write_text(json.dumps({**record, "pid": process.pid + 100000}))
    assert watch(folder, port, process.pid, 60.0, sleep=lambda _s: None) == "the server is gone"
    assert alive(process.pid)  # a newer server is never the old watchdog's to stop
