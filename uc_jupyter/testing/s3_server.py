"""A small S3-compatible server over a local folder, with injected latency, bandwidth and failures.

It speaks the part of S3 that reading and writing a volume needs (ListObjectsV2, HeadBucket,
HeadObject, GetObject with ranges; PutObject, DeleteObject(s) and multipart uploads through
:mod:`uc_jupyter.testing.s3_writes`) so ``s3fs`` and ``obstore`` can use it, and it counts what it
serves. It checks no signature (moto does, for the tests of credentials); ``--require-key`` refuses
requests that carry no credential of one access key. The tests, the benchmarks and the tutorial
notebooks run it in its own process on 127.0.0.1:

    python -m uc_jupyter.testing.s3_server --root DIR [--latency 0.025 --latency-sigma 0.6]
        [--bandwidth 50e6 --connection-bandwidth 25e6] [--max-in-flight 256] [--seed 0] [--require-key K]
        [--fail-rate 0.01 --reset-rate 0.001]

Buckets are the sub-folders of ``DIR``. The shaping (:mod:`uc_jupyter.testing.s3_shaping`): each
request waits a lognormal latency (``latency`` is its median, ``latency_sigma`` its shape, 0 for a
constant; seeded), bytes pass one shared link of ``bandwidth`` bytes/s and at most
``connection_bandwidth`` bytes/s per connection (0: no cap), and a request beyond
``max_in_flight`` requests in flight is answered 503 SlowDown at once (0: no limit).

Control endpoints (plain JSON, outside S3's namespace): ``GET /_control/stats`` (requests, GETs per
key, bytes sent and received, ``clients``: requests by the product of their User-Agent (``object_store``,
``aiobotocore``: which library asked), ``in_flight``: now, peak and the time-weighted ``mean`` since
the last reset, ``delayed_seconds`` the bandwidth caps added, ``refused`` requests over
``max_in_flight``, and the settings; ``requests["refused unsigned"]`` counts those without the
access key ``--require-key`` asks for), ``POST /_control/reset`` (counters and the in-flight window)
and ``POST /_control/config`` with any setting above, ``fail_first`` (answer the first N GETs of each
object with an error), ``fail_status`` (503 SlowDown, the default, or 500 InternalError) and
``list_latency`` (seconds each listing page waits beyond the latency) and ``store_then_fail`` (a
PutObject of a key ending in this string is stored, then answered 400 RequestTimeout: a write that
landed although its client saw an error, as when a reply is lost; "" for none). Random faults
(:mod:`uc_jupyter.testing.s3_faults`, drawn from ``seed``): ``fail_rate`` (the fraction of object GETs
answered 503 SlowDown) and ``reset_rate`` (the fraction whose connection is reset half-way through
the body); the stats' ``faults`` counts each kind injected since the last reset.

Example:
    >>> with S3TestServer(root) as server:                     # doctest: +SKIP
    ...     fs = s3fs.S3FileSystem(**server.storage_options)
    ...     fs.ls("bucket")
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from email.utils import formatdate
from pathlib import Path
from stat import S_ISREG
from types import TracebackType
from typing import Any
from urllib.parse import quote
from xml.sax.saxutils import escape

from aiohttp import web

from uc_jupyter.testing import s3_writes
from uc_jupyter.testing.s3_answers import NS as _NS
from uc_jupyter.testing.s3_answers import error as _error
from uc_jupyter.testing.s3_answers import etag as _etag
from uc_jupyter.testing.s3_answers import xml as _xml
from uc_jupyter.testing.s3_faults import RandomFaults, answer_then_reset
from uc_jupyter.testing.s3_listing import Listings
from uc_jupyter.testing.s3_shaping import InFlight, Latency, Link

__all__ = ["S3TestServer", "serve"]

_CHUNK = 64 * 1024


class _State:
    def __init__(self, root: Path, settings: dict[str, float], require_key: str = "") -> None:
        self.root = root
        self.require_key = require_key
        self.latency = Latency(settings.get("latency", 0.0), settings.get("latency_sigma", 0.0), int(settings["seed"]))
        self.link = Link(settings.get("bandwidth", 0.0), settings.get("connection_bandwidth", 0.0))
        self.in_flight = InFlight()
        self.max_in_flight = int(settings.get("max_in_flight", 0))
        self.fail_first = int(settings.get("fail_first", 0))
        self.fail_status = 503
        self.faults = RandomFaults(
            fail_rate=settings.get("fail_rate", 0.0),
            reset_rate=settings.get("reset_rate", 0.0),
            seed=int(settings["seed"]),
        )
        self.list_latency = 0.0  # seconds each listing page waits on top of the latency
        self.store_then_fail = ""  # a PutObject of a key ending in this is stored, then answered 400
        self.listings = Listings(root)
        self.uploads = s3_writes.Uploads(root)
        self.reset()

    def reset(self) -> None:
        self.requests: collections.Counter[str] = collections.Counter()
        self.gets: collections.Counter[str] = collections.Counter()
        self.attempts: collections.Counter[str] = collections.Counter()
        self.clients: collections.Counter[str] = collections.Counter()  # requests by User-Agent product
        self.bytes_sent = 0
        self.bytes_received = 0
        self.refused = 0
        self.faults.reset_counts()
        self.link.reset()
        self.in_flight.reset()

    def configure(self, config: dict[str, Any]) -> None:
        """Apply the settings ``config`` names (the rest stay as they are)."""
        known = (*_SETTINGS, *_CONFIG_ONLY, *_TEXT_ONLY)
        numbers = {name: float(value) for name, value in config.items() if name in known and name not in _TEXT_ONLY}
        unknown = sorted(set(config) - set(known))
        if unknown:
            raise ValueError(f"unknown settings {unknown}: use {sorted(known)}")
        negative = sorted(name for name, value in numbers.items() if value < 0)
        if negative:
            raise ValueError(f"invalid settings {negative}: give numbers >= 0")
        rates = numbers.get("fail_rate", self.faults.fail_rate) + numbers.get("reset_rate", self.faults.reset_rate)
        if rates > 1:
            raise ValueError(f"fail_rate and reset_rate are fractions of the GETs: together at most 1, not {rates:g}")
        self.latency.median = numbers.get("latency", self.latency.median)
        self.latency.sigma = numbers.get("latency_sigma", self.latency.sigma)
        self.link.bandwidth = numbers.get("bandwidth", self.link.bandwidth)
        self.link.connection_bandwidth = numbers.get("connection_bandwidth", self.link.connection_bandwidth)
        self.max_in_flight = int(numbers.get("max_in_flight", self.max_in_flight))
        self.fail_first = int(numbers.get("fail_first", self.fail_first))
        self.fail_status = int(numbers.get("fail_status", self.fail_status))
        self.faults.fail_rate = numbers.get("fail_rate", self.faults.fail_rate)
        self.faults.reset_rate = numbers.get("reset_rate", self.faults.reset_rate)
        self.list_latency = numbers.get("list_latency", self.list_latency)
        self.store_then_fail = str(config.get("store_then_fail", self.store_then_fail))

    def settings(self) -> dict[str, float]:
        return {
            "latency": self.latency.median,
            "latency_sigma": self.latency.sigma,
            "bandwidth": self.link.bandwidth,
            "connection_bandwidth": self.link.connection_bandwidth,
            "max_in_flight": self.max_in_flight,
            "fail_first": self.fail_first,
            "fail_status": self.fail_status,
            "fail_rate": self.faults.fail_rate,
            "reset_rate": self.faults.reset_rate,
            "list_latency": self.list_latency,
        }

    def text_settings(self) -> dict[str, str]:
        return {"store_then_fail": self.store_then_fail}

    async def throttle(self, request: web.Request, size: int) -> None:
        """Wait until ``size`` bytes have passed the shared link and this request's connection."""
        wait = self.link.delay(size, request.transport.get_extra_info("peername") if request.transport else None)
        if wait > 0:
            await asyncio.sleep(wait)


# Every setting of the shaping and the failures, by its name in /_control/config and on the command line.
_SHAPING = ("latency", "latency_sigma", "bandwidth", "connection_bandwidth", "max_in_flight")
_SETTINGS = (*_SHAPING, "fail_first", "fail_rate", "reset_rate", "fail_status")
_CONFIG_ONLY = ("list_latency",)  # through /_control/config only (tests that hold listings back)
_TEXT_ONLY = ("store_then_fail",)  # through /_control/config only, a string (tests of a write that landed)


def _iso(mtime: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(mtime))


def _object_path(state: _State, bucket: str, key: str) -> Path | None:
    """The file behind ``key``, or None when the key climbs out of its bucket. Checked lexically:
    resolving every component on each GET cost this server a tenth of its CPU in the benchmarks,
    and the buckets are folders the tests write themselves."""
    base = os.path.normpath(os.path.join(state.root, bucket))
    path = os.path.normpath(os.path.join(base, key))
    if not path.startswith(base + os.sep):
        return None
    return Path(path)


def _list(state: _State, bucket: str, query: Any) -> web.Response:
    prefix = query.get("prefix", "")
    encode = query.get("encoding-type") == "url"
    max_keys = int(query.get("max-keys", "1000"))
    page = state.listings.page(
        bucket,
        prefix,
        delimiter=query.get("delimiter", ""),
        after=query.get("continuation-token") or query.get("start-after") or "",
        max_keys=max_keys,
        continued="continuation-token" in query,
    )
    contents = [
        f"<Contents><Key>{quote(key) if encode else escape(key)}</Key>"
        f"<LastModified>{_iso(stat.st_mtime)}</LastModified>"
        f"<ETag>{escape(_etag(stat))}</ETag><Size>{stat.st_size}</Size>"
        "<StorageClass>STANDARD</StorageClass></Contents>"
        for key, stat in page.contents
    ]
    prefixes, truncated, last = page.prefixes, page.truncated, page.last
    common_xml = "".join(
        f"<CommonPrefixes><Prefix>{quote(p) if encode else escape(p)}</Prefix></CommonPrefixes>" for p in prefixes
    )
    token = f"<NextContinuationToken>{escape(last)}</NextContinuationToken>" if truncated else ""
    return _xml(
        f'<ListBucketResult xmlns="{_NS}"><Name>{escape(bucket)}</Name><Prefix>{escape(prefix)}</Prefix>'
        f"<KeyCount>{len(contents) + len(prefixes)}</KeyCount><MaxKeys>{max_keys}</MaxKeys>"
        f"<IsTruncated>{'true' if truncated else 'false'}</IsTruncated>{token}"
        + ("<EncodingType>url</EncodingType>" if encode else "")
        + f"{''.join(contents)}{common_xml}</ListBucketResult>"
    )


async def _get(
    state: _State, request: web.Request, path: Path, key: str, stat: os.stat_result, *, reset: bool = False
) -> web.StreamResponse:
    wanted = request.headers.get("If-Match")
    if wanted is not None and not {tag.strip() for tag in wanted.split(",")} & {"*", _etag(stat)}:
        # As S3: the object is not the version the caller holds (rewritten since it listed it).
        state.requests["412"] += 1
        return _error(412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold")
    headers = {
        "ETag": _etag(stat),
        "Last-Modified": formatdate(stat.st_mtime, usegmt=True),
        "Accept-Ranges": "bytes",
    }
    start, end = 0, stat.st_size - 1
    status = 200
    ranged = request.headers.get("Range", "")
    if ranged.startswith("bytes="):
        first, _, last_text = ranged[6:].partition("-")
        start = int(first) if first else max(0, stat.st_size - int(last_text))
        end = min(int(last_text), stat.st_size - 1) if first and last_text else stat.st_size - 1
        status = 206
        headers["Content-Range"] = f"bytes {start}-{end}/{stat.st_size}"
    length = max(0, end - start + 1)
    headers["Content-Length"] = str(length)
    if request.method == "HEAD":
        return web.Response(status=200, headers=headers)
    if reset:  # an injected fault: half the answer, then the connection reset
        with open(path, "rb") as handle:
            handle.seek(start)
            body = handle.read(length)
        state.gets[key] += 1
        return await answer_then_reset(request, status, headers, body)
    if length <= _CHUNK:  # a small object in one piece: one read, one write
        with open(path, "rb") as handle:
            handle.seek(start)
            body = handle.read(length)
        await state.throttle(request, len(body))
        state.gets[key] += 1
        state.bytes_sent += len(body)
        return web.Response(status=status, headers=headers, body=body)
    response = web.StreamResponse(status=status, headers=headers)
    await response.prepare(request)
    state.gets[key] += 1
    with open(path, "rb") as handle:
        handle.seek(start)
        remaining = length
        while remaining:
            chunk = handle.read(min(_CHUNK, remaining))
            if not chunk:
                break
            await state.throttle(request, len(chunk))
            await response.write(chunk)
            state.bytes_sent += len(chunk)
            remaining -= len(chunk)
    await response.write_eof()
    return response


async def _handle(request: web.Request) -> web.StreamResponse:
    state: _State = request.app["state"]
    if request.path.startswith("/_control/"):
        return await _control(state, request)
    # The product of the User-Agent ("aiobotocore/2.x ..." -> "aiobotocore"): which client library asked.
    state.clients[request.headers.get("User-Agent", "").split("/", 1)[0].split(" ", 1)[0] or "-"] += 1
    if state.max_in_flight and state.in_flight.now >= state.max_in_flight:
        state.refused += 1  # as a store over its request rate: at once, before any latency
        return _error(503, "SlowDown", f"more than {state.max_in_flight} requests in flight, please retry")
    if state.require_key and not _signed_with(request, state.require_key):
        state.requests["refused unsigned"] += 1
        return _error(403, "AccessDenied", f"requests must be signed with access key {state.require_key!r}")
    state.in_flight.enter()
    try:
        return await _serve(state, request)
    finally:
        state.in_flight.leave()


def _signed_with(request: web.Request, key: str) -> bool:
    """Does the request carry a SigV4 credential of access key ``key`` (header or presigned query)?
    The signature itself is not checked: this tells a client that sent the keys from one that sent none."""
    credential = f"{key}/"
    header = request.headers.get("Authorization", "")
    return f"Credential={credential}" in header or request.query.get("X-Amz-Credential", "").startswith(credential)


async def _serve(state: _State, request: web.Request) -> web.StreamResponse:
    await asyncio.sleep(state.latency.draw())
    bucket, _, key = request.path.lstrip("/").partition("/")
    if not bucket or bucket.startswith(".") or not (state.root / bucket).is_dir():
        return _error(404, "NoSuchBucket", f"no bucket {bucket!r}")
    if not key:
        state.requests["LIST" if request.method == "GET" else f"{request.method} bucket"] += 1
        if request.method == "POST" and "delete" in request.query:
            return s3_writes.delete_many(state, bucket, await request.text(), _object_path)
        if request.method == "GET" and "location" in request.query:
            return _xml(f'<LocationConstraint xmlns="{_NS}"></LocationConstraint>')
        if request.method == "GET":
            await asyncio.sleep(state.list_latency)
            return _list(state, bucket, request.query)
        return web.Response(status=200)
    state.requests[request.method] += 1
    path = _object_path(state, bucket, key)
    if path is None:
        return _error(400, "InvalidArgument", "key escapes its bucket")
    if request.method in ("PUT", "POST", "DELETE"):
        return await s3_writes.write(state, request, bucket, key, path)
    try:
        stat = path.stat()
    except OSError:
        stat = None
    if stat is None or not S_ISREG(stat.st_mode):
        return _error(404, "NoSuchKey", f"no key {key!r}")
    if request.method == "GET":
        state.attempts[key] += 1
        if state.attempts[key] <= state.fail_first:
            code = "SlowDown" if state.fail_status == 503 else "InternalError"
            return _error(state.fail_status, code, "injected failure, please retry")
    fault = state.faults.draw() if request.method == "GET" else None
    if fault == "503":
        return _error(503, "SlowDown", "injected random failure, please retry")
    if request.method in ("GET", "HEAD"):
        return await _get(state, request, path, key, stat, reset=fault == "reset")
    return _error(405, "MethodNotAllowed", request.method)


async def _control(state: _State, request: web.Request) -> web.Response:
    action = request.path.removeprefix("/_control/")
    if action == "reset" and request.method == "POST":
        state.reset()
    elif action == "config" and request.method == "POST":
        try:
            state.configure(await request.json())
        except (ValueError, TypeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
    elif action != "stats":
        return web.json_response({"error": f"unknown control {action!r}"}, status=404)
    return web.json_response(
        {
            "requests": dict(state.requests),
            "gets": dict(state.gets),
            "bytes_sent": state.bytes_sent,
            "bytes_received": state.bytes_received,
            "clients": dict(state.clients),
            "in_flight": state.in_flight.snapshot(),
            "delayed_seconds": state.link.delayed_seconds,
            "refused": state.refused,
            "faults": state.faults.counts(),
            **state.settings(),
            **state.text_settings(),
        }
    )


async def serve(root: Path, port: int, settings: dict[str, float], require_key: str = "") -> None:
    """Serve until cancelled; prints ``listening on http://127.0.0.1:PORT`` once ready. ``settings``
    maps the names of ``/_control/config`` (and ``seed``) to values; those left out are 0.
    ``require_key``: answer 403 to S3 requests not signed with that access key ("": no check)."""
    app = web.Application(client_max_size=1 << 30)
    app["state"] = _State(root, {"seed": 0, **settings}, require_key)
    app.router.add_route("*", "/{tail:.*}", _handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, backlog=1024)
    await site.start()
    print(f"listening on http://127.0.0.1:{runner.addresses[0][1]}", flush=True)
    await asyncio.Event().wait()


class S3TestServer:
    """Run the server in its own process on a free port; a context manager.

    ``latency`` is the median of each request's wait, ``latency_sigma`` its lognormal shape (0: the
    same every time), ``seed`` the generator's; the bandwidths are bytes/s (0: no cap);
    ``max_in_flight`` answers requests beyond it with 503 SlowDown (0: no limit); ``fail_rate`` and
    ``reset_rate`` the fractions of object GETs answered 503 or reset half-way (seeded); ``require_key``
    answers 403 AccessDenied to requests that carry no SigV4 credential of that access key (the
    signature is not checked; "": anyone may ask).

    Example:
        >>> with S3TestServer("/tmp/buckets", latency=0.025, latency_sigma=0.6) as server:  # doctest: +SKIP
        ...     server.stats()["in_flight"]["mean"]
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        latency: float = 0.0,
        latency_sigma: float = 0.0,
        bandwidth: float = 0.0,
        connection_bandwidth: float = 0.0,
        max_in_flight: int = 0,
        fail_first: int = 0,
        fail_rate: float = 0.0,
        reset_rate: float = 0.0,
        seed: int = 0,
        require_key: str = "",
    ) -> None:
        self.root = Path(root)
        given = (
            latency,
            latency_sigma,
            bandwidth,
            connection_bandwidth,
            max_in_flight,
            fail_first,
            fail_rate,
            reset_rate,
            seed,
        )
        names = (name.replace("_", "-") for name in (*_SETTINGS[:-1], "seed"))  # in the order of `given`
        self.args = [arg for name, value in zip(names, given, strict=True) for arg in (f"--{name}", str(value))]
        self.args += ["--require-key", require_key] if require_key else []
        self.process: subprocess.Popen[str] | None = None
        self.endpoint = ""

    def start(self) -> S3TestServer:
        self.root.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uc_jupyter.testing.s3_server",
                "--root",
                str(self.root),
                "--exit-with-parent",
                *self.args,
            ],
            stdout=subprocess.PIPE,
            stdin=subprocess.PIPE,  # held by this process only: the server ends when it sees the pipe close
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("listening on "):
            self.stop()
            raise RuntimeError(f"the S3 test server did not start: {line!r}")
        self.endpoint = line.split()[-1]
        return self

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process is not None and self.process.stdout is not None:
            self.process.stdout.close()
        if self.process is not None and self.process.stdin is not None:
            self.process.stdin.close()

    def __enter__(self) -> S3TestServer:
        return self.start()

    def __exit__(self, *exc: object | TracebackType) -> None:
        self.stop()

    @property
    def storage_options(self) -> dict[str, Any]:
        """What ``s3fs.S3FileSystem`` (and a catalog volume) needs to reach this server."""
        return {
            "key": "uc-jupyter-test",
            "secret": "uc-jupyter-test",
            "endpoint_url": self.endpoint,
            "client_kwargs": {"region_name": "us-east-1"},
        }

    def bucket(self, name: str) -> Path:
        """Create (if needed) and return the folder behind bucket ``name``."""
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def stats(self) -> dict[str, Any]:
        return self._control("stats")

    def cpu_seconds(self) -> float:
        """CPU seconds the server process has used so far (Linux ``/proc``; NaN elsewhere), so a
        benchmark can tell the client's CPU from the store's."""
        assert self.process is not None, "the server is not started"
        try:
            fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            return float("nan")
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def reset(self) -> dict[str, Any]:
        return self._control("reset", {})

    def configure(self, **config: float | str) -> dict[str, Any]:
        return self._control("config", config)

    def _control(self, action: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        with urllib.request.urlopen(f"{self.endpoint}/_control/{action}", data=data, timeout=30) as reply:
            result: dict[str, Any] = json.loads(reply.read())
            return result


def _exit_at_end_of_input() -> None:
    sys.stdin.read()  # returns at EOF: every holder of the pipe's other end is gone
    os.kill(os.getpid(), signal.SIGTERM)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--root", required=True, type=Path, help="folder whose sub-folders are buckets")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--latency", type=float, default=0.0, help="median seconds each request waits")
    parser.add_argument("--latency-sigma", type=float, default=0.0, help="lognormal shape of the wait (0: constant)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the latency draws")
    parser.add_argument("--bandwidth", type=float, default=0.0, help="bytes per second in all (0: unlimited)")
    parser.add_argument("--connection-bandwidth", type=float, default=0.0, help="bytes per second per connection")
    parser.add_argument("--max-in-flight", type=int, default=0, help="503 SlowDown beyond N requests (0: no limit)")
    parser.add_argument("--fail-first", type=int, default=0, help="503 the first N GETs of each object")
    parser.add_argument("--fail-rate", type=float, default=0.0, help="the fraction of object GETs answered 503")
    parser.add_argument("--reset-rate", type=float, default=0.0, help="the fraction of object GETs reset half-way")
    parser.add_argument("--require-key", default="", help="403 requests not signed with this access key id")
    parser.add_argument(
        "--exit-with-parent",
        action="store_true",
        help="exit when standard input closes (the parent that holds it ended)",
    )
    args = parser.parse_args(argv)
    if min(args.latency, args.latency_sigma, args.bandwidth, args.connection_bandwidth, args.max_in_flight) < 0:
        parser.error("--latency, --latency-sigma, the bandwidths and --max-in-flight must be >= 0")
    if min(args.fail_rate, args.reset_rate) < 0 or args.fail_rate + args.reset_rate > 1:
        parser.error("--fail-rate and --reset-rate are fractions: each >= 0, together at most 1")
    settings = {name: float(getattr(args, name)) for name in (*_SETTINGS[:-1], "seed")}
    if args.exit_with_parent:  # a script that never called stop() must not leave its server behind
        threading.Thread(target=_exit_at_end_of_input, name="s3-test-server-parent", daemon=True).start()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.root, args.port, settings, args.require_key))


if __name__ == "__main__":
    main()
