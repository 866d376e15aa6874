"""One Delta table of N rows x 10 columns read four ways, side by side in one process run.

1. ``table(name).toPandas()``: Spark Connect through the deltalake-backed Python data source.
2. ``spark.read.parquet(<the table's data files>).toPandas()``: Spark's native Parquet reader on the
   same files (the reference for 1; targets: 1 within 1.2x of 2).
3. ``UCTableDataset`` iterated in the process, batches of 8192 rows (no Spark): one epoch of a
   dataset made once (what each training epoch costs), and making it plus one epoch (making it
   reads and pins the snapshot).
4. A plain deltalake/pyarrow scan of the same columns (the reference for 3; target: 3 at >= 80% of
   its rows per second).

Usage: python benchmarks/table_loading.py [--rows N] [--repeat R]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa


def interleaved(repeat: int, cases: dict[str, Callable[[], int]]) -> dict[str, tuple[float, int]]:
    """Median seconds per case over ``repeat`` rounds, each round running every case once in turn, so
    a busy spell of the machine weighs on all cases alike; and the rows each case saw."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    rows: dict[str, int] = {}
    for _ in range(repeat):
        for name, run in cases.items():
            start = time.perf_counter()
            rows[name] = run()
            times[name].append(time.perf_counter() - start)
    return {name: (statistics.median(times[name]), rows[name]) for name in cases}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        os.environ.pop("UC_JUPYTER_SPARK_REMOTE", None)
        from deltalake import DeltaTable

        from uc_jupyter.catalog import get_catalog
        from uc_jupyter.data import UCTableDataset
        from uc_jupyter.tables import get_spark, table
        from uc_jupyter.tables.spark import stop_local_server

        rng = np.random.default_rng(0)
        data = pa.table({f"c{i}": rng.random(args.rows) for i in range(9)} | {"label": rng.integers(0, 10, args.rows)})
        cat = get_catalog()
        cat.create_catalog("main")
        cat.create_schema("main.bench")
        info = cat.create_table("main.bench.wide", data)
        location = info.storage_location.removeprefix("file://")
        spark = get_spark(progress=lambda line: print(line))
        try:
            files = DeltaTable(location).file_uris()
            made = UCTableDataset("main.bench.wide", batch_size=8192)  # made once, as in training
            cases: dict[str, Callable[[], int]] = {
                "table().toPandas() (data source)": lambda: len(table("main.bench.wide", spark=spark).toPandas()),
                "spark.read.parquet().toPandas()": lambda: len(spark.read.parquet(*files).toPandas()),
                "UCTableDataset made + one epoch": lambda: sum(
                    len(b["label"]) for b in UCTableDataset("main.bench.wide", batch_size=8192)
                ),
                "UCTableDataset epoch (8192-row batches)": lambda: sum(len(b["label"]) for b in made),
                "deltalake scan -> pyarrow": lambda: (
                    pa.RecordBatchReader.from_stream(DeltaTable(location).scan()).read_all().num_rows
                ),
            }
            for run in cases.values():  # warm-up: JVM, Python workers, page cache
                run()
            results = interleaved(args.repeat, cases)
        finally:
            stop_local_server()
        print(f"{args.rows} rows x 10 columns, median of {args.repeat}")
        print(f"{'case':<36} {'seconds':>9} {'rows/s':>12}")
        for name, (seconds, rows) in results.items():
            assert rows == args.rows, f"{name} saw {rows} rows"
            print(f"{name:<36} {seconds:9.3f} {rows / seconds:12.0f}")
        spark_ratio = results["table().toPandas() (data source)"][0] / results["spark.read.parquet().toPandas()"][0]
        dataset_share = results["deltalake scan -> pyarrow"][0] / results["UCTableDataset epoch (8192-row batches)"][0]
        print(f"data source vs spark.read.parquet: {spark_ratio:.2f}x (target <= 1.2x): {_verdict(spark_ratio <= 1.2)}")
        verdict = _verdict(dataset_share >= 0.8)
        print(f"UCTableDataset at {dataset_share:.0%} of the pyarrow scan (target >= 80%): {verdict}")


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
