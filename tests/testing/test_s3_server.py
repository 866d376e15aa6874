"""uc_jupyter.testing.s3_server: its shaping and counters seen through real requests to the server
process on 127.0.0.1 (no test here times a request)."""

from __future__ import annotations

import hashlib
import http.client
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.processes import alive
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.scripts import run_python
from uc_jupyter.testing.small_files import write_small_files
from uc_jupyter.testing.waits import wait_until


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3"), latency=0.001, latency_sigma=0.6, seed=3) as running:
        bucket = running.bucket("data")
        for i in range(4):
            (bucket / f"f{i}.png").write_bytes(bytes([i]) * (10_000 * (i + 1)))
        yield running


@pytest.fixture
def fresh(server: S3TestServer) -> Iterator[S3TestServer]:
    """The module's server with its counters reset and its settings put back afterwards."""
    before = {name: value for name, value in server.stats().items() if name in _SETTINGS}
    server.reset()
    yield server
    server.configure(**before)


_SETTINGS = (
    "latency",
    "latency_sigma",
    "bandwidth",
    "connection_bandwidth",
    "max_in_flight",
    "fail_first",
    "fail_rate",
    "reset_rate",
)


def _get(server: S3TestServer, key: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(f"{server.endpoint}/data/{key}", timeout=60) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_settings_from_the_constructor_show_in_the_stats(server: S3TestServer) -> None:
    stats = server.stats()
    assert (stats["latency"], stats["latency_sigma"]) == (0.001, 0.6)
    assert (stats["bandwidth"], stats["connection_bandwidth"], stats["max_in_flight"]) == (0, 0, 0)
    assert server.cpu_seconds() > 0  # it has started, imported aiohttp and answered


@pytest.mark.parametrize("cap", ["bandwidth", "connection_bandwidth"])
def test_a_bandwidth_cap_delays_each_answer_by_its_size(fresh: S3TestServer, cap: str) -> None:
    fresh.configure(**{cap: 1e6})
    sizes = []
    for i in range(4):  # one after another: the link and each connection idle when an answer starts
        status, body = _get(fresh, f"f{i}.png")
        assert status == 200
        sizes.append(len(body))
    stats = fresh.stats()
    assert stats["bytes_sent"] == sum(sizes) == 100_000
    assert stats["delayed_seconds"] == pytest.approx(sum(sizes) / 1e6)
    assert stats["gets"] == {f"f{i}.png": 1 for i in range(4)}
    fresh.reset()
    assert fresh.stats()["delayed_seconds"] == 0.0


def test_in_flight_is_counted_and_requests_beyond_the_limit_are_refused(fresh: S3TestServer) -> None:
    fresh.configure(latency=4.0, latency_sigma=0.0, max_in_flight=3)  # long enough to see all three waiting
    results: list[int] = []
    threads = [threading.Thread(target=lambda: results.append(_get(fresh, "f0.png")[0])) for _ in range(3)]
    for thread in threads:
        thread.start()
    wait_until(lambda: fresh.stats()["in_flight"]["now"] == 3, "three requests in flight at the server", 30)
    status, body = _get(fresh, "f1.png")  # a fourth: refused at once
    for thread in threads:
        thread.join()
    assert (status, results) == (503, [200, 200, 200])
    assert b"<Code>SlowDown</Code>" in body
    stats = fresh.stats()
    assert stats["refused"] == 1
    assert stats["gets"] == {"f0.png": 3}
    assert (stats["in_flight"]["now"], stats["in_flight"]["peak"]) == (0, 3)
    assert 0 < stats["in_flight"]["mean"] <= stats["in_flight"]["busy_mean"] <= 3
    assert stats["in_flight"]["busy_mean"] > 2  # three at once for nearly all of the busy time
    fresh.reset()
    assert (fresh.stats()["in_flight"]["peak"], fresh.stats()["refused"]) == (0, 0)


def test_an_unknown_or_negative_setting_is_refused_and_nothing_applied(server: S3TestServer) -> None:
    request = urllib.request.Request(f"{server.endpoint}/_control/config", data=json.dumps({"latncy": 1}).encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 400
    assert "unknown settings ['latncy']" in json.loads(refused.value.read())["error"]
    request = urllib.request.Request(f"{server.endpoint}/_control/config", data=json.dumps({"latency": -1}).encode())
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert "invalid settings ['latency']: give numbers >= 0" in json.loads(refused.value.read())["error"]
    assert server.stats()["latency"] == 0.001  # nothing applied


@pytest.mark.servers  # starts an S3 test server of its own
def test_a_server_that_requires_a_key_refuses_requests_without_it(tmp_path: Path) -> None:
    import boto3
    import botocore.exceptions

    with S3TestServer(tmp_path, require_key="the-key") as keyed:
        (keyed.bucket("data") / "f.png").write_bytes(b"png")

        def client(key: str) -> Any:
            return boto3.client(
                "s3",
                endpoint_url=keyed.endpoint,
                aws_access_key_id=key,
                aws_secret_access_key="anything",  # the signature is not checked, only whose key it is
                region_name="us-east-1",
            )

        assert client("the-key").get_object(Bucket="data", Key="f.png")["Body"].read() == b"png"
        with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
            client("another-key").get_object(Bucket="data", Key="f.png")
        with pytest.raises(botocore.exceptions.ClientError, match="AccessDenied"):
            client("the-keyX").get_object(Bucket="data", Key="f.png")  # a key that only starts the same
        assert _get(keyed, "f.png")[0] == 403  # unsigned
        stats = keyed.stats()
        assert stats["requests"]["refused unsigned"] == 3
        assert stats["clients"] == {"Boto3": 3, "Python-urllib": 1}  # which library asked, refused or not


def test_a_script_that_never_stops_its_server_does_not_leave_it_running(tmp_path: Path) -> None:
    """Before: the server outlived the script that started it (a notebook's, a benchmark's)."""
    script = (
        "import json, sys\n"
        "from uc_jupyter.testing.s3_server import S3TestServer\n"
        "server = S3TestServer(sys.argv[1]).start()\n"
        "print(json.dumps(server.process.pid))\n"  # and exit without server.stop()
    )
    pid, _ = run_python(script, str(tmp_path / "buckets"))
    wait_until(lambda: not alive(pid), "the abandoned S3 test server to exit", 20)


def test_a_fail_rate_answers_about_that_fraction_of_gets_503_and_counts_them(fresh: S3TestServer) -> None:
    fresh.configure(latency=0.0, fail_rate=0.2)
    statuses = [_get(fresh, f"f{i % 4}.png")[0] for i in range(400)]
    failed = statuses.count(503)
    assert set(statuses) == {200, 503}
    assert 40 <= failed <= 120  # binomial(400, 0.2): mean 80, standard deviation 8
    assert fresh.stats()["faults"] == {"503": failed, "reset": 0}
    fresh.reset()
    assert fresh.stats()["faults"] == {"503": 0, "reset": 0}
    fresh.configure(fail_rate=0.0)
    assert {_get(fresh, "f0.png")[0] for _ in range(50)} == {200}


def test_a_reset_rate_cuts_the_answer_short_and_the_client_sees_a_connection_error(fresh: S3TestServer) -> None:
    fresh.configure(reset_rate=1.0)
    with pytest.raises((http.client.IncompleteRead, ConnectionError)):
        _get(fresh, "f3.png")  # 40,000 bytes: the headers and 20,000 of them arrive, then RST
    assert fresh.stats()["faults"] == {"503": 0, "reset": 1}
    fresh.configure(reset_rate=0.0)
    assert _get(fresh, "f3.png") == (200, bytes([3]) * 40_000)


def test_rates_that_add_up_to_more_than_every_get_are_refused(server: S3TestServer) -> None:
    request = urllib.request.Request(
        f"{server.endpoint}/_control/config", data=json.dumps({"fail_rate": 0.7, "reset_rate": 0.5}).encode()
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert "together at most 1, not 1.2" in json.loads(refused.value.read())["error"]
    assert (server.stats()["fail_rate"], server.stats()["reset_rate"]) == (0.0, 0.0)


@pytest.mark.in_a_fork  # reads in this process: object_store
def test_volume_reads_deliver_every_byte_through_random_503s_and_resets(
    s3: S3TestServer, s3_volume: Any, tmp_path: Path
) -> None:
    from uc_jupyter.data import UCVolumeDataset

    path, folder = s3_volume()
    relatives, _ = write_small_files(folder, 200, seed=5)
    wanted = sorted(hashlib.sha256((folder / relative).read_bytes()).hexdigest() for relative in relatives)
    s3.configure(fail_rate=0.05, reset_rate=0.05)
    dataset = UCVolumeDataset(path, recursive=True, cache_dir=str(tmp_path / "cache"))
    delivered = sorted(hashlib.sha256(Path(local).read_bytes()).hexdigest() for local in dataset)
    faults = s3.stats()["faults"]
    assert delivered == wanted
    assert faults["503"] > 0 and faults["reset"] > 0  # binomial(200+, 0.05) each: 0 has odds below 1e-4
