"""What a warm pass through the cache costs per file: the stages a cache hit walks, on the loop's thread.

A remote volume's warm epoch is all hits: each file is looked up in a window (pinned, proven by its
seal), handed out, counted, kept pinned until the loop has moved past its batch, and the DataLoader
times and counts each batch. This measures that walk per file, in one process and without
DataLoader workers (so nothing but it is timed), on a local volume read through the cache
(``cache="always"``: the same stages as object storage, with a local copy as the download):

1. the cost floor: a plain Python loop over the same cached paths, nothing checked or pinned;
2. the dataset iterated directly (``iter(ds)``), yielding paths;
3. ``uc_jupyter.data.DataLoader`` over it, ``batch_size=64``, ``num_workers=0``: every batch timed
   and counted, the files of the batches the loop moved past released;
4. the same with ``decode_bytes`` (a read of 2 KiB per file), and a plain loop reading the cached
   files by path as its reference.

Passes alternate between the cases, round by round; each case's median per-file time is reported,
and the cost over the floor (or, for 4, over its reference). Run it on the code before a change and
after (``PYTHONPATH=<old tree>``) to compare: it uses only the public API.

Usage: python benchmarks/volume_cached.py [--files N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from loader_overhead import build_volume  # the same volume: 2 KiB files of random bytes


def per_file(run: Callable[[], int]) -> float:
    """Seconds per item of one pass."""
    start = time.perf_counter()
    n = run()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    home = tempfile.mkdtemp(prefix="uc-bench-cached-")
    os.environ["UC_JUPYTER_HOME"] = home  # an embedded catalog and cache of its own
    from uc_jupyter.data import DataLoader, UCVolumeDataset, decode_bytes

    path = build_volume(args.files)
    plain = UCVolumeDataset(path, cache="always", min_free_bytes=0)
    decoded = UCVolumeDataset(path, cache="always", min_free_bytes=0, transform=decode_bytes)
    paths = list(plain)  # the first pass copies every file into the cache; the rest are hits
    assert len(paths) == args.files
    assert len(list(decoded)) == args.files  # its files are hits already
    loader = DataLoader(plain, batch_size=64, num_workers=0, mlflow=False)
    decoding = DataLoader(decoded, batch_size=64, num_workers=0, mlflow=False)

    def floor() -> int:
        return sum(1 for p in paths if p)

    def direct() -> int:
        return sum(1 for _ in plain)

    def batched() -> int:
        return sum(len(batch) for batch in loader)

    def decoded_batches() -> int:
        return sum(len(batch) for batch in decoding)

    def read_by_path() -> int:
        return sum(1 for p in paths if Path(p).read_bytes())

    cases = {
        "floor: a loop over the paths": floor,
        "dataset, iterated directly": direct,
        "DataLoader, batch 64, no workers": batched,
        "DataLoader + decode_bytes": decoded_batches,
        "reference: read each file by path": read_by_path,
    }
    names = list(cases)
    times: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            times[name].append(per_file(cases[name]))
    median = {name: statistics.median(values) for name, values in times.items()}
    print(f"{args.files} cached files of 2 KiB, {args.rounds} rounds, medians per file:")
    for name in names:
        print(f"  {name:40s} {median[name] * 1e6:8.2f} us")
    print(f"  dataset's cost over the floor            {(median[names[1]] - median[names[0]]) * 1e6:8.2f} us")
    print(f"  DataLoader's cost over the floor         {(median[names[2]] - median[names[0]]) * 1e6:8.2f} us")
    print(f"  decoding loader's cost over reading      {(median[names[3]] - median[names[4]]) * 1e6:8.2f} us")


if __name__ == "__main__":
    main()
