"""Checkpoints into a volume on object storage: UCVolumeWriter/UCVolumeReader against torch.save + a plain
upload, side by side in one run.

A 500 MB state dict (2 ranks x 250 MB of float32 tensors, 25 tensors of 10 MB per rank, each rank's
own keys) is saved and loaded by a RankPool of 2 CPU ranks (gloo) into a volume on the local S3 test
server (:mod:`uc_jupyter.testing.s3_server`, its own process on 127.0.0.1), alternately with the
baseline, ``--repeat`` times; each time is rank 0's, from a barrier before to a barrier after (so it
is the slower rank's):

- save: ``dcp.save(state, storage_writer=UCVolumeWriter(...))`` vs the baseline: each rank
  ``torch.save``s its state to local disk, then uploads that file with a plain ``obstore.put``
  (multipart, obstore's defaults);
- load: ``dcp.load`` through ``UCVolumeReader`` into preallocated tensors vs the baseline: each rank
  downloads its file (``obstore.get``) and ``torch.load``s it from memory;
- async: ``dcp.async_save`` (its own gloo group): how long the caller is blocked (torch's copy to
  CPU memory) against the synchronous save's time.

Targets: save and load no slower than the baseline (ratio <= 1.00); async blocked < 10% of the sync save.

Conditions, printed with the results: the S3 server's latency (median, lognormal sigma) and bandwidth
caps (``--bandwidth`` for all connections, ``--connection-bandwidth`` each; 0 = none), staging and the
baseline's file on this machine's local disk (the temp folder's file system). Both sides share the
machine's CPUs with the server: on a 2-core machine the server's own CPU is part of every number.

Usage: python benchmarks/checkpoint_save.py [--repeat R] [--mb-per-rank M] [--latency S]
    [--bandwidth B] [--connection-bandwidth B]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

TENSOR_MB = 10


def _state(rank: int, mb: int) -> dict[str, Any]:
    import torch

    count = max(1, mb // TENSOR_MB)
    generator = torch.Generator().manual_seed(rank)
    elements = TENSOR_MB * (1 << 20) // 4
    return {f"rank{rank}.t{i:03d}": torch.rand(elements, generator=generator) for i in range(count)}


def _store(endpoint: str) -> Any:
    from obstore.store import S3Store

    return S3Store(
        "bench",
        config={
            "endpoint": endpoint,
            "access_key_id": "bench",
            "secret_access_key": "bench",
            "region": "us-east-1",
            "allow_http": "true",
        },
    )


def _timed(action: Any) -> float:
    """Seconds of ``action()`` on every rank, from a barrier before to a barrier after."""
    import torch.distributed as dist

    dist.barrier()
    began = time.perf_counter()
    action()
    dist.barrier()
    return time.perf_counter() - began


def rank_round(endpoint: str, volume: str, step: int, mb: int, scratch: str) -> dict[str, float]:
    """One round on this rank: the baseline's save and load, ours, and an async save."""
    import io

    import obstore
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    from uc_jupyter.checkpoint import UCVolumeReader, UCVolumeWriter

    rank = dist.get_rank()
    state = _state(rank, mb)
    store = _store(endpoint)
    local = Path(scratch) / f"rank{rank}.pt"
    key = f"baseline/rank{rank}.pt"
    times: dict[str, float] = {}

    def baseline_save() -> None:
        torch.save(state, local)
        obstore.put(store, key, local)

    def baseline_load() -> None:
        loaded = torch.load(io.BytesIO(bytes(obstore.get(store, key).bytes())), weights_only=True)
        assert torch.equal(loaded[next(iter(state))], state[next(iter(state))])

    path = f"{volume}/run/step-{step}"
    target = {name: torch.empty_like(t) for name, t in state.items()}

    def ours_save() -> None:
        dcp.save(state, storage_writer=UCVolumeWriter(path, keep_last=1))

    def ours_load() -> None:
        dcp.load(target, storage_reader=UCVolumeReader(path))
        assert all(torch.equal(target[name], t) for name, t in state.items())

    times["baseline save"] = _timed(baseline_save)
    times["ours save"] = _timed(ours_save)
    times["baseline load"] = _timed(baseline_load)
    times["ours load"] = _timed(ours_load)
    local.unlink(missing_ok=True)

    group = dist.new_group(backend="gloo")
    dist.barrier()
    began = time.perf_counter()
    pending = dcp.async_save(state, storage_writer=UCVolumeWriter(f"{path}-async", keep_last=1), process_group=group)
    times["async blocked"] = time.perf_counter() - began
    pending.result()
    dist.barrier()
    times["async total"] = time.perf_counter() - began
    dist.destroy_process_group(group)
    return times


def _volume(endpoint: str, root: Path) -> str:
    from uc_jupyter.catalog import get_catalog
    from uc_jupyter.testing.catalogs import external_location

    catalog = get_catalog()
    catalog.create_catalog("main")
    catalog.create_schema("main.ml")
    options = {
        "key": "bench",
        "secret": "bench",
        "endpoint_url": endpoint,
        "client_kwargs": {"region_name": "us-east-1"},
    }
    external_location(catalog, "s3://bench", options)
    catalog.create_volume("main.ml.ckpt", "s3://bench/ckpt")
    return "/Volumes/main/ml/ckpt"


def _file_system(path: str) -> str:
    try:
        with open("/proc/mounts") as mounts:
            best = max((line.split() for line in mounts if path.startswith(line.split()[1])), key=lambda f: len(f[1]))
        return f"{best[2]} on {best[0]}"
    except (OSError, ValueError):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--mb-per-rank", type=int, default=250)
    parser.add_argument("--latency", type=float, default=0.005, help="median seconds each S3 request waits")
    parser.add_argument("--bandwidth", type=float, default=0.0, help="bytes/s over all connections (0: none)")
    parser.add_argument("--connection-bandwidth", type=float, default=0.0, help="bytes/s per connection (0: none)")
    args = parser.parse_args()

    from uc_jupyter.distributed import RankPool
    from uc_jupyter.testing.s3_server import S3TestServer

    with tempfile.TemporaryDirectory(prefix="ckpt-bench-") as scratch:
        os.environ["UC_JUPYTER_HOME"] = str(Path(scratch) / "home")
        os.environ.setdefault("UC_JUPYTER_PRINCIPAL", "admin")
        server = S3TestServer(
            Path(scratch) / "s3",
            latency=args.latency,
            latency_sigma=0.6 if args.latency else 0.0,
            bandwidth=args.bandwidth,
            connection_bandwidth=args.connection_bandwidth,
        )
        with server:
            server.bucket("bench")
            volume = _volume(server.endpoint, Path(scratch))
            rounds: list[list[dict[str, float]]] = []
            with RankPool(2, devices="cpu", timeout=1800) as pool:
                for step in range(args.repeat):
                    rounds.append(pool.run(rank_round, server.endpoint, volume, step, args.mb_per_rank, scratch))
        _report(args, rounds, _file_system(scratch))


def _report(args: argparse.Namespace, rounds: list[list[dict[str, float]]], disk: str) -> None:
    def median(name: str) -> float:
        return statistics.median(r[0][name] for r in rounds)  # rank 0's: barrier to barrier, the slower rank's

    total_mb = 2 * max(TENSOR_MB, args.mb_per_rank // TENSOR_MB * TENSOR_MB)
    caps = f"bandwidth {args.bandwidth / 1e6:g} MB/s, per connection {args.connection_bandwidth / 1e6:g} MB/s"
    print(f"checkpoint of {total_mb} MB (2 ranks, gloo), median of {args.repeat}; times taken on a shared machine")
    print(f"  S3 test server on 127.0.0.1: latency median {args.latency * 1000:g} ms (sigma 0.6), {caps} (0: none)")
    print(f"  local disk (staging, torch.save's file): {disk}; {os.cpu_count()} CPUs shared with the server")
    for what in ("save", "load"):
        ours, base = median(f"ours {what}"), median(f"baseline {what}")
        each = ", ".join(f"{r[0][f'ours {what}']:.2f}/{r[0][f'baseline {what}']:.2f}" for r in rounds)
        print(
            f"  {what}: UCVolume{'Writer' if what == 'save' else 'Reader'} {ours:6.2f} s ({total_mb / ours:6.1f} MB/s)"
            f"   torch.{what} + plain {'upload' if what == 'save' else 'download'} {base:6.2f} s"
            f" ({total_mb / base:6.1f} MB/s)   ratio {ours / base:.2f} (target <= 1.00)"
        )
        print(f"    each round, ours/baseline: {each} s")
    blocked, sync = median("async blocked"), median("ours save")
    print(
        f"  async_save: blocked {blocked:6.3f} s of a {median('async total'):6.2f} s save;"
        f" {100 * blocked / sync:.1f}% of the sync save's {sync:.2f} s (target < 10%)"
    )


if __name__ == "__main__":
    sys.exit(main())
