"""The real local Spark Connect server with a short idle timeout: in use it stays, idle it stops itself,
and ``uc-jupyter spark status`` says which."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from uc_jupyter.processes import alive
from uc_jupyter.tables.spark_server import (
    DEFAULT_IDLE_TIMEOUT_S,
    idle_timeout_from_env,
    local_server,
    parse_duration,
    running_server,
    server_status,
    stop_server,
)
from uc_jupyter.testing.waits import wait_until

IDLE_S = 5.0
SPARK_WAIT_S = 120.0  # a JVM starting or stopping on a busy 2-core machine: generous, never a measure
CHILD = """
import sys
from uc_jupyter.tables import get_spark
print(get_spark(progress=lambda _line: None).range(4).count(), flush=True)
sys.stdin.readline()
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    path = tmp_path / "home"
    monkeypatch.setenv("UC_JUPYTER_HOME", str(path))
    monkeypatch.setenv("UC_JUPYTER_SPARK_IDLE_TIMEOUT", f"{IDLE_S:g}s")
    yield path
    stop_server()


def _status_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", *args, "spark", "status"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


@pytest.mark.servers  # starts a Spark Connect server
def test_the_server_stays_while_a_client_is_connected_and_stops_itself_once_idle(home: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-W", "ignore", "-c", CHILD],
        env=os.environ.copy(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # The child starts the server itself: it connects right after its start, well within IDLE_S.
        assert child.stdout is not None and child.stdout.readline().strip() == "4"
        server = running_server()
        assert server is not None and server.idle_timeout_s == IDLE_S and server.watchdog_pid is not None
        in_use = wait_until(
            lambda: (s := server_status()) is not None and s.clients and s,
            "the client being seen",
            SPARK_WAIT_S,
            interval_s=0.1,
        )
        assert in_use.idle_s == 0.0 and in_use.stops_in_s == IDLE_S
        # Past the idle timeout the watchdog still sees the client, and the server stays.
        first_look = json.loads((home / "spark" / "watchdog.json").read_text())["checked_at"]

        def looked_past_timeout() -> bool:
            seen = json.loads((home / "spark" / "watchdog.json").read_text())
            return bool(seen["checked_at"] > first_look + IDLE_S + 1)

        wait_until(looked_past_timeout, "a look past the idle timeout", SPARK_WAIT_S, interval_s=0.1)
        assert running_server() == server
        status = _status_cli()
        assert status.stdout.splitlines()[:3] == [
            f"running\t{server.url}\tpid {server.pid}",
            "clients\t1 connected",
            f"stops\tafter {IDLE_S:.0f} s without clients (in {IDLE_S:.0f} s if none connect)",
        ]
    finally:
        child.communicate("\n", timeout=60)
    assert child.returncode == 0

    wait_until(lambda: running_server() is None, "the idle stop", SPARK_WAIT_S, interval_s=0.1)
    wait_until(lambda: not alive(server.pid), "the JVM's exit", SPARK_WAIT_S, interval_s=0.1)
    wait_until(lambda: not alive(server.watchdog_pid or 0), "the watchdog's exit", SPARK_WAIT_S, interval_s=0.1)
    log = (home / "spark" / "logs" / "watchdog.log").read_text()
    assert f"stop after {IDLE_S} s idle" in log
    assert "stopped the server after" in log and "s without clients" in log
    assert json.loads(_status_cli("--json").stdout) == {"running": False}


@pytest.mark.servers  # starts a Spark Connect server
def test_status_shows_an_idle_server_and_the_cli_sets_the_timeout(home: Path) -> None:
    started = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "--json", "spark", "start", "--idle-timeout", "2h"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    document = json.loads(started.stdout)
    assert document["running"] is True and document["idle_timeout_s"] == 7200.0
    assert document["clients"] in (0, None)  # None until the watchdog's first look
    assert document["watchdog_running"] is True
    status = wait_until(
        lambda: (s := server_status()) is not None and s.clients == 0 and s.idle_s >= 1 and s,
        "idling",
        SPARK_WAIT_S,
        interval_s=0.1,
    )
    assert 0 < status.stops_in_s < 7200
    lines = _status_cli().stdout.splitlines()
    assert lines[1].startswith("clients\tnone connected, idle for ")
    assert lines[2].startswith("stops\tafter 2 h without clients (in 1 h 59 min")
    again = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.cli", "--json", "spark", "start", "--idle-timeout", "5m"],
        env=os.environ.copy(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert json.loads(again.stdout)["pid"] == document["pid"]  # the running one, as it was
    assert json.loads(again.stdout)["idle_timeout_s"] == 7200.0
    assert "keeps its idle timeout; run uc-jupyter spark stop first" in again.stderr
    assert stop_server() is not None
    assert server_status() is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90", 90.0), ("90s", 90.0), ("30m", 1800.0), ("1.5h", 5400.0), ("2 min", 120.0), ("never", None), ("0", None)],
)
def test_idle_timeouts_are_read_as_written(text: str, seconds: float | None) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["soon", "-5m", "5d", "0.0"])
def test_a_bad_idle_timeout_is_one_line_naming_the_setting(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UC_JUPYTER_SPARK_IDLE_TIMEOUT", text)
    with pytest.raises(ValueError, match=f"UC_JUPYTER_SPARK_IDLE_TIMEOUT: invalid idle timeout '{text}'") as caught:
        idle_timeout_from_env()
    assert "\n" not in str(caught.value)
    monkeypatch.delenv("UC_JUPYTER_SPARK_IDLE_TIMEOUT")
    assert idle_timeout_from_env() == DEFAULT_IDLE_TIMEOUT_S == 1800.0


def _jvms(home: Path) -> list[int]:
    """The processes whose command line names this home's Spark warehouse (its server's JVM)."""
    marker = str(home / "spark" / "warehouse").encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes() and alive(int(entry.name)):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


@pytest.mark.servers  # starts a Spark Connect server (its JVM) before the failure
def test_a_start_that_fails_halfway_leaves_no_server_behind(home: Path) -> None:
    class Broken:
        """An output that fails when the start is over (as a closed notebook output might)."""

        def show(self, text: str) -> None:
            pass

        def finish(self, text: str) -> None:
            raise OSError("the output went away")

    with pytest.raises(OSError, match="the output went away"):
        local_server(progress=Broken())
    wait_until(lambda: not _jvms(home), "the half-started JVM's end", SPARK_WAIT_S, interval_s=0.1)
    assert running_server() is None
