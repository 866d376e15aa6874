"""What a local volume read in place costs per file: the dataset's own work on a warm epoch's hot path.

``UCVolumeDataset`` reads a local (``file://``) volume where it lies. Every file it yields is checked
first without following symlinks (an ``openat`` walk from the volume's root, then ``fstatat``), and a
built-in decoder reads through the descriptor that walk opened. This measures, in one process and
without DataLoader workers (so the dataset's per-file microseconds are all that is timed):

1. the cost floor: a plain Python loop making the same path strings, nothing checked;
2. the dataset yielding paths, files at the volume's root (one component to check);
3. the same, files three folders below the root (``train/<class>/<file>``: three ``openat`` more);
4. the dataset decoding each file with ``decode_bytes`` (a read of 2 KiB per file), files at the root;
5. a plain loop reading the same files by path (the reference for 4).

Passes alternate between the cases, round by round, and each case's median per-file time is
reported; the dataset's cost is its median minus the reference's, round by round. Run it on the code
before a change and after (``PYTHONPATH=<old tree>``) to compare: it uses only the public API.

Usage: python benchmarks/volume_in_place.py [--files N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

CLASSES = 10


def build(count: int) -> tuple[str, str, list[str], list[str]]:
    """A flat volume and a nested one of ``count`` 2 KiB files each: their /Volumes paths and files."""
    from uc_jupyter.catalog import get_catalog

    cat = get_catalog()
    cat.create_catalog("main")
    cat.create_schema("main.bench")
    flat = cat.create_volume("main.bench.flat")
    nested = cat.create_volume("main.bench.nested")
    flat_root = Path(flat.storage_location.removeprefix("file://"))
    nested_root = Path(nested.storage_location.removeprefix("file://")) / "train"
    flat_files, nested_files = [], []
    for i in range(count):
        path = flat_root / f"f{i:06d}.bin"
        path.write_bytes(os.urandom(2048))
        flat_files.append(str(path))
        deep = nested_root / f"c{i % CLASSES}" / "part" / f"f{i:06d}.bin"
        deep.parent.mkdir(parents=True, exist_ok=True)
        deep.write_bytes(os.urandom(2048))
        nested_files.append(str(deep))
    return flat.path, f"{nested.path}/train", sorted(flat_files), sorted(nested_files)


def per_file(run: Callable[[], int]) -> float:
    """Seconds per item of one pass."""
    start = time.perf_counter()
    n = run()
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--files", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        from uc_jupyter.data import UCVolumeDataset, decode_bytes, map_paths

        flat_path, nested_path, flat_files, _ = build(args.files)
        flat = UCVolumeDataset(flat_path)
        nested = UCVolumeDataset(nested_path, recursive=True)
        decoded = map_paths(UCVolumeDataset(flat_path), decode_bytes)
        root = flat_files[0].rsplit("/", 1)[0]
        names = [p.rsplit("/", 1)[1] for p in flat_files]

        def floor() -> int:
            return sum(1 for _ in (f"{root}/{name}" for name in names))

        def read_by_path() -> int:
            count = 0
            for path in flat_files:
                with open(path, "rb") as handle:
                    count += bool(handle.read())
            return count

        cases: dict[str, Callable[[], int]] = {
            "loop making the paths (floor)": floor,
            "dataset yields paths, flat": lambda: sum(1 for _ in flat),
            "dataset yields paths, 3 folders deep": lambda: sum(1 for _ in nested),
            "loop reading each file by path": read_by_path,
            "dataset decode_bytes, flat": lambda: sum(1 for _ in decoded),
        }
        for run in cases.values():  # warm-up: page cache, first-use costs
            run()
        times: dict[str, list[float]] = {name: [] for name in cases}
        for _ in range(args.rounds):
            for name, run in cases.items():
                times[name].append(per_file(run))
        print(f"{args.files} files of 2 KiB per volume, {args.rounds} alternating rounds, no DataLoader workers")
        print(f"{'case':<40} {'us/file':>9} {'over reference':>15}")
        references = {
            "dataset yields paths, flat": "loop making the paths (floor)",
            "dataset yields paths, 3 folders deep": "loop making the paths (floor)",
            "dataset decode_bytes, flat": "loop reading each file by path",
        }
        for name, values in times.items():
            reference = references.get(name)
            extra = ""
            if reference is not None:
                over = statistics.median(v - r for v, r in zip(values, times[reference], strict=True))
                extra = f"{over * 1e6:+14.2f}"
            print(f"{name:<40} {statistics.median(values) * 1e6:9.2f} {extra:>15}")


if __name__ == "__main__":
    main()
