"""Catalog round trips over a schema of 10,000 tables: the embedded catalog, the same catalog over REST
(``RestCatalog`` + a ``uc-jupyter serve`` process), and the full scan the per-object checks replaced,
side by side in one process run.

Cases (each timed per call, rounds alternated so a busy spell of the machine weighs on all alike):
``get_table`` as the metastore admin (owner of everything) and as ``alice`` (USE CATALOG, USE SCHEMA and
SELECT on one table, the one she gets), ``list_tables`` of the schema as each, and the construction of
a ``UCVolumeDataset`` over a volume of 1,000 files as alice (READ VOLUME; over REST that is a get, a
vend and the listing). Columns: the embedded catalog (per-object visibility), the old full scan
(:func:`uc_jupyter.catalog.rules.privileges.visible` over every securable on each call), REST, and REST's
ratio to embedded; a raw keep-alive ``http.client`` GET of the same table shows the transport's own
floor. Targets (issue 15): a call under 5 ms on 127.0.0.1, a listing of 10,000 under 1 s.

The server is a separate process, as in use: client and server do not share one interpreter's lock.
Setup: one real table made through the API, then its metastore row copied 9,999 times under new names
and ids by SQL (creating 10,000 Delta tables would take minutes; these calls read only metadata rows,
so copies sharing one storage location measure the same thing).

Usage: python benchmarks/catalog_round_trips.py [--tables N] [--files F] [--rounds R] [--calls C]
"""

from __future__ import annotations

import argparse
import http.client
import os
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa

from uc_jupyter.catalog import Catalog, as_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.tokens import TokenStore
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.catalog.rules.names import SecurableName
from uc_jupyter.catalog.rules.privileges import SecurableKind
from uc_jupyter.data.volume.dataset import UCVolumeDataset
from uc_jupyter.testing.served import serve_process

API = "/api/2.1/unity-catalog"
VOLUME = "/Volumes/main/bench/images"
CALLS = ("get_table admin", "get_table alice", "list_tables admin", "list_tables alice", "UCVolumeDataset alice")


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


def build(root: Path, tables: int, files: int) -> str:
    """The schema ``main.bench`` with ``tables`` tables and the volume ``images`` of ``files`` small
    files; returns the name of the one table alice may read (she may read the volume too)."""
    with as_principal("admin"):
        cat = LocalCatalog(root)
        cat.create_principal("alice")
        cat.create_catalog("main")
        cat.create_schema("main.bench")
        cat.create_table("main.bench.t00000", pa.table({"x": [1, 2, 3]}))
        folder = Path(cat.create_volume("main.bench.images").storage_location.removeprefix("file://"))
    for i in range(files):
        (folder / f"f{i:05d}.bin").write_bytes(b"x" * 64)
    with sqlite3.connect(root / "metastore.db") as conn:
        # Every column copied but the key and the stored id (each copy is an object of its own).
        columns = [row[1] for row in conn.execute("PRAGMA table_info(securables)")]
        picked = {"key": "?", "id": "lower(hex(randomblob(16)))"}
        chosen = ", ".join(picked.get(c, c) for c in columns)
        conn.executemany(
            f"INSERT INTO securables ({', '.join(columns)}) SELECT {chosen} FROM securables "
            "WHERE key = 'main.bench.t00000'",
            [(f"main.bench.t{i:05d}",) for i in range(1, tables)],
        )
    granted = f"main.bench.t{tables // 2:05d}"
    with as_principal("admin"):
        cat.grant("main", "USE CATALOG", "alice")
        cat.grant("main.bench", "USE SCHEMA", "alice")
        cat.grant(granted, "SELECT", "alice")
        cat.grant("main.bench.images", "READ VOLUME", "alice")
    return granted


@contextmanager
def serving(home: str) -> Iterator[str]:
    """``uc-jupyter serve`` on a free port of 127.0.0.1 over ``home``: its URL, until the block ends."""
    process, url = serve_process(Path(home), principal="benchmark-server")
    try:
        yield url
    finally:
        process.terminate()
        process.communicate(timeout=60)


def raw_get(url: str, token: str, path: str) -> Callable[[], object]:
    """A GET of ``path`` on one keep-alive connection, reading the whole answer: the transport's floor.
    The server closes a connection idle for 5 s (uvicorn's keep-alive), as happens between rounds:
    then the call connects again, as any pooled client would."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    conn = [http.client.HTTPConnection(*address)]
    headers = {"Authorization": f"Bearer {token}"}

    def run() -> object:
        for attempt in (1, 2):
            try:
                conn[0].request("GET", API + path, headers=headers)
                response = conn[0].getresponse()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                conn[0].close()
                conn[0] = http.client.HTTPConnection(*address)
                if attempt == 2:
                    raise
        body = response.read()
        assert response.status == 200, body
        return body

    return run


def as_(principal: str, call: Callable[[], object]) -> Callable[[], object]:
    def run() -> object:
        with as_principal(principal):
            return call()

    return run


def cases_for(cat: Catalog, label: str, granted: str) -> dict[str, Callable[[], object]]:
    return {
        f"get_table admin ({label})": as_("admin", partial(cat.get_table, "main.bench.t00001")),
        f"get_table alice ({label})": as_("alice", partial(cat.get_table, granted)),
        f"list_tables admin ({label})": as_("admin", partial(cat.list_tables, "main.bench")),
        f"list_tables alice ({label})": as_("alice", partial(cat.list_tables, "main.bench")),
        f"UCVolumeDataset alice ({label})": as_("alice", partial(UCVolumeDataset, VOLUME, catalog=cat)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--files", type=int, default=1_000, help="files in the volume UCVolumeDataset lists")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5, help="calls per case and round")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.environ["UC_JUPYTER_HOME"] = home
        start = time.perf_counter()
        granted = build(Path(home), args.tables, args.files)
        print(f"built {args.tables} tables and {args.files} volume files in {time.perf_counter() - start:.1f} s")
        fast, full = LocalCatalog(home), FullScanCatalog(home)
        with as_principal("admin"):
            store = TokenStore(fast)
            tokens = {who: store.create(who)[1] for who in ("admin", "alice")}
        load_before = os.getloadavg()
        with serving(home) as url:
            rest = RestCatalog(url, tokens["admin"], token_for=tokens.get)
            try:
                for cat in (fast, full, rest):
                    with as_principal("admin"):
                        assert len(cat.list_tables("main.bench")) == args.tables, cat
                    with as_principal("alice"):
                        assert [t.name for t in cat.list_tables("main.bench")] == [granted.rsplit(".", 1)[1]], cat
                        assert len(UCVolumeDataset(VOLUME, catalog=cat)) == args.files, cat
                with as_principal("alice"):  # the wire carries milliseconds: compare what both keep whole
                    shown = [(t.name, t.owner, t.storage_location) for t in rest.list_tables("main.bench")]
                    assert shown == [(t.name, t.owner, t.storage_location) for t in fast.list_tables("main.bench")]
                cases = {
                    **cases_for(fast, "embedded", granted),
                    **cases_for(full, "full scan", granted),
                    **cases_for(rest, "REST", granted),
                    "get_table admin (raw HTTP)": raw_get(url, tokens["admin"], "/tables/main.bench.t00001"),
                }
                for run in cases.values():  # warm-up: page cache, imports, connections
                    run()
                results = per_call(args.rounds, args.calls, cases)
            finally:
                rest.close()
        load_after = os.getloadavg()
    report(args, results, load_before[0], load_after[0])


def report(args: argparse.Namespace, results: dict[str, float], load_before: float, load_after: float) -> None:
    print(
        f"{args.tables} tables in one schema, {args.files} files in the volume; median of {args.rounds} rounds "
        f"of {args.calls} calls per case; {os.cpu_count()} cores, load average {load_before:.2f} before, "
        f"{load_after:.2f} after; server: a uc-jupyter serve process on 127.0.0.1"
    )
    print(f"{'call':<24} {'embedded ms':>12} {'full scan ms':>13} {'REST ms':>10} {'REST/embedded':>14}")
    for call in CALLS:
        local, old, rest = (results[f"{call} ({label})"] for label in ("embedded", "full scan", "REST"))
        print(f"{call:<24} {local * 1e3:12.2f} {old * 1e3:13.2f} {rest * 1e3:10.2f} {rest / local:13.1f}x")
    floor = results["get_table admin (raw HTTP)"]
    print(f"get_table admin as a raw keep-alive HTTP GET (the transport's floor): {floor * 1e3:.2f} ms")
    for label in ("embedded", "REST"):
        get_worst = max(results[f"get_table {who} ({label})"] for who in ("admin", "alice"))
        list_worst = max(results[f"list_tables {who} ({label})"] for who in ("admin", "alice"))
        print(f"{label}: get_table {get_worst * 1e3:.2f} ms per call (target < 5 ms): {_verdict(get_worst < 0.005)}")
        print(f"{label}: list_tables {list_worst:.3f} s per listing (target < 1 s): {_verdict(list_worst < 1.0)}")


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


if __name__ == "__main__":
    main()
