"""Catalog metadata calls over a schema of 10,000 tables: the per-object visibility checks against the
full scan they replaced, side by side in one process run.

Cases (each timed per call, rounds alternated so a busy spell of the machine weighs on all alike):
``get_table`` as the metastore admin (owner of everything) and as ``alice`` (USE CATALOG, USE SCHEMA and
SELECT on one table, the one she gets), and ``list_tables`` of the schema as each. The baseline is the
same catalog with visibility computed the old way: :func:`uc_jupyter.catalog.privileges.visible` over
every securable and every grant of the principal, on each call. Targets (issue 15): get_table under
5 ms per call, list_tables under 1 s.

Setup: one real table made through the API, then its metastore row copied 9,999 times under new names
by SQL (creating 10,000 Delta tables would take minutes; these calls read only metadata rows, so copies
sharing one storage location measure the same thing).

Usage: python benchmarks/catalog_round_trips.py [--tables N] [--rounds R]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import pyarrow as pa

from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.local import LocalCatalog
from uc_jupyter.catalog.names import SecurableName
from uc_jupyter.catalog.privileges import SecurableKind


class FullScanCatalog(LocalCatalog):
    """The baseline: every visibility check reads the whole metastore (the code before issue 15)."""

    def _is_visible(self, conn: sqlite3.Connection, name: SecurableName, kind: SecurableKind) -> bool:
        return ".".join(name.parts) in self._visible_keys(conn)  # the metastore's key of ``name``

    def _visible_children(
        self, conn: sqlite3.Connection, parent: SecurableName | None, rows: Sequence[sqlite3.Row]
    ) -> set[str]:
        return self._visible_keys(conn)


def per_call(rounds: int, calls: int, cases: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median over ``rounds`` of the mean seconds per call, each round running every case in turn."""
    times: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, run in cases.items():
            start = time.perf_counter()
            for _ in range(calls):
                run()
            times[name].append((time.perf_counter() - start) / calls)
    return {name: statistics.median(seconds) for name, seconds in times.items()}


def build(root: Path, tables: int) -> str:
    """The schema ``main.bench`` with ``tables`` tables; returns the name of the one alice may read."""
    with as_principal("admin"):
        cat = LocalCatalog(root)
        cat.create_principal("alice")
        cat.create_catalog("main")
        cat.create_schema("main.bench")
        cat.create_table("main.bench.t00000", pa.table({"x": [1, 2, 3]}))
    with sqlite3.connect(root / "metastore.db") as conn:
        conn.executemany(
            "INSERT INTO securables SELECT ?, kind, parent, owner, storage_location, managed, storage_options, "
            "columns, comment, created_at FROM securables WHERE key = 'main.bench.t00000'",
            [(f"main.bench.t{i:05d}",) for i in range(1, tables)],
        )
    granted = f"main.bench.t{tables // 2:05d}"
    with as_principal("admin"):
        cat.grant("main", "USE CATALOG", "alice")
        cat.grant("main.bench", "USE SCHEMA", "alice")
        cat.grant(granted, "SELECT", "alice")
    return granted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5, help="calls per case and round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        start = time.perf_counter()
        granted = build(Path(home), args.tables)
        print(f"built {args.tables} tables in {time.perf_counter() - start:.1f} s")
        fast, full = LocalCatalog(home), FullScanCatalog(home)
        with as_principal("admin"):
            assert len(fast.list_tables("main.bench")) == len(full.list_tables("main.bench")) == args.tables
        with as_principal("alice"):
            assert [t.name for t in fast.list_tables("main.bench")] == [granted.rsplit(".", 1)[1]]
            assert fast.list_tables("main.bench") == full.list_tables("main.bench")

        def as_(principal: str, call: Callable[[], object]) -> Callable[[], object]:
            def run() -> object:
                with as_principal(principal):
                    return call()

            return run

        cases: dict[str, Callable[[], object]] = {}
        for label, cat in (("per object", fast), ("full scan", full)):
            cases[f"get_table admin ({label})"] = as_("admin", partial(cat.get_table, "main.bench.t00001"))
            cases[f"get_table alice ({label})"] = as_("alice", partial(cat.get_table, granted))
            cases[f"list_tables admin ({label})"] = as_("admin", partial(cat.list_tables, "main.bench"))
            cases[f"list_tables alice ({label})"] = as_("alice", partial(cat.list_tables, "main.bench"))
        for run in cases.values():  # warm-up: page cache, imports
            run()
        results = per_call(args.rounds, args.calls, cases)
    print(f"{args.tables} tables in one schema; median of {args.rounds} rounds of {args.calls} calls per case")
    print(f"{'call':<24} {'per object ms':>14} {'full scan ms':>13} {'speed-up':>9}")
    for call in ("get_table admin", "get_table alice", "list_tables admin", "list_tables alice"):
        new, old = results[f"{call} (per object)"], results[f"{call} (full scan)"]
        print(f"{call:<24} {new * 1e3:14.2f} {old * 1e3:13.2f} {old / new:8.1f}x")
    get_worst = max(results["get_table admin (per object)"], results["get_table alice (per object)"])
    list_worst = max(results["list_tables admin (per object)"], results["list_tables alice (per object)"])
    print(f"get_table {get_worst * 1e3:.2f} ms per call (target < 5 ms): {_verdict(get_worst < 0.005)}")
    print(f"list_tables {list_worst:.3f} s per listing (target < 1 s): {_verdict(list_worst < 1.0)}")


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
