"""Starting ranks and calling them: RankPool against torchrun, side by side in one process run.

1. Cold start: a 2-rank pool started and a trivial all_reduce run, vs ``torchrun --standalone
   --nproc-per-node 2`` running a script that initialises the process group and does the same
   all_reduce (target: the pool no slower than torchrun).
2. Warm calls: ``pool.run(fn)`` of a trivial function, and ``pool.execute("x")`` of a trivial cell,
   on the started pool (target: under 50 ms each).
3. Ray: a 4-rank pool on a real 2-node Ray cluster on this machine (2 CPUs a node, started before the
   timed span) against a local 4-rank pool, alternately: cold start (``RankPool(4, devices="cpu",
   cluster=...)``, ``start()`` and one all_reduce; the Ray pool connects to Ray itself, as a kernel
   would) and warm ``pool.run(noop)`` calls (targets: Ray cold start under 2x the local one, warm
   calls under 20 ms on both). Skipped, said so, where Ray is not installed (``pip install
   'uc_jupyter[ray]'``) or with ``--no-ray``.

Usage: python benchmarks/distributed_startup.py [--ranks N] [--repeat R] [--calls C] [--no-ray]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

SCRIPT = """
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.ones(1)
dist.all_reduce(t)
assert t.item() == dist.get_world_size()
dist.destroy_process_group()
"""


def all_reduce() -> float:
    import torch
    import torch.distributed as dist

    t = torch.ones(1)
    dist.all_reduce(t)
    return float(t.item())


def noop() -> None:
    return None


def cold_start(make: Callable[[], Any], ranks: int) -> float:
    """Seconds from making the pool to one all_reduce done on every rank (the pool is shut down after)."""
    started = time.perf_counter()
    pool = make()
    try:
        pool.start()
        assert pool.run(all_reduce) == [float(ranks)] * ranks
        return time.perf_counter() - started
    finally:
        pool.shutdown()


def warm_calls(pool: Any, calls: int) -> list[float]:
    """Seconds of each of ``calls`` ``pool.run(noop)`` on a started pool."""
    pool.run(noop)
    samples = []
    for _ in range(calls):
        started = time.perf_counter()
        pool.run(noop)
        samples.append(time.perf_counter() - started)
    return samples


def ray_connect(address: str) -> float:
    """Seconds to connect this process to the Ray cluster and disconnect: the part of a Ray pool's cold
    start that is Ray's own."""
    import logging

    import ray

    started = time.perf_counter()
    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
    ray.shutdown()
    return time.perf_counter() - started


def ray_against_local(repeat: int, calls: int) -> None:
    """Section 3: a 4-rank pool on 2 Ray nodes against a local 4-rank pool, in the same run."""
    from uc_jupyter.distributed import RankPool
    from uc_jupyter.testing.ray_cluster import RayTestCluster

    ranks = 4
    with RayTestCluster(nodes=2, cpus_per_node=2) as cluster:
        os.environ["UC_JUPYTER_RAY_ADDRESS"] = cluster.address
        try:
            cold: dict[str, list[float]] = {"local": [], "ray": [], "connect": []}
            for _ in range(repeat):  # alternate, so both see the same machine state
                cold["local"].append(cold_start(lambda: RankPool(ranks, devices="cpu"), ranks))
                cold["ray"].append(cold_start(lambda: RankPool(ranks, devices="cpu", cluster="ray"), ranks))
                cold["connect"].append(ray_connect(cluster.address))
            warm = {}
            with RankPool(ranks, devices="cpu") as pool:
                warm["local"] = warm_calls(pool, calls)
            with RankPool(ranks, devices="cpu", cluster="ray") as pool:
                warm["ray"] = warm_calls(pool, calls)
        finally:
            del os.environ["UC_JUPYTER_RAY_ADDRESS"]
        started_s = cluster.started_s
    local, ray = statistics.median(cold["local"]), statistics.median(cold["ray"])
    print(f"Ray pool, {ranks} ranks on 2 nodes x 2 CPUs (cluster up in {started_s:.1f} s, before the timed span):")
    print(f"  cold start + all_reduce (median of {repeat}):")
    print(f"    local RankPool        {local:7.3f} s")
    print(f"    Ray RankPool          {ray:7.3f} s   ratio {ray / local:.2f} (target < 2.00)")
    connect = statistics.median(cold["connect"])
    print(f"    ray.init + shutdown   {connect:7.3f} s   (connecting to Ray alone, for scale)")
    print(f"  warm run(noop) ({calls} each):")
    medians = {name: statistics.median(samples) for name, samples in warm.items()}
    for name, samples in warm.items():
        p95 = sorted(samples)[int(0.95 * len(samples))]
        print(f"    {name:5s} median {medians[name] * 1000:6.2f} ms   p95 {p95 * 1000:6.2f} ms   (target < 20 ms)")
    print(f"    ratio Ray / local {medians['ray'] / medians['local']:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--no-ray", action="store_true", help="skip section 3 (the Ray pool)")
    args = parser.parse_args()
    from uc_jupyter.distributed import RankPool

    torchrun = Path(sys.executable).with_name("torchrun")
    pool_times: list[float] = []
    torchrun_times: list[float] = []
    with tempfile.TemporaryDirectory() as scratch:
        script = Path(scratch) / "all_reduce.py"
        script.write_text(SCRIPT)
        env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
        for _ in range(args.repeat):  # alternate, so both see the same machine state
            started = time.perf_counter()
            subprocess.run(
                [str(torchrun), "--standalone", f"--nproc-per-node={args.ranks}", str(script)],
                check=True,
                env=env,
                capture_output=True,
            )
            torchrun_times.append(time.perf_counter() - started)
            started = time.perf_counter()
            pool = RankPool(args.ranks, devices="cpu")
            assert pool.run(all_reduce) == [float(args.ranks)] * args.ranks
            pool_times.append(time.perf_counter() - started)
            pool.shutdown()
    cold_pool, cold_torchrun = statistics.median(pool_times), statistics.median(torchrun_times)
    print(f"cold start + all_reduce, {args.ranks} ranks (median of {args.repeat}):")
    print(f"  torchrun --standalone   {cold_torchrun:7.3f} s")
    print(f"  RankPool                {cold_pool:7.3f} s   ratio {cold_pool / cold_torchrun:.2f} (target <= 1.00)")

    with RankPool(args.ranks, devices="cpu") as pool:
        pool.run(noop)
        timings = {}
        for name, call in (("run(noop)", lambda: pool.run(noop)), ("execute('x')", lambda: pool.execute("1"))):
            samples = []
            for _ in range(args.calls):
                started = time.perf_counter()
                call()
                samples.append(time.perf_counter() - started)
            timings[name] = samples
    print(f"warm calls on a started pool ({args.calls} each):")
    for name, samples in timings.items():
        median, p95 = statistics.median(samples), sorted(samples)[int(0.95 * len(samples))]
        print(f"  {name:13s} median {median * 1000:6.2f} ms   p95 {p95 * 1000:6.2f} ms   (target < 50 ms)")

    if args.no_ray:
        print("Ray pool: skipped (--no-ray)")
    elif importlib.util.find_spec("ray") is None:
        print("Ray pool: skipped (Ray is not installed: pip install 'uc_jupyter[ray]')")
    else:
        ray_against_local(args.repeat, args.calls)


if __name__ == "__main__":
    main()
