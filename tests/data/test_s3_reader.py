"""The lean S3 reader against real servers: the project's S3 test server, moto (which checks SigV4
signatures), and a scripted HTTP server for the wire cases S3 servers rarely produce."""

from __future__ import annotations

import concurrent.futures as cf
import json
import os
import socket
import socketserver
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.data.remote import RetryPolicy, VolumeReadError
from uc_jupyter.data.s3_reader import DownloadCancelled, S3Reader, reader_for
from uc_jupyter.testing.s3_server import S3TestServer

FAST_RETRY = RetryPolicy(attempts=3, base_seconds=0.001)


def fetch(reader: S3Reader, remote: str, local: Path, policy: RetryPolicy = FAST_RETRY, **kwargs: Any) -> None:
    reader.fetch(remote, str(local), volume_path=f"/Volumes/c/s/v/{remote}", policy=policy, **kwargs).result(60)


def lean(options: dict[str, Any]) -> S3Reader:
    reader = reader_for("s3://any/where", options)
    assert reader is not None
    return reader


# ------------------------------------------------------------------ which volumes it reads


def test_it_reads_only_volumes_whose_options_it_implements(s3_server: S3TestServer) -> None:
    options = s3_server.storage_options
    assert reader_for("s3://b/p", options) is not None
    assert reader_for("s3://b/p", options) is reader_for("s3a://b/p", options)  # one per process and endpoint
    assert reader_for("s3://b/p", {"anon": True, "endpoint_url": s3_server.endpoint}) is not None
    assert reader_for("gs://b/p", options) is None
    assert reader_for("s3://b/p", {**options, "endpoint_url": None}) is None  # AWS itself: s3fs picks hosts
    assert reader_for("s3://b/p", {"endpoint_url": s3_server.endpoint}) is None  # botocore's credential chain
    assert reader_for("s3://b/p", {**options, "requester_pays": True}) is None
    assert reader_for("s3://b/p", {**options, "config_kwargs": {"s3": {"addressing_style": "virtual"}}}) is None
    assert reader_for("s3://b/p", {**options, "client_kwargs": {"region_name": "x", "proxies": {}}}) is None


# ------------------------------------------------------------------ the project's S3 server


def test_reads_whole_objects_over_reused_connections(s3: S3TestServer, tmp_path: Path) -> None:
    bucket = s3.bucket("lean")
    contents = {f"dir/f{i}.bin": os.urandom(1000 + i) for i in range(20)}
    contents["dir/odd name+plus%percent é.bin"] = b"odd"
    contents["dir/empty.bin"] = b""
    for key, body in contents.items():
        (bucket / key).parent.mkdir(parents=True, exist_ok=True)
        (bucket / key).write_bytes(body)
    reader = lean(s3.storage_options)
    jobs = [(f"lean/{key}", str(tmp_path / f"{i}.out"), f"/Volumes/c/s/v/{key}") for i, key in enumerate(contents)]
    futures = reader.fetch_many(jobs, policy=FAST_RETRY)
    for future in futures:
        future.result(60)
    assert [Path(local).read_bytes() for _, local, _ in jobs] == list(contents.values())
    assert s3.stats()["requests"] == {"GET": len(contents)}


def test_transient_answers_are_retried_and_permanent_ones_are_not(s3: S3TestServer, tmp_path: Path) -> None:
    (s3.bucket("flaky") / "a.bin").write_bytes(b"a" * 100)
    reader = lean(s3.storage_options)
    retries: list[int] = []
    s3.configure(fail_first=2, fail_status=503)
    fetch(reader, "flaky/a.bin", tmp_path / "a", on_retry=lambda: retries.append(1))
    assert (tmp_path / "a").read_bytes() == b"a" * 100
    assert (len(retries), s3.stats()["gets"]) == (2, {"a.bin": 1})  # two 503s, then the answer
    with pytest.raises(VolumeReadError, match=r"^cannot read /Volumes/c/s/v/flaky/missing.bin: FileNotFoundError"):
        fetch(reader, "flaky/missing.bin", tmp_path / "m")
    s3.configure(fail_first=100, fail_status=500)
    with pytest.raises(VolumeReadError, match=r"after 3 attempts: S3ResponseError: .*500 InternalError"):
        fetch(reader, "flaky/a.bin", tmp_path / "b")
    assert not (tmp_path / "m").exists()
    assert not (tmp_path / "b").exists()


def test_a_cancelled_download_stops_and_leaves_no_file(s3: S3TestServer, tmp_path: Path) -> None:
    (s3.bucket("slow") / "big.bin").write_bytes(b"s" * 2_000_000)  # large: written as it arrives
    s3.configure(bandwidth=200_000)  # 10 s for the whole file
    reader = lean(s3.storage_options)
    target = tmp_path / "big.out"
    future = reader.fetch("slow/big.bin", str(target), volume_path="/Volumes/c/s/v/big.bin", policy=FAST_RETRY)
    deadline = time.monotonic() + 30
    while not (target.exists() and target.stat().st_size) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert target.exists(), "the download never started"
    reader.cancel([future])
    with pytest.raises(DownloadCancelled):
        future.result(10)
    assert not target.exists()


def test_a_download_cancelled_while_queued_ends_at_once(s3: S3TestServer, tmp_path: Path) -> None:
    (s3.bucket("queue") / "slow.bin").write_bytes(b"s" * 300_000)
    (s3.bucket("queue") / "next.bin").write_bytes(b"n" * 10)
    s3.configure(bandwidth=300_000)  # one second for the first file
    reader = lean({**s3.storage_options, "config_kwargs": {"max_pool_connections": 1}})
    jobs = [(f"queue/{name}", str(tmp_path / name), f"/Volumes/c/s/v/{name}") for name in ("slow.bin", "next.bin")]
    first, second = reader.fetch_many(jobs, policy=FAST_RETRY)
    reader.cancel([second])  # it waits for the only connection
    with pytest.raises(DownloadCancelled):
        second.result(0.5)
    first.result(30)
    assert (tmp_path / "slow.bin").stat().st_size == 300_000
    assert not (tmp_path / "next.bin").exists()
    assert s3.stats()["gets"] == {"slow.bin": 1}


# ------------------------------------------------------------------ moto checks signatures


def moto_auth_after(endpoint: str, requests: str) -> None:
    """Make moto check credentials and signatures after this many more requests ("inf": never)."""
    plain = {"Content-Type": "text/plain"}  # a form body would be parsed away before moto reads it
    request = urllib.request.Request(f"{endpoint}/moto-api/reset-auth", data=requests.encode(), headers=plain)
    urllib.request.urlopen(request, timeout=30).close()


def test_moto_accepts_our_signatures_and_refuses_a_wrong_secret(moto: str, tmp_path: Path) -> None:
    import boto3

    admin = {"endpoint_url": moto, "aws_access_key_id": "a", "aws_secret_access_key": "a", "region_name": "us-east-1"}
    iam = boto3.client("iam", **admin)
    iam.create_user(UserName="reader")
    policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
    iam.put_user_policy(UserName="reader", PolicyName="read", PolicyDocument=json.dumps(policy))
    key = iam.create_access_key(UserName="reader")["AccessKey"]
    s3 = boto3.client("s3", **admin)
    s3.create_bucket(Bucket="signed")
    objects = {"data/plain.bin": b"plain", "data/sub dir/with space+plus.bin": b"spaced"}
    for name, body in objects.items():
        s3.put_object(Bucket="signed", Key=name, Body=body)
    # From here on moto checks every request's signature against the IAM user's secret.
    moto_auth_after(moto, "0")
    try:
        options = {"key": key["AccessKeyId"], "secret": key["SecretAccessKey"], "endpoint_url": moto}
        reader = lean(options)
        for i, (name, body) in enumerate(objects.items()):
            fetch(reader, f"signed/{name}", tmp_path / str(i))
            assert (tmp_path / str(i)).read_bytes() == body
        wrong = lean({**options, "secret": "not-the-secret"})
        with pytest.raises(VolumeReadError, match=r"PermissionError: .*403 SignatureDoesNotMatch") as caught:
            fetch(wrong, "signed/data/plain.bin", tmp_path / "wrong")
        assert "after" not in str(caught.value)  # a refusal is not retried
        assert not (tmp_path / "wrong").exists()
    finally:
        moto_auth_after(moto, "inf")


# ------------------------------------------------------------------ wire cases, on a scripted server

Answer = Callable[[int, bytes], "tuple[bytes | None, bool]"]


class ScriptedServer:
    """A real HTTP server on 127.0.0.1: ``answer(n, request_head)`` gives the raw bytes of the n-th
    answer (None: answer nothing) and whether to close the connection after it."""

    def __init__(self, answer: Answer) -> None:
        self.heads: list[bytes] = []
        self.connections = 0
        outer = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                outer.connections += 1
                buffer = b""
                while True:
                    while b"\r\n\r\n" not in buffer:
                        data = self.request.recv(65536)
                        if not data:
                            return
                        buffer += data
                    head, buffer = buffer.split(b"\r\n\r\n", 1)
                    outer.heads.append(head)
                    reply, close = answer(len(outer.heads) - 1, head)
                    if reply is None:
                        time.sleep(2)
                        return
                    self.request.sendall(reply)
                    if close:
                        return

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._server.server_address[1]}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def scripted() -> Iterator[Callable[[Answer], ScriptedServer]]:
    servers: list[ScriptedServer] = []

    def start(answer: Answer) -> ScriptedServer:
        servers.append(ScriptedServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def ok(body: bytes, extra: str = "") -> bytes:
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n".encode() + body


def test_chunked_and_until_close_bodies(scripted: Callable[[Answer], ScriptedServer], tmp_path: Path) -> None:
    chunked = (
        b"HTTP/1.1 100 Continue\r\n\r\n"
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: yes\r\n\r\n"
    )
    answers = [(chunked, False), (ok(b"second"), False), (b"HTTP/1.0 200 OK\r\n\r\nuntil the end", True)]
    server = scripted(lambda n, head: answers[n])
    reader = lean({"anon": True, "endpoint_url": server.endpoint})
    for i in range(3):
        fetch(reader, f"b/k{i}", tmp_path / str(i))
    assert [(tmp_path / str(i)).read_bytes() for i in range(3)] == [b"hello world", b"second", b"until the end"]
    assert server.connections == 1  # keep-alive across the chunked and the sized answer
    assert all(b"authorization" not in head.lower() for head in server.heads)  # anonymous: unsigned


def test_a_connection_the_server_dropped_is_replaced_without_a_retry(
    scripted: Callable[[Answer], ScriptedServer], tmp_path: Path
) -> None:
    # The second request arrives on a kept-alive connection that the server then drops unanswered,
    # as servers do with idle ones: it is sent again on a new connection, not counted as a failure.
    server = scripted(lambda n, head: (None, True) if n == 1 else (ok(b"body %d" % n), False))
    reader = lean({"key": "k", "secret": "s", "endpoint_url": server.endpoint})
    retries: list[int] = []
    fetch(reader, "b/first", tmp_path / "1", on_retry=lambda: retries.append(1))
    fetch(reader, "b/second", tmp_path / "2", on_retry=lambda: retries.append(1))
    assert ((tmp_path / "2").read_bytes(), retries, server.connections) == (b"body 2", [], 2)
    assert server.heads[0].startswith(b"GET /b/first HTTP/1.1\r\n")
    assert b"Authorization: AWS4-HMAC-SHA256 Credential=k/" in server.heads[0]


def test_a_silent_server_times_out_and_is_retried(scripted: Callable[[Answer], ScriptedServer], tmp_path: Path) -> None:
    server = scripted(lambda n, head: (None, True))
    reader = lean({"anon": True, "endpoint_url": server.endpoint, "config_kwargs": {"read_timeout": 0.3}})
    retries: list[int] = []
    started = time.monotonic()
    twice = RetryPolicy(attempts=2, base_seconds=0.001)
    with pytest.raises(VolumeReadError, match=r"after 2 attempts: TimeoutError: .*read timeout"):
        fetch(reader, "b/k", tmp_path / "k", twice, on_retry=lambda: retries.append(1))
    assert retries == [1]
    assert time.monotonic() - started < 10


@pytest.mark.parametrize(("status", "code"), [(503, "SlowDown"), (400, "RequestTimeout")])
def test_transient_error_codes_are_retried(
    scripted: Callable[[Answer], ScriptedServer], tmp_path: Path, status: int, code: str
) -> None:
    body = f"<?xml version='1.0'?><Error><Code>{code}</Code><Message>Try again</Message></Error>".encode()
    answers = [f"HTTP/1.1 {status} Error\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body, ok(b"fine")]
    server = scripted(lambda n, head: (answers[min(n, 1)], False))
    reader = lean({"anon": True, "endpoint_url": server.endpoint})
    retries: list[int] = []
    fetch(reader, "b/k", tmp_path / "k", on_retry=lambda: retries.append(1))
    assert ((tmp_path / "k").read_bytes(), retries, len(server.heads)) == (b"fine", [1], 2)


def test_many_downloads_share_a_bounded_pool(s3: S3TestServer, tmp_path: Path) -> None:
    bucket = s3.bucket("pool")
    for i in range(40):
        (bucket / f"{i}.bin").write_bytes(bytes([i]) * 500)
    s3.configure(latency=0.05)
    options = {**s3.storage_options, "config_kwargs": {"max_pool_connections": 4}}
    reader = lean(options)
    jobs = [(f"pool/{i}.bin", str(tmp_path / f"{i}.out"), f"/Volumes/c/s/v/{i}.bin") for i in range(40)]
    started = time.monotonic()
    cf.wait(reader.fetch_many(jobs, policy=FAST_RETRY), timeout=60)
    elapsed = time.monotonic() - started
    assert all((tmp_path / f"{i}.out").read_bytes() == bytes([i]) * 500 for i in range(40))
    assert elapsed >= 40 / 4 * 0.05 * 0.9  # never more than 4 requests at once


def test_a_forked_child_gets_its_own_loop(s3: S3TestServer, tmp_path: Path) -> None:
    (s3.bucket("fork") / "a.bin").write_bytes(b"forked")
    reader = lean(s3.storage_options)
    fetch(reader, "fork/a.bin", tmp_path / "parent")  # the parent's loop thread is running now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        try:
            fetch(lean(s3.storage_options), "fork/a.bin", tmp_path / "child")
            os.write(write, b"ok")
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        assert answer.read() == b"ok"
    os.waitpid(pid, 0)
    assert (tmp_path / "child").read_bytes() == b"forked"


def test_unknown_hosts_fail_like_connection_errors(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reader = lean({"anon": True, "endpoint_url": f"http://127.0.0.1:{port}"})
    with pytest.raises(VolumeReadError, match=r"after 2 attempts: ConnectionRefusedError"):
        fetch(reader, "b/k", tmp_path / "k", RetryPolicy(attempts=2, base_seconds=0.001))
