"""Engines outside the project reading a real ``uc-jupyter serve``: polars, DuckDB, databricks-sdk and Ray.

One lake per test module: an enforcing moto (S3 + IAM + STS, :mod:`uc_jupyter.testing.moto_iam`) whose
bucket ``lake`` holds two external Delta tables, ``main.ml.a`` (x: 1, 2, 3) and ``main.ml.b`` (x: 10,
20), and a managed one on local storage, ``main.ml.loc`` (x: 7, 8); an in-process server whose storage
credential vends one IAM role per request, scoped to the one table's prefix. Principals (each with USE
CATALOG ``main`` and USE SCHEMA ``main.ml``):

- ``alice``: SELECT on ``a`` and ``loc``; ``b`` is not hers to read, nor to see;
- ``nosy``: MODIFY on ``a`` and ``loc`` and no SELECT: she sees both, and may not read them.

The engines get only a URL and a token, as a user would type them, and S3 reaches them only as the
keys the server vends: no AWS_* variable of the machine's is left in the environment (a developer's
keys would let an engine that falls back to its own credential chain read what the test says it
cannot).
"""

from __future__ import annotations

import concurrent.futures
import functools
import importlib
import multiprocessing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, ParamSpec

import pyarrow as pa
import pytest

from uc_jupyter.catalog import as_principal
from uc_jupyter.catalog.rest.client import RestCatalog
from uc_jupyter.testing.moto_iam import MotoIam, moto_iam
from uc_jupyter.testing.served import ADMIN, Served, serving

P = ParamSpec("P")

BUCKET = "lake"
REGION = "us-east-1"
ROWS = {"a": [1, 2, 3], "b": [10, 20], "loc": [7, 8]}


@dataclass(frozen=True)
class Lake:
    """The running lake: the server's ``url``, moto's ``endpoint``, a token per principal."""

    url: str
    endpoint: str
    tokens: dict[str, str]
    moto: MotoIam

    def s3_client(self, keys: tuple[str, ...]) -> Any:
        """A boto3 S3 client of moto signing with ``keys`` (access key, secret, session token)."""
        return self.moto.client("s3", keys)


def in_a_process_of_its_own(test: Callable[P, None]) -> Callable[P, None]:
    """Run ``test``'s body in a spawned Python of its own, given its fixtures' values (pickled); its
    exception, a failed assert's included, comes back as the test's.

    DuckDB's extensions and polars bring native runtimes (thread pools, TLS, allocators) into the process
    that loads them, and keep them for its life. In the suite's own process they stayed for every later
    test, and one of those died of a segmentation fault in CI without a word of whose it was; in a child
    of their own they end with the test. The child inherits the environment as the test's fixtures left it
    (``_no_aws_keys_but_vended_ones`` included).
    """

    @functools.wraps(test)
    def isolated(*args: P.args, **kwargs: P.kwargs) -> None:
        with concurrent.futures.ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as child:
            child.submit(_run_test, test.__module__, test.__name__, args, kwargs).result()

    return isolated


def _run_test(module: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    getattr(importlib.import_module(module), name).__wrapped__(*args, **kwargs)


@pytest.fixture(autouse=True)
def _no_aws_keys_but_vended_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in [name for name in os.environ if name.startswith("AWS_")]:
        monkeypatch.delenv(name)


@pytest.fixture(scope="module")
def moto() -> Iterator[MotoIam]:
    with moto_iam([BUCKET]) as running:
        yield running


@pytest.fixture(scope="module")
def served(moto: MotoIam, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with serving(tmp_path_factory.mktemp("readers_home")) as running:
        cat = running.catalog
        with as_principal(ADMIN):
            cat.create_storage_credential("moto_role", moto.options(vending="iam-role-per-vend"))
            cat.create_external_location("lake", f"s3://{BUCKET}/tables", "moto_role")
            cat.create_catalog("main")
            cat.create_schema("main.ml")
            cat.create_table("main.ml.loc", pa.table({"x": ROWS["loc"]}))
        # The S3 tables are written as a client would write them: with the keys the server vends.
        rest = RestCatalog(running.url, running.admin_token)
        for table in ("a", "b"):
            location = f"s3://{BUCKET}/tables/{table}"
            rest.create_table(f"main.ml.{table}", pa.table({"x": ROWS[table]}), storage_location=location)
        rest.close()
        with as_principal(ADMIN):
            for who in ("alice", "nosy"):
                cat.create_principal(who)
                cat.grant("main", "USE CATALOG", who)
                cat.grant("main.ml", "USE SCHEMA", who)
            for table in ("a", "loc"):
                cat.grant(f"main.ml.{table}", "SELECT", "alice")
                cat.grant(f"main.ml.{table}", "MODIFY", "nosy")
        yield running


@pytest.fixture(scope="module")
def lake(served: Served, moto: MotoIam) -> Lake:
    tokens = {who: served.token_for(who) for who in ("alice", "nosy")}
    return Lake(served.url, moto.endpoint, {who: t for who, t in tokens.items() if t is not None}, moto)
