"""Integrity under contention: several processes changing the same tables at once, and processes that
die half-way. Before issue 13, four processes creating, appending, dropping and granting for 10 s left
76 orphan table folders and 218 raw DeltaError/TableNotFoundError/kernel-text errors, and an append
racing a drop wrote its rows into the dropped table's folder. Each test failed before and holds now."""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from uc_jupyter.catalog import AlreadyExists, CatalogError, NotFound
from uc_jupyter.catalog.embedded.entry_locks import EntryLocks
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.tables.delta import read_arrow
from uc_jupyter.testing.waits import wait_until

TABLES = ("main.ml.t0", "main.ml.t1")
OPERATIONS_PER_PROCESS = 30
EXPECTED_ERRORS = (AlreadyExists, NotFound)


def _churn(home: str, seed: int, results: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    """One process's share of the churn: a seeded sequence of changes and reads; report every error."""
    os.environ["UC_JUPYTER_PRINCIPAL"] = "admin"
    cat = LocalCatalog(home)
    rng = random.Random(seed)
    errors: list[tuple[str, str]] = []
    for _ in range(OPERATIONS_PER_PROCESS):
        name = rng.choice(TABLES)
        rows = pa.table({"x": [rng.randrange(100) for _ in range(3)]})
        action = rng.choice(["create", "append", "overwrite", "drop", "grant", "read", "read"])
        try:
            if action == "create":
                cat.create_table(name, rows)
            elif action in ("append", "overwrite"):
                cat.create_table(name, rows, mode=action)  # type: ignore[arg-type]
            elif action == "drop":
                cat.drop_table(name)
            elif action == "grant":
                cat.grant(name, "SELECT", "alice")
            else:
                read_arrow(name, catalog=cat)
        except Exception as exc:
            errors.append((type(exc).__name__, f"{action}: {exc}"))
    results.put(errors)


def test_four_processes_churning_two_tables_leave_no_orphans_and_only_catalog_errors(isolated_home: Path) -> None:
    cat = LocalCatalog(isolated_home)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    cat.create_principal("alice")
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    workers = [context.Process(target=_churn, args=(str(isolated_home), seed, results)) for seed in range(4)]
    for worker in workers:
        worker.start()
    errors = [error for _ in workers for error in results.get(timeout=240)]
    for worker in workers:
        worker.join(timeout=60)
        assert worker.exitcode == 0
    allowed = {e.__name__ for e in EXPECTED_ERRORS}
    for kind, message in errors:
        assert kind in allowed, f"{kind}: {message}"
        assert "\n" not in message and any(t in message for t in TABLES), message
    # Every folder under storage/tables belongs to a table, nothing is pending, every table reads.
    owned = {t.storage_location.removeprefix("file://") for t in cat.list_tables("main.ml")}
    on_disk = {str(p) for p in (isolated_home / "storage" / "tables").iterdir()}
    assert on_disk == owned
    for table in cat.list_tables("main.ml"):
        read_arrow(table.full_name, catalog=cat)
    assert cat.sweep() == []


def test_a_drop_waits_for_an_append_under_way_and_the_append_never_lands_in_a_dropped_table(
    isolated_home: Path,
) -> None:
    cat = LocalCatalog(isolated_home)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    cat.create_table("main.ml.t", pa.table({"x": [1]}))
    folder = Path(cat.get_table("main.ml.t").storage_location.removeprefix("file://"))
    # Another process is in the middle of a change of main.ml.t: it holds the entry's lock.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from uc_jupyter.catalog.embedded.entry_locks import EntryLocks\n"
            f"with EntryLocks({str(isolated_home)!r}).hold(['main.ml.t'], what='t'):\n"
            "    print('held', flush=True); sys.stdin.readline()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        dropped = threading.Event()
        dropper = threading.Thread(target=lambda: (cat.drop_table("main.ml.t"), dropped.set()))
        dropper.start()
        assert not dropped.wait(0.5), "the drop went ahead while another process was changing the table"
        assert folder.is_dir() and cat.get_table("main.ml.t")
    finally:
        assert holder.stdin is not None
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    dropper.join(timeout=60)
    assert dropped.is_set() and not folder.exists()
    with pytest.raises(NotFound):
        cat.get_table("main.ml.t")
    # An append after the drop creates a new table in a new folder; nothing is written into the old one.
    cat.create_table("main.ml.t", pa.table({"x": [2]}), mode="append")
    assert not folder.exists() and read_arrow("main.ml.t", catalog=cat).to_pylist() == [{"x": 2}]


def test_an_entry_held_too_long_is_a_one_line_error_naming_it(isolated_home: Path) -> None:
    now = [0.0]

    def sleep(seconds: float) -> None:  # an injected clock: no real waiting
        now[0] += seconds

    holder = EntryLocks(isolated_home)
    waiter = EntryLocks(isolated_home, timeout=30.0, clock=lambda: now[0], sleep=sleep)
    with (
        holder.hold(["main.ml.t"], what="table main.ml.t"),
        pytest.raises(CatalogError) as busy,
        waiter.hold(["main.ml.t"], what="table main.ml.t"),
    ):
        pass
    assert str(busy.value) == "table main.ml.t is busy: another process has been changing it for over 30 s; " + (
        "try again when it is done"
    )
    assert now[0] >= 30.0
    with waiter.hold(["main.ml.t"], what="table main.ml.t"):  # released with its holder
        pass


def test_storage_of_a_process_killed_during_a_create_is_swept(isolated_home: Path) -> None:
    cat = LocalCatalog(isolated_home)
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    tables = isolated_home / "storage" / "tables"
    # A big table: its Delta write takes long enough to be killed in the middle.
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import pyarrow as pa; from uc_jupyter.catalog.embedded.local import LocalCatalog\n"
            f"cat = LocalCatalog({str(isolated_home)!r})\n"
            "cat.create_table('main.ml.big', pa.table({'x': list(range(30_000_000))}))",
        ],
        env={**os.environ, "UC_JUPYTER_PRINCIPAL": "admin"},
    )
    try:

        def writing() -> bool:
            assert writer.poll() is None, "the writer ended before its table folder appeared"
            return tables.exists() and any(tables.iterdir())

        wait_until(writing, "the writer to start writing its table folder", 120, interval_s=0.01)
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait(timeout=30)
    [orphan] = list(tables.iterdir())
    with pytest.raises(NotFound):
        cat.get_table("main.ml.big")
    removed = cat.sweep()  # which opening the catalog in a new process also does
    assert [Path(r.removeprefix("file://")) for r in removed] == [orphan]
    assert not orphan.exists()
    assert cat.sweep() == []
