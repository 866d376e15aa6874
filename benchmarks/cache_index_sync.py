"""What syncing the cache's index to the disk costs a cold epoch: the index as it is (not synced, see
``uc_jupyter/data/cache/disk.py``) against the same index synced (SQLite's ``synchronous = NORMAL``:
each checkpoint of its log, every 64 pages, syncs the log and the database), side by side in one run.

The conditions (one run, one machine; the numbers compare only within a run):
- ``--files`` PNG images (``volume_decode.py``'s: mean about 18 KiB) on the S3 test server in its own
  process on 127.0.0.1, at a short latency (``--latency-mean``, 1 ms) and a wide pipe, so that what the
  loader does per file, and not the store, decides the epoch;
- ``UCVolumeDataset`` with a fresh cache each round, shuffled, batch 64, 2 DataLoader workers, the
  paths handed to a loop that does nothing with them; epoch 1 timed from the dataset's construction;
- rounds alternate the two cases, each round starting with the other one; medians reported, with the
  loader's CPU per file (this process and its workers). A sync is a wait, not CPU, but it holds the
  index's write lock meanwhile: every stream of every process that needs the index waits with it.

Usage: python benchmarks/cache_index_sync.py [--files 3000] [--rounds 5] [--latency-mean 0.001]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from volume_decode import remote_volume, write_images
from volume_loading import BATCH_SIZE, SEED, _cpu_seconds, exit_on_sigterm

CASES = ("not synced (now)", "synced (before)")


def epoch(volume: str, cache: Path, synced: bool, workers: int) -> tuple[float, float, int]:
    """One cold epoch: (seconds, CPU seconds of this process and its workers, files)."""
    from uc_jupyter.data import DataLoader, UCVolumeDataset
    from uc_jupyter.data.cache import disk

    kept = disk.PRAGMAS
    if synced:  # the index made now keeps these in its store, pickled to the workers with it
        disk.PRAGMAS = tuple(p for p in kept if "synchronous" not in p)
    try:
        cpu, began = _cpu_seconds(), time.perf_counter()
        dataset = UCVolumeDataset(volume, recursive=True, shuffle=True, seed=SEED, cache_dir=cache)
    finally:
        disk.PRAGMAS = kept
    loader = DataLoader(
        dataset, batch_size=BATCH_SIZE, num_workers=workers, collate_fn=list, persistent_workers=False, mlflow=False
    )
    files = 0
    batches = iter(loader)
    try:
        for batch in batches:
            files += len(batch)
    finally:
        del batches  # joins the workers, so that their CPU is counted
    return time.perf_counter() - began, _cpu_seconds() - cpu, files


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=3000, help="images (3000)")
    parser.add_argument("--rounds", type=int, default=5, help="epochs of each case, alternated (5)")
    parser.add_argument("--latency-mean", type=float, default=0.001, help="mean seconds per request (0.001)")
    parser.add_argument("--bandwidth", type=float, default=1e9, help="bytes/s, all connections (1e9)")
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers (2)")
    args = parser.parse_args(argv)
    if args.files < BATCH_SIZE or args.rounds < 1 or args.workers < 1:
        parser.error(f"--files must be >= {BATCH_SIZE}, --rounds >= 1, --workers >= 1")
    exit_on_sigterm(os.getpid())
    tmp = Path(tempfile.mkdtemp(prefix="uc-bench-index-"))
    try:
        write_images(tmp / "s3" / "images", args.files)
        print(
            f"{args.files} PNGs, a cold epoch each round: batch {BATCH_SIZE}, {args.workers} workers, shuffle, "
            f"paths handed out; store latency mean {args.latency_mean * 1e3:g} ms, {args.bandwidth / 1e6:g} MB/s; "
            f"{os.cpu_count()} CPUs",
            flush=True,
        )
        seconds: dict[str, list[float]] = {case: [] for case in CASES}
        cpu: dict[str, list[float]] = {case: [] for case in CASES}
        with remote_volume(tmp / "s3", args) as (_, volume):
            for round_ in range(args.rounds):
                for case in CASES[round_ % 2 :] + CASES[: round_ % 2]:
                    cache = tmp / "cache"
                    took, used, files = epoch(volume, cache, case == CASES[1], args.workers)
                    shutil.rmtree(cache, ignore_errors=True)
                    seconds[case].append(took)
                    cpu[case].append(used / max(files, 1))
                print(f"  round {round_ + 1}: " + ", ".join(f"{c} {seconds[c][-1]:.2f} s" for c in CASES), flush=True)
        print()
        print(f"{'the cache index':<22} {'epoch 1 (s)':>12} {'loader CPU ms/file':>19}")
        for case in CASES:
            print(f"{case:<22} {statistics.median(seconds[case]):>12.2f} {statistics.median(cpu[case]) * 1e3:>19.3f}")
        ratios = [a / b for a, b in zip(seconds[CASES[0]], seconds[CASES[1]], strict=True)]
        print(f"epoch 1, not synced / synced: {statistics.median(ratios):.2f} (median of the rounds' ratios)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
