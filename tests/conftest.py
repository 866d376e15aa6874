"""Every test runs against its own catalog home and a fixed principal, never ~/.uc_jupyter; tests that
need Spark share one real local Spark Connect server per session, reached like a remote one.

Both catalog backends: the ``catalog`` fixture (and ``home_catalog``, the same home's catalog with
nothing in it) is the embedded catalog, or, in a test marked ``both_backends`` (a module's
``pytestmark``, or one test), also a :class:`~uc_jupyter.catalog.rest.client.RestCatalog` talking to an
in-process ``uc-jupyter serve`` of the test's own home. Such a test runs twice, ``[local]`` and
``[rest]``; on ``rest`` the process's ``get_catalog()`` is that same RestCatalog (UC_JUPYTER_CATALOG_URL
and UC_JUPYTER_TOKEN are set), and ``as_principal(p)`` calls it with a token of ``p``, made when first
needed. A test about the embedded store itself (its SQLite file, files on disk, processes sharing a
home) is marked ``embedded_only("why")`` and runs on the embedded catalog only.

object_store cannot run in a process forked from one that has made a request
(:mod:`uc_jupyter.storage.objects`): a test whose own code reads object storage (a dataset
iterated without workers, a listing or download made directly) is marked ``in_a_fork`` (a test using
an S3 fixture is marked so by itself) and runs in a forked child, so the test process stays clean and
every later test's DataLoader workers fork and read through object_store as a user's would. A test
that leaves the process unclean without the mark fails, naming the mark: otherwise whether a test
forks or spawns its workers would depend on the order the suite runs in.
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import signal
import subprocess
import sys
import threading
import traceback
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from uc_jupyter.catalog import Catalog, get_catalog
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.distributed.pool import RankPool
from uc_jupyter.processes import free_port
from uc_jupyter.tables.spark import LocalServer, local_server, stop_local_server
from uc_jupyter.testing.catalogs import external_location
from uc_jupyter.testing.ray_cluster import RayTestCluster
from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.waits import wait_until

ADMIN = "admin"
TEST_CACHE_FLOOR = 64 << 20


def pytest_configure(config: pytest.Config) -> None:
    # A suite started in the background of a non-interactive shell inherits SIGINT ignored, and then
    # _thread.interrupt_main() (what a kernel interrupt does, which the pool tests send) does nothing
    # and those tests wait out their timeout: Python's own handler, as in a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    config.addinivalue_line(
        "markers", "both_backends: run the test's catalog on the embedded catalog and on RestCatalog + uc-jupyter serve"
    )
    config.addinivalue_line(
        "markers", "embedded_only(why): about the embedded catalog itself (SQLite, files on disk); local backend only"
    )
    config.addinivalue_line(
        "markers", "in_a_fork: run the test in a forked child, so its object_store requests leave this process clean"
    )
    config.addinivalue_line(
        "markers",
        "servers: starts a server (Spark, S3 test server, moto, Azurite, GCS emulator, Ray, a kernel, Jupyter, "
        "uc-jupyter serve, chromium); set by itself for the fixtures in _SERVER_FIXTURES; `make check` skips these",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run an ``in_a_fork`` test's function in a forked child (its fixtures are made here, in the parent)
    and report how it ended; other tests run here as usual."""
    from uc_jupyter.storage.objects import fork_safe

    if pyfuncitem.get_closest_marker("in_a_fork") is None or not fork_safe():
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: run, report, exit (never return into pytest)
        outcome: tuple[str, str] | None = None
        try:
            os.close(read)
            pyfuncitem.obj(**arguments)
        except BaseException as exc:
            skipped = isinstance(exc, pytest.skip.Exception)
            outcome = ("skip" if skipped else "fail", str(exc) if skipped else "".join(traceback.format_exception(exc)))
        finally:
            with os.fdopen(write, "wb") as out:
                pickle.dump(outcome, out)
            os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as answer:
        try:
            ended: Any = pickle.load(answer)
        except EOFError:
            ended = ("fail", "the forked test process died before it reported")
    os.waitpid(pid, 0)
    if ended is not None:
        kind, text = ended
        if kind == "skip":
            pytest.skip(text)
        pytest.fail(f"in the forked test process:\n{text}", pytrace=False)
    return True


@pytest.fixture(autouse=True)
def _object_store_stays_out_of_the_test_process(request: pytest.FixtureRequest) -> Iterator[None]:
    from uc_jupyter.storage.objects import fork_safe

    clean = fork_safe()
    yield
    if clean and not fork_safe():
        pytest.fail(
            f"{request.node.nodeid} made an object_store request in the test process, which no later test's "
            "forked workers could then make: mark it in_a_fork (or read in DataLoader workers)",
            pytrace=False,
        )


# Fixtures that put an S3 volume within a test's reach: such a test runs in_a_fork (see the docstring).
# Not every test that reads object storage: deltalake cannot run in a process forked from one that has
# used it either (it panics), so a test writing Delta tables runs here, and is marked only if it also
# reads volumes in its own process.
_OBJECT_STORE_FIXTURES = frozenset({"s3", "s3_server", "s3_volume"})


# Fixtures that start a server of the suite's (a process or service the test talks to: Spark Connect, the S3
# test server, moto, Azurite, fake-gcs-server, a Ray cluster, a Jupyter kernel or server, uc-jupyter serve,
# JupyterLab with chromium), by name: every fixture of one of these names, in any conftest or test module,
# starts one. A test that requests one, itself or through another fixture, is marked ``servers`` (see the
# docstring); a test that starts one in its own body, or through a parameter, carries the mark itself.
_SERVER_FIXTURES = frozenset(
    {
        "spark_server",  # tests/conftest.py: the session's Spark Connect server (spark_remote uses it)
        "ray_cluster",  # tests/conftest.py: the session's 2-node Ray cluster
        "s3_server",  # the S3 test server
        "moto",  # moto_server, moto_iam's or a plain one
        "uploads",  # tests/ucserver/test_routes_vending.py: a moto_iam of its own for multipart uploads
        "iam",  # moto_iam
        "az",  # Azurite
        "gcs",  # fake-gcs-server
        "served",  # uc-jupyter serve, in this process or its own
        "server",  # tests/ucserver: uc-jupyter serve; tests/testing/test_s3_server.py: the S3 test server
        "fresh_server",
        "remote_server",
        "own_server",
        "admin_server",  # tests/server: jupyter server with the extension
        "alice_server",
        "kernel",  # a Jupyter kernel
        "cluster",  # tests/testing/test_ray_cluster.py: a Ray cluster of its own
        "other_torch_node",  # tests/distributed/launch/test_ray.py: a Ray cluster of its own
        "lab",  # ui-tests: JupyterLab, driven by chromium
    }
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        # A test's fixturenames are its whole closure, so a fixture built on a server fixture counts too.
        if _SERVER_FIXTURES.intersection(names):
            item.add_marker(pytest.mark.servers)
        # A test whose ranks read (make_pool) runs here: its own process makes no object_store request
        # (the check below still holds it to that), and a forked child could not start Ray: Ray's gRPC
        # state does not survive a fork of a process that has used it.
        if _OBJECT_STORE_FIXTURES.intersection(names) and "make_pool" not in names:
            item.add_marker(pytest.mark.in_a_fork)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    definition = metafunc.definition
    if "backend" not in metafunc.fixturenames or definition.get_closest_marker("both_backends") is None:
        return
    if definition.get_closest_marker("embedded_only") is None:
        # [rest] serves the test's home with an in-process uc-jupyter serve: a server; [local] starts none.
        metafunc.parametrize("backend", ["local", pytest.param("rest", marks=pytest.mark.servers)])


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path_factory.mktemp("uc_home")
    monkeypatch.setenv("UC_JUPYTER_HOME", str(home))
    monkeypatch.setenv("UC_JUPYTER_PRINCIPAL", ADMIN)
    monkeypatch.delenv("UC_JUPYTER_SPARK_REMOTE", raising=False)
    for remote in ("UC_JUPYTER_CATALOG_URL", "UC_JUPYTER_TOKEN", "DATABRICKS_HOST", "DATABRICKS_TOKEN"):
        monkeypatch.delenv(remote, raising=False)  # a developer's catalog server must not receive the suite
    # The suite writes megabytes, not gigabytes: its caches keep a small free-disk floor, so that whether it
    # passes does not depend on how full the machine's shared disk is (the default floor, 10% of the disk
    # up to 5 GiB, refused every download on a CI disk with less than that free).
    monkeypatch.setenv("UC_JUPYTER_CACHE_MIN_FREE_BYTES", str(TEST_CACHE_FLOOR))
    monkeypatch.delenv("UC_JUPYTER_CACHE_MAX_BYTES", raising=False)
    return home


servers_stopping: list[threading.Thread] = []


@pytest.fixture(scope="session", autouse=True)
def _join_stopping_servers() -> Iterator[None]:
    yield
    for stopping in servers_stopping:
        stopping.join(timeout=30)


@pytest.fixture
def backend() -> str:
    """The catalog backend: "local" (embedded), unless a ``both_backends`` test is parametrized."""
    return "local"


@pytest.fixture
def home_catalog(isolated_home: Path, backend: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Catalog]:
    """The catalog of this test's home on ``backend``, with nothing in it but its admin (see the module
    docstring): the embedded catalog, or RestCatalog over an in-process server of the same home."""
    if backend == "local":
        cat = get_catalog()
        assert isinstance(cat, LocalCatalog)
        yield cat
        return
    from uc_jupyter.catalog.rest.client import RestCatalog
    from uc_jupyter.testing.served import serving

    server = contextlib.ExitStack()
    served = server.enter_context(serving(isolated_home))
    try:
        monkeypatch.setenv("UC_JUPYTER_CATALOG_URL", served.url)
        monkeypatch.setenv("UC_JUPYTER_TOKEN", served.admin_token)
        rest = get_catalog()
        assert isinstance(rest, RestCatalog)
        rest.token_for = served.token_for
        yield rest
        rest.close()
    finally:
        # uvicorn takes ~0.2 s to stop (its 0.1 s tick, then a 0.1 s pause); a test's server serves a
        # home of its own, so it may stop while the next test runs. All are joined at the session's end.
        stopping = threading.Thread(target=server.close, name=f"stop {served.url}")
        stopping.start()
        servers_stopping.append(stopping)


@pytest.fixture
def catalog(home_catalog: Catalog) -> Catalog:
    """This test's catalog (the embedded one unless ``both_backends``), with ``main`` and ``main.ml``."""
    home_catalog.create_catalog("main")
    home_catalog.create_schema("main.ml")
    return home_catalog


@pytest.fixture(scope="session")
def spark_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("spark_home"))


@pytest.fixture(scope="session")
def spark_server(spark_home: str) -> Iterator[LocalServer]:
    """The session's server. Like any local server it stops itself 30 minutes after its last use, so
    a killed test run leaves no JVM behind; ``spark_remote`` counts as a use and restarts it if needed."""
    home = spark_home
    previous = os.environ.get("UC_JUPYTER_HOME")
    os.environ["UC_JUPYTER_HOME"] = home
    try:
        server = local_server(progress=lambda _line: None)
    finally:
        _restore(previous)
    yield server
    os.environ["UC_JUPYTER_HOME"] = home
    try:
        stop_local_server()
    finally:
        _restore(previous)


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop("UC_JUPYTER_HOME", None)
    else:
        os.environ["UC_JUPYTER_HOME"] = previous


@pytest.fixture
def spark_remote(spark_server: LocalServer, spark_home: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Point UC_JUPYTER_SPARK_REMOTE at the session's server (the remote code path)."""
    previous = os.environ.get("UC_JUPYTER_HOME")
    os.environ["UC_JUPYTER_HOME"] = spark_home
    try:
        url = local_server(progress=lambda _line: None).url  # a use: the idle clock starts again
    finally:
        _restore(previous)
    monkeypatch.setenv("UC_JUPYTER_SPARK_REMOTE", url)
    return url


@pytest.fixture
def busy_machine() -> Iterator[None]:
    """Two processes spinning beside the test, one per core of a 2-core CI machine: the load under
    which threads that forward data (queue feeders, channel readers) run late."""
    import subprocess
    import sys

    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


# ---------------------------------------------------------------- rank pools, here and on Ray
PoolMaker = Callable[..., RankPool]


@pytest.fixture(scope="session")
def ray_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayTestCluster]:
    """A real Ray cluster of 2 nodes on this machine, each with its own cache folder, for the session.

    Each node offers 4 CPUs to Ray (what Ray schedules by), so a module's 2-rank pool and a test's
    4-rank pool fit at once; the tests place 2 ranks per node."""
    caches = [tmp_path_factory.mktemp(f"node{i}-cache") for i in range(2)]
    node_env = [
        {"UC_JUPYTER_CACHE_DIR": str(cache), "UC_JUPYTER_CACHE_MIN_FREE_BYTES": str(TEST_CACHE_FLOOR)}
        for cache in caches
    ]
    with RayTestCluster(nodes=2, cpus_per_node=4, node_env=node_env, ray_client=True) as cluster:
        yield cluster


@pytest.fixture(scope="module", params=["local", pytest.param("ray", marks=pytest.mark.servers)])
def placement(request: pytest.FixtureRequest) -> Iterator[str | None]:
    """Where a module's pools run: None (this machine) or "ray" (the session's Ray cluster)."""
    if request.param == "local":
        yield None
        return
    cluster: RayTestCluster = request.getfixturevalue("ray_cluster")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("UC_JUPYTER_RAY_ADDRESS", cluster.address)
        yield "ray"


@pytest.fixture
def make_pool(placement: str | None) -> PoolMaker:
    """``RankPool`` placed where this run of the test places ranks; on Ray, spread over both nodes
    when the rank count allows, unless the test says how many nodes."""
    if placement is None:
        return functools.partial(RankPool, cluster=None)

    def on_cluster(n: int, **options: Any) -> RankPool:
        options.setdefault("nodes", 2 if n % 2 == 0 else 1)
        return RankPool(n, cluster=placement, **options)

    return on_cluster


# S3: moto (an independent implementation, one per module) and the project's S3 test server (one per
# run), shared by the storage, data, checkpoint and loading tests.
@pytest.fixture(scope="module")
def moto() -> Iterator[str]:
    """An independent S3 implementation (moto's server) on 127.0.0.1, one per test module (tests
    may switch its signature checks on); yields its endpoint once it answers."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    last: list[OSError] = []

    def answers() -> bool:
        try:
            urllib.request.urlopen(f"{endpoint}/moto-api/reset-auth", timeout=5).close()
        except urllib.error.HTTPError:
            return True  # it answers (a GET there is refused): it is up
        except OSError as exc:
            last[:] = [exc]
            return False
        return True

    try:
        wait_until(answers, lambda: f"moto's server at {endpoint} to answer (last: {last[-1:]})", 60, interval_s=0.2)
        yield endpoint
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3TestServer]:
    with S3TestServer(tmp_path_factory.mktemp("s3")) as server:
        yield server


@pytest.fixture
def s3(s3_server: S3TestServer) -> Iterator[S3TestServer]:
    """The shared server, with counters, shaping and injected faults reset around each test (a latency
    shape or a per-connection cap one test set would otherwise reach the next)."""
    s3_server.configure(**_S3_AT_REST)
    s3_server.reset()
    yield s3_server
    s3_server.configure(**_S3_AT_REST)


_S3_AT_REST: dict[str, Any] = {
    "latency": 0.0,
    "latency_sigma": 0.0,
    "bandwidth": 0.0,
    "connection_bandwidth": 0.0,
    "fail_first": 0,
    "fail_rate": 0.0,
    "reset_rate": 0.0,
    "fail_status": 503,
    "list_latency": 0.0,
    "store_then_fail": "",
}


@pytest.fixture
def s3_volume(catalog: Catalog, s3: S3TestServer) -> Callable[..., tuple[str, Path]]:
    """Make an external volume on the S3 server; returns (its /Volumes path, its folder on disk).
    Its credential vends its own keys (``vending: static``: the test server checks no signature), so
    RestCatalog reads it with what ``uc-jupyter serve`` vends; the embedded catalog ignores the option."""

    def make(name: str = "remote", **options: Any) -> tuple[str, Path]:
        bucket = f"b{uuid.uuid4().hex[:12]}"
        folder = s3.bucket(bucket) / "data"
        folder.mkdir()
        storage_options = {**s3.storage_options, "vending": "static", **options}
        external_location(catalog, f"s3://{bucket}", storage_options)
        catalog.create_volume(f"main.ml.{name}", f"s3://{bucket}/data")
        return f"/Volumes/main/ml/{name}", folder

    return make


@pytest.fixture
def local_volume(catalog: LocalCatalog) -> Callable[..., tuple[str, Path]]:
    """Make a managed volume; returns (its /Volumes path, its folder on disk)."""

    def make(name: str = "local") -> tuple[str, Path]:
        info = catalog.create_volume(f"main.ml.{name}")
        return info.path, Path(info.storage_location.removeprefix("file://"))

    return make
