"""What reading through the catalog costs Ray: ``ray.data.read_delta`` of a catalog table by name
(``catalog=uc_jupyter.ray.catalog()``: SELECT checked, the snapshot opened once more to refuse deletion
vectors) and ``uc_jupyter.ray.read_table`` (the project's splits, deletion vectors applied), each against
``ray.data.read_delta`` of the same table's raw path, side by side in one process run.

One table of the embedded catalog on local disk (16 files, ``--rows`` rows of an int, a float and a
string), read on a 2-node Ray cluster of this machine (``RayTestCluster``); a pass is the whole read,
counted in the driver (``Dataset.count()`` would answer from the log). Passes alternate between the
cases, round by round, each round starting with another case; each ratio is the median of the
per-round ratios to the raw read.

Usage: python benchmarks/ray_catalog.py [--rows N] [--rounds R]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from typing import Any

FILES = 16


def timed(read: Callable[[], Any]) -> float:
    """Rows per second of one whole read."""
    start = time.perf_counter()
    rows = sum(batch.num_rows for batch in read().iter_batches(batch_format="pyarrow", batch_size=None))
    return rows / (time.perf_counter() - start)


@contextlib.contextmanager
def ray_cluster() -> Iterator[None]:
    """This process connected to a 2-node Ray cluster of this machine (2 CPUs a node) for the block."""
    import ray

    from uc_jupyter.testing.ray_cluster import RayTestCluster

    with RayTestCluster(nodes=2, cpus_per_node=2) as cluster:
        ray.init(address=cluster.address, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        try:
            yield
        finally:
            ray.shutdown()


def alternating(cases: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Each case's rate per round, after one warm-up pass each (workers started, the page cache
    filled); each round starts with another case."""
    for run in cases.values():
        run()
    names = list(cases)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names[round_ % len(names) :] + names[: round_ % len(names)]:
            rates[name].append(cases[name]())
    return rates


def ratios(rates: dict[str, list[float]], unit: str, against: str) -> None:
    """Print each case's median rate and the median of its per-round ratios to the first case's."""
    first = next(iter(rates.values()))
    for name, values in rates.items():
        ratio = statistics.median(r / b for r, b in zip(values, first, strict=True))
        print(f"{name:36s} {statistics.median(values):10.0f} {unit}  {ratio:5.2f} x {against}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        import numpy as np
        import pyarrow as pa
        import ray

        import uc_jupyter.ray as ucray
        from uc_jupyter.catalog import get_catalog
        from uc_jupyter.storage.urls import delta_uri

        cat = get_catalog()
        cat.create_catalog("main")
        cat.create_schema("main.ml")
        per_file = args.rows // FILES
        for i in range(FILES):
            x = np.arange(i * per_file, (i + 1) * per_file)
            part = pa.table({"x": x, "f": x * 0.5, "s": pa.array(x.astype(str))})
            cat.create_table("main.ml.t", part, mode="error" if i == 0 else "append")
        path = delta_uri(cat.resolve_table("main.ml.t").storage_location)
        with ray_cluster():
            rates = alternating(
                {
                    "read_delta(path)": lambda: timed(lambda: ray.data.read_delta(path)),
                    "read_delta(name, catalog=)": lambda: timed(
                        lambda: ray.data.read_delta("main.ml.t", catalog=ucray.catalog(cat))
                    ),
                    "read_table(name)": lambda: timed(lambda: ucray.read_table("main.ml.t", catalog=cat)),
                },
                args.rounds,
            )
    print(f"{args.rows} rows in {FILES} files, 2 Ray nodes x 2 CPUs, {args.rounds} rounds")
    ratios(rates, "rows/s", "the raw read")


if __name__ == "__main__":
    main()
