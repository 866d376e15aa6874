"""Attacks on the ranks: another principal's grants reached through them, processes that outlive the
pool, and pool status files that break the server's ``pools`` route. Each failed on the code before
issue 13 and holds now."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path

import cloudpickle
import psutil
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.catalog import PermissionDenied, as_principal, current_principal
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.distributed import RankDied, RankError, RankPool, distributed
from uc_jupyter.distributed.board import publish, read_boards
from uc_jupyter.distributed.shared import shutdown_shared_pool
from uc_jupyter.distributed.status import PoolStatus
from uc_jupyter.server.browse import pool_records
from uc_jupyter.testing.boards import pool_record
from uc_jupyter.testing.waits import wait_until

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name

SECRET_ROWS = [{"ssn": "111-22-3333"}]
READ_IN_A_CELL = "from uc_jupyter.tables.delta import read_arrow\nread_arrow('main.ml.secret').to_pylist()"


# ---------------------------------------------------------------- what runs on the ranks
def read_secret_table() -> list[dict[str, str]]:
    from uc_jupyter.tables.delta import read_arrow

    return list(read_arrow("main.ml.secret").to_pylist())


def read_private_note() -> str:
    from uc_jupyter.catalog import get_catalog

    resolved = get_catalog().resolve_volume_path("/Volumes/main/ml/private/note.txt")
    with resolved.fs.open(resolved.path, "rb") as file:
        return bytes(file.read()).decode()


def catalog_principal() -> str:
    """Who the rank's configured catalog says it acts as."""
    from uc_jupyter.catalog import get_catalog

    return get_catalog().current_principal()


def who_acts_everywhere() -> tuple[str, str, str]:
    """Who the rank is in this thread, in a thread it starts, and in a process it starts."""
    from uc_jupyter.catalog import current_principal

    seen: list[str] = []
    thread = threading.Thread(target=lambda: seen.append(current_principal()))
    thread.start()
    thread.join()
    child = subprocess.run(
        [sys.executable, "-c", "from uc_jupyter.catalog import current_principal; print(current_principal())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return current_principal(), seen[0], child.stdout.strip()


def leave_admin_behind() -> None:
    """An earlier call that leaves the rank's environment, and an override, saying "admin"."""
    from uc_jupyter.catalog import as_principal

    os.environ["UC_JUPYTER_PRINCIPAL"] = "admin"
    as_principal("admin").__enter__()  # entered, never left


DAEMON = "import os, time; os.setsid(); time.sleep(600)"
# Starts DAEMON (not waiting for it, its output not ours) and exits: the daemon is an orphan at once.
LAUNCHER = "import subprocess as s, sys; print(s.Popen([sys.executable, '-c', sys.argv[1]], stdout=s.DEVNULL).pid)"


def start_escapees(folder: str) -> list[int]:
    """A child in its own session, and a double-forked daemon whose parent is gone: both would
    survive a process-group kill. Their pids are written to ``folder`` too (the rank may not answer)."""
    import subprocess
    import sys

    rank = int(os.environ["RANK"])
    child = subprocess.Popen([sys.executable, "-c", DAEMON])
    launcher = subprocess.run(
        [
            sys.executable,
            "-c",
            LAUNCHER,
            DAEMON,
        ],
        stdout=subprocess.PIPE,
        text=True,
        check=True,
    )
    pids = [child.pid, int(launcher.stdout)]
    Path(folder, f"rank-{rank}.pids").write_text(" ".join(map(str, pids)))
    return pids


def start_escapees_then_die(folder: str) -> None:
    start_escapees(folder)
    if int(os.environ["RANK"]) == 1:
        # Rank 0 has started its own escapees too; die whatever the wait says: the test checks what is left.
        with contextlib.suppress(AssertionError):
            wait_until(Path(folder, "rank-0.pids").exists, "rank 0's escapees", 60, interval_s=0.01)
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(60)


# ---------------------------------------------------------------- fixtures and helpers
@pytest.fixture
def guarded(catalog: LocalCatalog) -> LocalCatalog:
    """main.ml.secret (a table) and main.ml.private (a volume) that only the admin may read; alice may
    use the catalog and the schema, nothing more."""
    catalog.create_table("main.ml.secret", pa.table({"ssn": ["111-22-3333"]}))
    volume = catalog.create_volume("main.ml.private")
    Path(volume.storage_location.removeprefix("file://"), "note.txt").write_text("for admins only")
    catalog.create_principal("alice")
    catalog.grant("main", "USE CATALOG", "alice")
    catalog.grant("main.ml", "USE SCHEMA", "alice")
    return catalog


@pytest.fixture
def pool(catalog: LocalCatalog) -> Iterator[RankPool]:
    """Two CPU ranks started by the admin (UC_JUPYTER_PRINCIPAL=admin) and kept warm across calls."""
    with RankPool(2, devices="cpu", stop_grace=1.0) as ranks:
        ranks.start()
        yield ranks


def denied_to(principal: str, securable: str, privilege: str, call: Callable[[], object]) -> None:
    """``call()`` fails on every rank with PermissionDenied naming ``principal``."""
    with pytest.raises(RankError) as caught:
        call()
    assert len(caught.value.failures) == 2
    for failure in caught.value.failures:
        original = failure.original()
        assert isinstance(original, PermissionDenied), failure.traceback
        assert str(original) == f"{principal} lacks {privilege} on {securable}"


def alive(pids: set[int], within: float = 10.0) -> set[int]:
    """The pids still running (not zombies) after up to ``within`` seconds: the caller says what that means."""

    def running() -> set[int]:
        found = set()
        for pid in pids:
            try:
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    found.add(pid)
            except psutil.NoSuchProcess:
                continue
        return found

    with contextlib.suppress(AssertionError):  # not a failure here: the caller asserts
        wait_until(lambda: not running(), "the processes to end", within)
    return running()


def escapees(folder: Path) -> set[int]:
    return {int(p) for f in folder.glob("rank-*.pids") for p in f.read_text().split()}


@pytest.fixture
def reaper() -> Iterator[set[int]]:
    """Pids a test started; whatever is left of them is killed afterwards, so a failure leaks nothing."""
    pids: set[int] = set()
    yield pids
    for pid in pids:
        try:
            psutil.Process(pid).kill()
        except psutil.NoSuchProcess:
            continue


# ---------------------------------------------------------------- identity reaches the ranks
def test_as_principal_reaches_the_ranks_of_a_warm_pool(guarded: LocalCatalog, pool: RankPool) -> None:
    pids = {r.pid for r in pool.status().ranks}
    with as_principal("alice"):
        assert pool.run(current_principal) == ["alice", "alice"]
        denied_to("alice", "main.ml.secret", "SELECT", lambda: pool.run(read_secret_table))
        denied_to("alice", "main.ml.private", "READ VOLUME", lambda: pool.run(read_private_note))
        denied_to("alice", "main.ml.secret", "SELECT", lambda: pool.execute(READ_IN_A_CELL))
    assert pool.run(current_principal) == ["admin", "admin"]
    assert pool.run(read_secret_table) == [SECRET_ROWS, SECRET_ROWS]
    assert pool.run(read_private_note) == ["for admins only"] * 2
    assert {r.pid for r in pool.status().ranks} == pids  # the same warm ranks all along


@pytest.mark.servers  # serves its home (uc-jupyter serve)
def test_over_a_catalog_server_ranks_act_as_the_tokens_principal_not_the_local_label(
    isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kernel holds alice's token while UC_JUPYTER_PRINCIPAL still says admin: the ranks are alice
    (the server's answer), so they read what alice may, and the label gets them nothing."""
    from uc_jupyter.testing.served import serving

    with serving(isolated_home / "served") as served:
        with as_principal("admin"):
            admin = served.catalog
            admin.create_catalog("main")
            admin.create_schema("main.ml")
            volume = admin.create_volume("main.ml.private")
            Path(volume.storage_location.removeprefix("file://"), "note.txt").write_text("for admins only")
            admin.create_principal("alice")
            admin.grant("main", "USE CATALOG", "alice")
            admin.grant("main.ml", "USE SCHEMA", "alice")
        monkeypatch.setenv("UC_JUPYTER_CATALOG_URL", served.url)
        monkeypatch.setenv("UC_JUPYTER_TOKEN", served.token_for("alice") or "")
        assert os.environ["UC_JUPYTER_PRINCIPAL"] == "admin"
        with RankPool(2, devices="cpu", stop_grace=1.0) as ranks:
            assert ranks.run(catalog_principal) == ["alice", "alice"]
            denied_to("alice", "main.ml.private", "READ VOLUME", lambda: ranks.run(read_private_note))
            with as_principal("admin"):
                admin.grant("main.ml.private", "READ VOLUME", "alice")
            assert ranks.run(read_private_note) == ["for admins only"] * 2


def test_push_and_pull_act_as_the_caller_too(guarded: LocalCatalog, pool: RankPool) -> None:
    class Reads:
        """Unpickling it on a rank reads the secret table: code that runs inside push itself."""

        def __reduce__(self) -> tuple[object, ...]:
            return (read_secret_table, ())

    with as_principal("alice"), pytest.raises(RankError, match="alice lacks SELECT on main.ml.secret"):
        pool.push({"rows": Reads()})
    pool.push({"rows": Reads()})
    assert pool.pull("rows") == {"rows": [SECRET_ROWS, SECRET_ROWS]}


def test_the_principal_in_force_is_read_at_each_call(
    guarded: LocalCatalog, pool: RankPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UC_JUPYTER_PRINCIPAL", "alice")  # the kernel says it is alice now
    denied_to("alice", "main.ml.secret", "SELECT", lambda: pool.run(read_secret_table))
    with as_principal("admin"):
        assert pool.run(read_secret_table) == [SECRET_ROWS, SECRET_ROWS]


def test_a_calls_threads_and_processes_act_as_its_principal(pool: RankPool) -> None:
    pool.run(leave_admin_behind)
    with as_principal("alice"):
        assert pool.run(who_acts_everywhere) == [("alice", "alice", "alice")] * 2
    assert pool.run(who_acts_everywhere) == [("admin", "admin", "admin")] * 2


def test_a_principal_from_another_thread_of_the_kernel(guarded: LocalCatalog, pool: RankPool) -> None:
    results: list[object] = []

    def as_alice() -> None:
        with as_principal("alice"):
            try:
                results.append(pool.run(read_secret_table))
            except RankError as exc:
                results.append(exc)

    thread = threading.Thread(target=as_alice)
    thread.start()
    thread.join()
    [outcome] = results
    assert isinstance(outcome, RankError) and "alice lacks SELECT on main.ml.secret" in str(outcome)


@distributed(gpus=2)
def secret_on_ranks() -> list[dict[str, str]]:
    return read_secret_table()


def test_distributed_functions_run_as_the_caller(guarded: LocalCatalog) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no CUDA device is visible"
            assert secret_on_ranks.distributed() == [SECRET_ROWS, SECRET_ROWS]  # starts the pool as admin
            with as_principal("alice"):
                denied_to("alice", "main.ml.secret", "SELECT", secret_on_ranks.distributed)
    finally:
        shutdown_shared_pool()


def test_a_distributed_cell_runs_as_the_caller(guarded: LocalCatalog) -> None:
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "uc_jupyter")

    def cell() -> object:
        result = shell.run_cell(f"%%uc_distributed -n 2\n{READ_IN_A_CELL}")
        if result.error_in_exec is not None:
            raise result.error_in_exec
        return result.result

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "no CUDA device is visible"
            assert cell() == [SECRET_ROWS, SECRET_ROWS]  # starts the kernel's pool as admin
            with as_principal("alice"):
                denied_to("alice", "main.ml.secret", "SELECT", cell)
            assert cell() == [SECRET_ROWS, SECRET_ROWS]
    finally:
        shell.run_line_magic("unload_ext", "uc_jupyter")


# ---------------------------------------------------------------- nothing outlives the pool
def test_grandchildren_in_their_own_session_end_with_shutdown(pool: RankPool, tmp_path: Path, reaper: set[int]) -> None:
    started = {pid for pids in pool.run(start_escapees, str(tmp_path)) for pid in pids}
    reaper |= started
    assert len(started) == 4 and alive(started, within=0) == started
    pool.shutdown()
    assert not alive(started), "a rank's grandchild outlived pool.shutdown()"


def test_grandchildren_end_with_a_restart(pool: RankPool, tmp_path: Path, reaper: set[int]) -> None:
    started = {pid for pids in pool.run(start_escapees, str(tmp_path)) for pid in pids}
    reaper |= started
    pool.restart()
    assert not alive(started), "a rank's grandchild outlived pool.restart()"
    assert pool.run(current_principal) == ["admin", "admin"]


def test_grandchildren_end_with_a_rank_killed_by_sigkill(pool: RankPool, tmp_path: Path, reaper: set[int]) -> None:
    with pytest.raises(RankDied, match="rank 1 died: its process killed by signal SIGKILL"):
        pool.run(start_escapees_then_die, str(tmp_path))
    started = escapees(tmp_path)
    reaper |= started
    assert len(started) == 4
    assert not alive(started), "a SIGKILLed rank's grandchild survived it"


def test_a_rank_killed_from_outside_takes_its_grandchildren(pool: RankPool, tmp_path: Path, reaper: set[int]) -> None:
    started = {pid for pids in pool.run(start_escapees, str(tmp_path)) for pid in pids}
    reaper |= started
    rank = pool.status().ranks[0].pid
    os.kill(rank, signal.SIGKILL)  # the OOM killer, say, while the pool is idle
    of_rank_0 = {int(p) for p in (tmp_path / "rank-0.pids").read_text().split()}
    assert not alive(of_rank_0 | {rank}), "a grandchild outlived its rank"
    assert alive(started - of_rank_0, within=0) == started - of_rank_0  # rank 1's run on, for now
    with pytest.raises(RankDied, match="rank 0 died: its process killed by signal SIGKILL"):
        pool.run(current_principal)
    assert not alive(started)  # the broken pool was stopped, rank 1 and its tree with it
    assert pool.run(current_principal) == ["admin", "admin"]  # a fresh pool


KERNEL = """
import json, os, sys
from uc_jupyter.distributed import RankPool
import importlib.util
spec = importlib.util.spec_from_file_location("attacks", sys.argv[2])
attacks = sys.modules["attacks"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(attacks)
pool = RankPool(2, devices="cpu")
started = [p for pids in pool.run(attacks.start_escapees, sys.argv[1]) for p in pids]
print(json.dumps({"ranks": [r.pid for r in pool.status().ranks], "escapees": started}), flush=True)
os.kill(os.getpid(), 9)
"""


def test_everything_ends_when_the_kernel_dies(tmp_path: Path, reaper: set[int]) -> None:
    done = subprocess.run(
        [sys.executable, "-c", KERNEL, str(tmp_path), __file__], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    report = json.loads(done.stdout)
    started = set(report["ranks"]) | set(report["escapees"])
    reaper |= started
    assert len(started) == 6
    assert not alive(started), "a rank's grandchild outlived the kernel"


# ---------------------------------------------------------------- malformed pool status files
def good_record(kernel: str) -> dict[str, object]:
    return pool_record(kernel)


def bad_files(folder: Path, outside: Path) -> None:
    """One of each: files that made the route answer 500, hang, or serve what is not a status file."""
    records: dict[str, object] = {
        "pid-text": {**good_record("k"), "pid": "abc"},
        "pid-null": {**good_record("k"), "pid": None},
        "pid-huge": {**good_record("k"), "pid": 2**70},
        "pid-negative": {**good_record("k"), "pid": -1},  # os.kill(-1, 0) "reaches" every process
        "kernel-list": {**good_record("k"), "kernel_id": ["k"]},  # unhashable in the server's filter
        "kernel-dict": {**good_record("k"), "kernel_id": {"k": 1}},
        "ranks-text": {**good_record("k"), "ranks": "all of them"},
        "rank-null": {**good_record("k"), "ranks": [None]},
        "size-text": {**good_record("k"), "size": "2"},
        "list": [good_record("k")],
        "number": 7,
        "huge": {**good_record("k"), "padding": "x" * 2_000_000},  # served whole to every browser
    }
    for name, record in records.items():
        (folder / f"{name}.1.json").write_text(json.dumps(record))
    (folder / "deep-nesting.1.json").write_text("[" * 100_000 + "]" * 100_000)  # RecursionError in json
    (folder / "not-json.1.json").write_text("{not json")
    (folder / "latin1.1.json").write_bytes(b'{"kernel_id": "\xe9"}')
    (folder / "folder.1.json").mkdir()
    os.mkfifo(folder / "fifo.1.json")  # reading it would block the server for ever
    elsewhere = outside / "planted.json"
    elsewhere.write_text(json.dumps(good_record("k")))
    (folder / "symlink.1.json").symlink_to(elsewhere)
    (folder / "to-fifo.1.json").symlink_to(folder / "fifo.1.json")
    if os.geteuid() != 0:  # root reads it anyway
        unreadable = folder / "unreadable.1.json"
        unreadable.write_text(json.dumps(good_record("k")))
        unreadable.chmod(0)


def listing_within(seconds: float, kernels: list[str]) -> dict[str, object]:
    """pool_records, or a failure when it raises or does not answer within ``seconds``."""
    outcome: list[object] = []
    thread = threading.Thread(target=lambda: outcome.append(_try(lambda: pool_records(kernels))), daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"pool_records did not answer within {seconds} s"
    [result] = outcome
    if isinstance(result, BaseException):
        raise result
    assert isinstance(result, dict)
    return result


def _try(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except Exception as exc:
        return exc


def test_malformed_status_files_are_skipped_and_good_ones_listed(isolated_home: Path, tmp_path: Path) -> None:
    folder = isolated_home / "pools"
    folder.mkdir()
    good = good_record("k")
    (folder / "good.1.json").write_text(json.dumps(good))
    bad_files(folder, tmp_path)
    assert listing_within(10, ["k"]) == {"pools": [good]}
    assert (folder / "not-json.1.json").exists() and (folder / "symlink.1.json").is_symlink()  # left alone
    assert (tmp_path / "planted.json").exists()


def test_a_pools_folder_that_is_a_symlink_is_not_followed(isolated_home: Path, tmp_path: Path) -> None:
    (tmp_path / "good.1.json").write_text(json.dumps(good_record("k")))
    (isolated_home / "pools").symlink_to(tmp_path)
    assert listing_within(10, ["k"]) == {"pools": []}


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
            lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
            max_leaves=20,
        ).map(lambda value: json.dumps(value).encode()),
        st.fixed_dictionaries(
            {},
            optional={
                key: st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.lists(st.integers())
                for key in good_record("k")
            },
        ).map(lambda value: json.dumps({**good_record("k"), **value}).encode()),
    )
)
def test_no_file_content_breaks_the_listing(isolated_home: Path, content: bytes) -> None:
    folder = isolated_home / "pools"
    folder.mkdir(exist_ok=True)
    (folder / "fuzz.1.json").write_bytes(content)
    boards = read_boards()
    for record in boards:  # what is listed has the shape the status item reads
        assert record["kernel_id"] is None or isinstance(record["kernel_id"], str)
        assert isinstance(record["pid"], int) and not isinstance(record["pid"], bool) and record["pid"] > 0
        assert isinstance(record["ranks"], list) and all(isinstance(r["alive"], bool) for r in record["ranks"])
    assert pool_records(["k"]) == {"pools": [r for r in boards if r["kernel_id"] == "k"]}


def test_publish_never_follows_a_planted_name(isolated_home: Path, tmp_path: Path) -> None:
    folder = isolated_home / "pools"
    folder.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("keep me")
    name = f"pid-{os.getpid()}.3.json"
    (folder / f".{name}.{os.getpid()}.tmp").symlink_to(victim)  # the old code's temporary name
    publish(3, PoolStatus(1, "idle", "cpu", "gloo", None, ()))  # the kernel writes its status
    assert victim.read_text() == "keep me"
    assert [b["pool"] for b in read_boards()] == [3]
