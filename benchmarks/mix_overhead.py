"""What mixing costs: a Mix of one source against that source alone, side by side in one process run.

One loader-bound job (the training loop does nothing, so every microsecond of the mix shows): a
local volume of small files read in place by ``UCVolumeDataset`` with a decoding transform, batches
of 64, two forked DataLoader workers. The two cases are the same dataset object, read through
``DataLoader(dataset)`` and through ``DataLoader(Mix([dataset], weights=[1]))``: the mix adds its
schedule, the per-sample interleave and its own position counting, and nothing else.

Passes alternate between the cases, round by round, each round starting with the other case; the
ratio is the median of the per-round ratios (a round's passes run back to back, so a busy spell of
the machine weighs on both sides). Target (issue 32 point 7): the mix within 2% of the source alone.

Usage: python benchmarks/mix_overhead.py [--files N] [--passes P]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from loader_overhead import BATCH, build_volume, decode


def timed_pass(loader: Any) -> float:
    """Samples per second of one whole pass."""
    start = time.perf_counter()
    n = sum(len(batch) for batch in loader)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--passes", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        from uc_jupyter.data import DataLoader, Mix, UCVolumeDataset

        dataset = UCVolumeDataset(build_volume(args.files), transform=decode)
        settings: dict[str, Any] = {
            "batch_size": BATCH,
            "num_workers": 2,
            "prefetch_factor": 4,
            "persistent_workers": True,
            "multiprocessing_context": "fork",
            "mlflow": False,
        }
        alone, mixed = "the source alone", "a Mix of that one source"
        loaders = {alone: DataLoader(dataset, **settings), mixed: DataLoader(Mix([dataset], [1]), **settings)}
        cases: dict[str, Callable[[], float]] = {
            name: (lambda loader=loader: timed_pass(loader)) for name, loader in loaders.items()
        }
        for run in cases.values():  # warm-up: start the persistent workers, fill the page cache
            run()
        rates: dict[str, list[float]] = {name: [] for name in cases}
        order = list(cases.items())
        for round_ in range(args.passes):
            for name, run in order[round_ % 2 :] + order[: round_ % 2]:
                rates[name].append(run())
        ratio = statistics.median([m / a for m, a in zip(rates[mixed], rates[alone], strict=True)])
        print(f"{args.files} files of 2 KiB read in place, batch {BATCH}, 2 workers, {args.passes} alternating passes")
        print(f"{'case':<28} {'samples/s':>12}")
        for name, values in rates.items():
            print(f"{name:<28} {statistics.median(values):12.0f}")
        cost = 1 - ratio
        verdict = "met" if cost < 0.02 else "MISSED"
        print(f"the mix / the source alone: {ratio:.3f} (cost {cost * 100:.2f}% of throughput, target < 2%): {verdict}")


if __name__ == "__main__":
    main()
