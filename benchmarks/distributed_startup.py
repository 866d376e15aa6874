"""Starting ranks and calling them: RankPool against torchrun, side by side in one process run.

1. Cold start: a 2-rank pool started and a trivial all_reduce run, vs ``torchrun --standalone
   --nproc-per-node 2`` running a script that initialises the process group and does the same
   all_reduce (target: the pool no slower than torchrun).
2. Warm calls: ``pool.run(fn)`` of a trivial function, and ``pool.execute("x")`` of a trivial cell,
   on the started pool (target: under 50 ms each).

Usage: python benchmarks/distributed_startup.py [--ranks N] [--repeat R] [--calls C]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=200)
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


if __name__ == "__main__":
    main()
