"""S3 clients side by side: client CPU per GET and throughput on small objects, one run, one server.

Issue 16 point 2 chooses the volume reader's S3 client by measurement. Each client fetches the same
objects (``--objects``, lognormal sizes of median 16 KiB and sigma 0.5, mean about 18 KiB, as in
``volume_loading.py``) from one :class:`~uc_jupyter.testing.s3_server.S3TestServer` with at most
``--concurrency`` requests in flight, the way a loader's fetch-ahead pool does:

- ``obstore async``: ``obstore.get_async`` + ``bytes_async`` on one asyncio loop;
- ``obstore sync/threads``: ``obstore.get(...).bytes()`` from a pool of threads;
- ``s3fs _cat_file``: s3fs's own coroutine (what ``fs.cat`` runs), on one loop;
- ``aiobotocore get_object``: the client under s3fs, without s3fs's layer, on one loop.

Two store conditions: latency 0 (the client's own cost decides the rate) and issue 16's latency (a
lognormal wait of mean 30 ms, sigma 0.6; no bandwidth cap, so the clients' concurrency decides). The
clients alternate, round by round (``--rounds``), and each reports its median round. CPU is this
process's (``getrusage``: every thread, Rust's included) per GET; the server's CPU is apart. Every
body is checked against the object's size. Numbers compare within one run only.

Usage: python benchmarks/s3_clients.py [--objects 2000] [--concurrency 64] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import math
import resource
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

BUCKET = "clients"
SEED = 1234
LATENCY_MEAN, LATENCY_SIGMA = 0.03, 0.6
KEY = SECRET = "uc-jupyter-test"
REGION = "us-east-1"

Fetch = Callable[[Sequence[str]], int]  # fetches every key, returns the bytes received


@dataclass(frozen=True)
class Round:
    gets: int
    seconds: float
    cpu_seconds: float
    server_cpu_seconds: float
    in_flight: float  # the store's time-weighted mean of GETs in flight over the round

    @property
    def rate(self) -> float:
        return self.gets / self.seconds


# ------------------------------------------------------------------------------------ clients
class ObstoreAsync:
    """obstore's async API on one loop, a semaphore keeping ``concurrency`` GETs in flight."""

    name = "obstore async"

    def __init__(self, endpoint: str, concurrency: int) -> None:
        self.store = _obstore(endpoint)
        self.concurrency = concurrency

    def __call__(self, keys: Sequence[str]) -> int:
        import obstore

        async def run() -> int:
            gate = asyncio.Semaphore(self.concurrency)

            async def one(key: str) -> int:
                async with gate:
                    result = await obstore.get_async(self.store, key)
                    return len(await result.bytes_async())

            return sum(await asyncio.gather(*(one(key) for key in keys)))

        return asyncio.run(run())

    def close(self) -> None:
        pass


class ObstoreThreads:
    """obstore's blocking API from ``concurrency`` threads (the GIL is released while it waits)."""

    name = "obstore sync/threads"

    def __init__(self, endpoint: str, concurrency: int) -> None:
        self.store = _obstore(endpoint)
        self.pool = concurrent.futures.ThreadPoolExecutor(concurrency)

    def __call__(self, keys: Sequence[str]) -> int:
        import obstore

        return sum(self.pool.map(lambda key: len(obstore.get(self.store, key).bytes()), keys))

    def close(self) -> None:
        self.pool.shutdown()


class OnOneLoop:
    """An asyncio client kept on one loop of its own thread across rounds (its sessions are bound to it)."""

    name = ""

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.loop = asyncio.new_event_loop()
        self.thread = concurrent.futures.ThreadPoolExecutor(1)
        self.thread.submit(asyncio.set_event_loop, self.loop).result()

    def run(self, coroutine: Awaitable[Any]) -> Any:
        return self.thread.submit(self.loop.run_until_complete, coroutine).result()

    def gathered(self, keys: Sequence[str], get: Callable[[str], Awaitable[int]]) -> int:
        async def run() -> int:
            gate = asyncio.Semaphore(self.concurrency)

            async def one(key: str) -> int:
                async with gate:
                    return await get(key)

            return sum(await asyncio.gather(*(one(key) for key in keys)))

        result: int = self.run(run())
        return result

    def close(self) -> None:
        self.run(self._close())
        self.thread.submit(self.loop.close).result()
        self.thread.shutdown()

    async def _close(self) -> None:
        pass


class S3fsCat(OnOneLoop):
    name = "s3fs _cat_file"

    def __init__(self, endpoint: str, concurrency: int) -> None:
        super().__init__(concurrency)
        import s3fs

        async def make() -> Any:
            fs = s3fs.S3FileSystem(
                asynchronous=True,
                skip_instance_cache=True,
                key=KEY,
                secret=SECRET,
                endpoint_url=endpoint,
                client_kwargs={"region_name": REGION},
                config_kwargs={"max_pool_connections": concurrency},
            )
            await fs.set_session()
            return fs

        self.fs = self.run(make())

    def __call__(self, keys: Sequence[str]) -> int:
        async def get(key: str) -> int:
            return len(await self.fs._cat_file(f"{BUCKET}/{key}"))

        return self.gathered(keys, get)

    async def _close(self) -> None:
        client = getattr(self.fs, "_s3", None)
        if client is not None:
            await client.close()


class Aiobotocore(OnOneLoop):
    name = "aiobotocore get_object"

    def __init__(self, endpoint: str, concurrency: int) -> None:
        super().__init__(concurrency)
        from aiobotocore.config import AioConfig
        from aiobotocore.session import get_session

        async def make() -> Any:
            creator = get_session().create_client(
                "s3",
                endpoint_url=endpoint,
                aws_access_key_id=KEY,
                aws_secret_access_key=SECRET,
                region_name=REGION,
                config=AioConfig(max_pool_connections=concurrency),
            )
            return creator, await creator.__aenter__()

        self.creator, self.client = self.run(make())

    def __call__(self, keys: Sequence[str]) -> int:
        async def get(key: str) -> int:
            answer = await self.client.get_object(Bucket=BUCKET, Key=key)
            async with answer["Body"] as body:
                return len(await body.read())

        return self.gathered(keys, get)

    async def _close(self) -> None:
        await self.creator.__aexit__(None, None, None)


def _obstore(endpoint: str) -> Any:
    from obstore.store import S3Store

    return S3Store(
        BUCKET,
        endpoint=endpoint,
        access_key_id=KEY,
        secret_access_key=SECRET,
        region=REGION,
        client_options={"allow_http": True},
    )


CLIENTS = (ObstoreAsync, ObstoreThreads, S3fsCat, Aiobotocore)


# ------------------------------------------------------------------------------------ measuring
def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def measure(fetch: Fetch, keys: Sequence[str], expected: int, server: Any) -> Round:
    server.reset()
    cpu, server_cpu, start = _cpu_seconds(), server.cpu_seconds(), time.perf_counter()
    received = fetch(keys)
    seconds = time.perf_counter() - start
    if received != expected:
        raise SystemExit(f"a client received {received} bytes, the objects hold {expected}: the benchmark is broken")
    cpu, server_cpu = _cpu_seconds() - cpu, server.cpu_seconds() - server_cpu
    return Round(len(keys), seconds, cpu, server_cpu, server.stats()["in_flight"]["mean"])


def main(argv: Sequence[str] | None = None) -> None:
    from uc_jupyter.testing.s3_server import S3TestServer
    from uc_jupyter.testing.small_files import write_small_files

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--objects", type=int, default=2000, help="objects fetched per round (2000)")
    parser.add_argument("--concurrency", type=int, default=64, help="GETs in flight per client (64)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per condition, clients alternating (3)")
    args = parser.parse_args(argv)
    if args.objects < 1 or args.concurrency < 1 or args.rounds < 1:
        parser.error("--objects, --concurrency and --rounds must be >= 1")
    conditions = {"latency 0": (0.0, 0.0), "latency mean 30 ms": (LATENCY_MEAN, LATENCY_SIGMA)}
    with (
        tempfile.TemporaryDirectory(prefix="uc-bench-clients-") as tmp,
        S3TestServer(tmp, seed=SEED, require_key=KEY) as server,
    ):
        relatives, total = write_small_files(server.bucket(BUCKET), args.objects, seed=SEED)
        keys = list(relatives)
        print(
            f"{len(keys)} objects, {total / 1e6:.1f} MB (mean {total / len(keys) / 1024:.1f} KiB), "
            f"{args.concurrency} GETs in flight per client, {args.rounds} rounds, no bandwidth cap"
        )
        clients = [make(server.endpoint, args.concurrency) for make in CLIENTS]
        try:
            for client in clients:  # warm-up: connections, credentials, imports
                measure(client, keys[: args.concurrency], total_of(server, keys[: args.concurrency]), server)
            print(
                f"{'condition':<20} {'client':<24} {'GETs/s':>8} {'CPU us/GET':>10} {'in flight':>9} "
                f"{'server us/GET':>13}"
            )
            for condition, (mean, sigma) in conditions.items():
                server.configure(latency=mean * math.exp(-(sigma**2) / 2), latency_sigma=sigma)
                rounds: dict[str, list[Round]] = {client.name: [] for client in clients}
                for _ in range(args.rounds):
                    for client in clients:
                        rounds[client.name].append(measure(client, keys, total, server))
                for name, runs in rounds.items():
                    rate = statistics.median(run.rate for run in runs)
                    cpu = statistics.median(run.cpu_seconds / run.gets for run in runs)
                    server_cpu = statistics.median(run.server_cpu_seconds / run.gets for run in runs)
                    depth = statistics.median(run.in_flight for run in runs)
                    print(
                        f"{condition:<20} {name:<24} {rate:>8.0f} {cpu * 1e6:>10.0f} {depth:>9.1f} "
                        f"{server_cpu * 1e6:>13.0f}"
                    )
        finally:
            for client in clients:
                client.close()


def total_of(server: Any, keys: Sequence[str]) -> int:
    folder = server.bucket(BUCKET)
    return sum((folder / key).stat().st_size for key in keys)


if __name__ == "__main__":
    main()
