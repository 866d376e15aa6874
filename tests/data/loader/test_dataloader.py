"""The DataLoader through its public interface: real workers, a real MLflow store, real gloo ranks."""

from __future__ import annotations

import gc
import json
import os
import re
import sqlite3
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.utils.data
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.data.conftest import WorkerTagged, wall_clock, write_files
from uc_jupyter import notices
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.data.cache import CacheBudgetError, FileCache
from uc_jupyter.data.loader.dataloader import BatchTiming
from uc_jupyter.processes import free_port
from uc_jupyter.telemetry.mlflow_sink import JOB_METRICS, metric_names
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.scripts import run_python
from uc_jupyter.widgets.advice import advise, verdict

Volume = Callable[..., tuple[str, Path]]


class Squares(torch.utils.data.Dataset[int]):
    """A map-style dataset that takes ``delay`` seconds per item."""

    def __init__(self, n: int, delay: float = 0.0) -> None:
        self.n, self.delay = n, delay

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        if self.delay:
            time.sleep(self.delay)
        return i * i


def name_in(path: str) -> str:
    """The name a test file carries at its start (cached copies are named by their key)."""
    return Path(path).read_bytes().split(b":", 1)[0].decode()


def names(batches: list[list[str]]) -> list[str]:
    return [name for batch in batches for name in batch]


# ------------------------------------------------------------------ defaults and bad input


def test_defaults_are_tuned_and_clamped_once(capsys: pytest.CaptureFixture[str]) -> None:
    notices.reset()
    cpus = len(os.sched_getaffinity(0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a notice line, never a UserWarning
        first = DataLoader(Squares(4))
        DataLoader(Squares(4))
    expected = min(6, cpus)
    assert (first.num_workers, first.prefetch_factor, first.persistent_workers) == (expected, 4, True)
    clamps = [line for line in capsys.readouterr().err.splitlines() if "instead of 6" in line]
    assert clamps == (
        [
            f"uc_jupyter DataLoader: using {cpus} workers instead of 6 (this process may use {cpus} CPUs); "
            "pass num_workers= to choose"
        ]
        if cpus < 6
        else []
    )


def test_given_arguments_win() -> None:
    loader = DataLoader(Squares(4), batch_size=2, num_workers=1, prefetch_factor=2, persistent_workers=False)
    assert (loader.num_workers, loader.prefetch_factor, loader.persistent_workers) == (1, 2, False)
    single = DataLoader(Squares(4), num_workers=0)
    assert (single.prefetch_factor, single.persistent_workers) == (None, False)
    assert list(single) == [torch.tensor([0]), torch.tensor([1]), torch.tensor([4]), torch.tensor([9])]


def test_bad_arguments_get_torchs_clear_errors() -> None:
    with pytest.raises(ValueError, match="prefetch_factor"):
        DataLoader(Squares(4), num_workers=0, prefetch_factor=2)
    with pytest.raises(TypeError, match="needs a torch Dataset, an IterableDataset or a sequence, got int"):
        DataLoader(42)
    with pytest.raises(ValueError, match="num_workers"):
        DataLoader(Squares(4), num_workers=-1)
    with pytest.raises(TypeError, match="add_hook needs a callable"):
        DataLoader(Squares(4), num_workers=0).add_hook("print")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        ((), {"batch_size": 0}, ValueError, "invalid batch_size 0: give a whole number >= 1"),
        ((), {"batch_size": 2.0}, TypeError, "invalid batch_size 2.0"),
        ((), {"batch_size": True}, TypeError, "invalid batch_size True"),
        ((0,), {}, ValueError, "invalid batch_size 0"),  # by position, torch's order
        ((), {"shuffle": "no"}, TypeError, "invalid shuffle 'no': give True or False"),
        ((4, 1), {}, TypeError, "invalid shuffle 1"),
        ((), {"num_workers": 1.5}, TypeError, "invalid num_workers 1.5"),
        ((), {"num_workers": True}, TypeError, "invalid num_workers True"),
        ((), {"num_workers": 2, "prefetch_factor": 0}, ValueError, "invalid prefetch_factor 0"),
        ((), {"num_workers": 0, "prefetch_factor": 2}, ValueError, "invalid prefetch_factor with num_workers=0"),
        ((), {"persistent_workers": "yes"}, TypeError, "invalid persistent_workers 'yes'"),
        ((), {"pin_memory": 1}, TypeError, "invalid pin_memory 1"),
        ((), {"drop_last": None}, TypeError, "invalid drop_last None"),
        ((), {"timeout": -1}, ValueError, "invalid timeout -1"),
        ((), {"collate_fn": 123}, TypeError, "invalid collate_fn 123: give a function (a callable) or None"),
        ((), {"worker_init_fn": "seed"}, TypeError, "invalid worker_init_fn 'seed'"),
        ((), {"mlflow": "off"}, TypeError, "invalid mlflow 'off'"),
        ((), {"monitor": "no"}, TypeError, "invalid monitor 'no'"),
        ((), {"batchsize": 4}, TypeError, "DataLoader: got an unexpected keyword argument 'batchsize'"),
    ],
)
def test_bad_values_are_one_line_errors_naming_the_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=re.escape(message)) as caught:
        DataLoader(Squares(4), *args, **kwargs)
    assert "\n" not in str(caught.value)


def test_allowed_values_pass_through_to_torch() -> None:
    unbatched = DataLoader(Squares(3), batch_size=None, shuffle=None, num_workers=0, timeout=0.0)
    assert list(unbatched) == [0, 1, 4]
    shuffled = DataLoader(Squares(4), 4, True, num_workers=0, generator=torch.Generator().manual_seed(0))
    assert sorted(next(iter(shuffled)).tolist()) == [0, 1, 4, 9]


# ------------------------------------------------------------------ timing


class Ticking(torch.utils.data.Dataset[int]):
    """A map-style dataset whose every item costs ``cost`` seconds of the test's ``clock``."""

    def __init__(self, n: int, clock: ManualClock, cost: float) -> None:
        self.n, self.clock, self.cost = n, clock, cost

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        self.clock.sleep(self.cost)
        return i * i


def test_hooks_attribute_waiting_to_fetch_and_work_to_compute() -> None:
    clock = wall_clock()
    loader = DataLoader(Ticking(6, clock, cost=0.02), batch_size=2, num_workers=0, clock=clock)
    timings: list[BatchTiming] = []
    remove = loader.add_hook(timings.append)
    for _ in loader:
        clock.sleep(0.05)  # the training step
    assert [t.index for t in timings] == [0, 1, 2]
    assert [t.batch_size for t in timings] == [2, 2, 2]
    assert [t.fetch_seconds for t in timings] == pytest.approx([0.04] * 3, abs=1e-6)  # two items of 0.02 s
    assert [t.compute_seconds for t in timings] == pytest.approx([0.0, 0.05, 0.05], abs=1e-6)  # none before the first
    remove()
    list(loader)
    assert len(timings) == 3
    stats = loader.stats()
    assert (stats.batches, stats.samples_delivered) == (6, 12)
    assert stats.fetch.total == pytest.approx(6 * 0.04, abs=1e-6)
    assert stats.between.total == pytest.approx(2 * 0.05, abs=1e-6)  # the second pass's loop did no work
    assert stats.fetch.quantile(0.0) <= 0.04 <= stats.fetch.quantile(1.0)  # every batch in 0.04's bucket


class SlowToStart(torch.utils.data.IterableDataset[int]):
    """A stream that takes ``start`` seconds of the test's clock to begin (a listing) and ``cost`` per item."""

    def __init__(self, n: int, clock: ManualClock, start: float, cost: float) -> None:
        self.n, self.clock, self.start, self.cost = n, clock, start, cost

    def __iter__(self) -> Iterator[int]:
        self.clock.sleep(self.start)  # at iter(): torch begins the stream when the pass begins
        return self._items()

    def _items(self) -> Iterator[int]:
        for i in range(self.n):
            self.clock.sleep(self.cost)
            yield i


def test_start_up_is_measured_apart_from_the_steady_state_pass_by_pass() -> None:
    clock = wall_clock()
    loader = DataLoader(SlowToStart(6, clock, start=0.3, cost=0.01), batch_size=2, num_workers=0, clock=clock)
    for _ in loader:
        clock.sleep(0.05)  # the training step
    (loop,) = loader.stats().loops().values()
    assert loop.setup == pytest.approx(0.3, abs=1e-6)  # iter(): before the loop asked for anything
    assert loop.first_waits == pytest.approx(0.02, abs=1e-6)  # the first batch's two items
    assert loop.startup == pytest.approx(0.32, abs=1e-6)
    assert loop.exposed_wait == pytest.approx(0.04 / (0.04 + 0.10), abs=1e-6)  # two later batches, two steps
    list(loader)
    (loop,) = loader.stats().loops().values()
    assert (loop.setup, loop.first_waits) == (pytest.approx(0.6, abs=1e-6), pytest.approx(0.04, abs=1e-6))


def test_a_hook_that_removes_itself_never_makes_another_miss_a_batch() -> None:
    loader = DataLoader(list(range(4)), batch_size=1, num_workers=0, mlflow=False)
    seen: list[str] = []
    remove_first = loader.add_hook(lambda t: (seen.append("first"), remove_first()))
    loader.add_hook(lambda t: seen.append("second"))
    list(loader)
    assert seen == ["first"] + ["second"] * 4


def test_the_loops_telemetry_goes_out_at_most_ten_times_a_second() -> None:
    """Published when due after a batch (10 a second on the loader's clock), and at once by stats()."""
    clock = wall_clock()
    loader = DataLoader(Ticking(40, clock, cost=0.01), batch_size=1, num_workers=0, mlflow=False, clock=clock)
    seen = []
    for _ in loader:  # 40 batches over 0.4 s of the clock
        seen.append(loader.live_stats().batches)
    assert seen[0] == 1  # the first batch goes out at once
    assert len(set(seen)) == 4  # then once per 0.1 s: batches 1, 11, 21, 31
    assert loader.stats().batches == 40  # and everything at the end


FORK_SAFETY = textwrap.dedent(
    """
    import json, os, sys
    from uc_jupyter.data import DataLoader
    from uc_jupyter.storage.downloads import Job
    from uc_jupyter.storage.retry import RetryPolicy
    from uc_jupyter.storage.reads import open_storage

    def method(loader):
        context = loader.multiprocessing_context
        return None if context is None else context.get_start_method()

    options, out = json.loads(sys.argv[1]), sys.argv[2]
    clean = method(DataLoader(list(range(4)), batch_size=2, num_workers=1, mlflow=False))
    storage = open_storage("s3://forkless/data", options, where="/Volumes/c/s/v")
    downloads = storage.downloads(RetryPolicy(attempts=1), on_retry=lambda: None, threads=1)
    downloads.start([Job("forkless/data/a.bin", os.path.join(out, "a.bin"), "/Volumes/c/s/v/a.bin", 4)])[0].result(60)
    downloads.close()  # this process has made an object_store request: forked children cannot
    dirty = DataLoader(list(range(4)), batch_size=2, num_workers=1, mlflow=False)
    unpicklable = DataLoader(list(range(4)), batch_size=2, num_workers=1, mlflow=False, collate_fn=lambda b: b)
    chosen = DataLoader(list(range(4)), batch_size=2, num_workers=1, mlflow=False, multiprocessing_context="forkserver")
    batches = [b.tolist() for b in dirty]
    print(json.dumps([clean, method(dirty), method(unpicklable), method(chosen), batches]))
    """
)


def test_workers_are_spawned_once_this_process_has_used_object_storage(s3: Any, tmp_path: Path) -> None:
    """A forked child of a process that made an object_store request hangs on its own first one:
    without a context of the caller's, workers are then spawned (one notice), unless what they need
    does not pickle. Run in a fresh interpreter: the test process may have used obstore."""
    folder = s3.bucket("forkless") / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"body")
    answer, run = run_python(FORK_SAFETY, json.dumps(s3.storage_options), str(tmp_path), timeout=240)
    clean, dirty, unpicklable, chosen, batches = answer
    assert (clean, dirty, unpicklable, chosen) == (None, "spawn", None, "forkserver")
    assert batches == [[0, 1], [2, 3]]
    notices = [line for line in run.stderr.splitlines() if line.startswith("uc_jupyter DataLoader:")]
    assert len(notices) == 2  # each once
    assert notices[0] == (
        "uc_jupyter DataLoader: starting workers with multiprocessing_context='spawn' (this process has "
        "used object storage, which forked workers cannot); pass multiprocessing_context= to choose"
    )
    assert notices[1].startswith(
        "uc_jupyter DataLoader: this process has used object storage, so forked workers cannot; they would "
        "be spawned, but the dataset or its functions do not pickle ("
    )


def test_each_batch_is_attributed_to_the_worker_that_made_it() -> None:
    """Worker 0 runs out after two batches, worker 1 has six: torch skips worker 0's empty task and
    hands on worker 1's batch, which was counted as worker 0's (and so moved the wrong stream's
    resume position and file pins)."""
    loader = DataLoader(
        WorkerTagged([2, 6]),
        batch_size=1,
        num_workers=2,
        prefetch_factor=2,
        multiprocessing_context="fork",
        mlflow=False,
    )
    seen: list[int | None] = []
    loader.add_hook(lambda timing: seen.append(timing.worker))
    made = [int(batch[0]) for batch in loader]
    assert sorted(made) == [0] * 2 + [1] * 6
    assert seen == made


def test_workers_report_their_shards_and_cache(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 30)
    dataset = UCVolumeDataset(path, cache_max_bytes=10**6, min_free_bytes=0)
    loader = DataLoader(dataset, batch_size=5, num_workers=2, multiprocessing_context="fork")
    seen: list[int | None] = []
    loader.add_hook(lambda t: seen.append(t.worker))
    assert sum(len(b) for b in loader) == 30
    assert set(seen) == {0, 1}
    depths: list[dict[tuple[int, int], int]] = []
    for _ in loader:  # a second pass: the loop's samples carry how many batches each worker owes
        stats = loader.stats()
        depths.append(stats.queue_depths())
        assert stats.samples[(0, -1)].queue_depth == sum(stats.queue_depths().values())
    assert {key for d in depths for key in d} == {(0, 0), (0, 1)}
    assert max(max(d.values()) for d in depths) > 0
    stats = loader.stats()  # the workers' last counters arrived with the pass's end, not a moment after
    assert stats.worker_shard_sizes() == {(0, 0): 15, (0, 1): 15}
    assert stats.shard_sizes() == {0: 30}
    assert (stats.misses, stats.hits) == (30, 30)  # the second pass hit the cache
    assert stats.cache_max_bytes == 10**6
    assert stats.cache_used_bytes == 30 * 100


# ------------------------------------------------------------------ MLflow


@pytest.fixture
def tracking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.delenv("MLFLOW_RUN_ID", raising=False)
    mlflow.set_tracking_uri(uri)
    yield mlflow
    while mlflow.active_run() is not None:
        mlflow.end_run()


def test_metrics_land_under_the_reference_keys(tracking: Any, s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 40)
    loader = DataLoader(UCVolumeDataset(path, min_free_bytes=0), batch_size=4, num_workers=0)
    with tracking.start_run() as run:
        for _ in range(2):
            list(loader)
        loader.close()  # waits for the background logging
    client = tracking.tracking.MlflowClient()
    logged = client.get_run(run.info.run_id).data.metrics
    assert set(metric_names(0).values()) <= set(logged)
    history = client.get_metric_history(run.info.run_id, "dataloader/fetch_seconds/rank_0")
    steps = [m.step for m in history]
    assert steps == sorted(steps) and len(set(steps)) == len(steps) == 2  # one flush per pass
    assert logged["dataloader/cache_hit_rate/rank_0"] == 1.0  # the second pass hit every file


def fetch_steps(tracking: Any, run_id: str, rank: int = 0) -> list[int]:
    client = tracking.tracking.MlflowClient()
    return [m.step for m in client.get_metric_history(run_id, metric_names(rank)["fetch"])]


def test_a_start_run_block_leaves_every_pass_s_point_in_the_run(tracking: Any) -> None:
    """Issue 16: a pass's point is logged off the loop's path; issue 31: the block's end of the run
    waits for it, so every pass's point is in the run when the block exits (no close(), no wait),
    and nothing after it. Issue 19 before them: right after two passes the history held one point
    instead of one per pass."""
    loader = DataLoader(list(range(16)), batch_size=4, num_workers=0)
    with tracking.start_run() as run:
        for _epoch in range(3):
            for _batch in loader:
                pass
    assert tracking.tracking.MlflowClient().get_run(run.info.run_id).info.status == "FINISHED"
    assert fetch_steps(tracking, run.info.run_id) == [4, 8, 12]
    loader.close()
    assert fetch_steps(tracking, run.info.run_id) == [4, 8, 12]


def test_the_loop_does_not_wait_on_a_slow_mlflow_at_a_pass_end(tracking: Any, tmp_path: Path) -> None:
    """The tracking store is locked (another connection holds it exclusively) while the pass ends,
    so MLflow cannot take the point: the pass ends all the same. Had it waited for the point, it
    would have been stuck until MLflow gave up on the locked store (a failure notice, no point)."""
    notices.reset()
    loader = DataLoader(list(range(16)), batch_size=4, num_workers=0)
    with tracking.start_run() as run:
        stream = iter(loader)
        got = [next(stream) for _ in range(3)]
        store = sqlite3.connect(tmp_path / "mlflow.db", isolation_level=None)
        store.execute("BEGIN EXCLUSIVE")
        try:
            got += list(stream)  # the pass ends here, with MLflow unable to write
            assert store.execute("SELECT count(*) FROM metrics").fetchone() == (0,)
        finally:
            store.execute("ROLLBACK")
            store.close()
        assert len(got) == 4
        loader.close()  # waits for the point now that MLflow can take it
        assert fetch_steps(tracking, run.info.run_id) == [4]


def test_a_pass_ending_inside_a_nested_run_logs_into_the_loader_s_run(tracking: Any) -> None:
    """The pass began in the parent run and ends while a nested run is active: the point goes to the
    parent, which still runs (the store says so), not into nowhere."""
    loader = DataLoader(list(range(16)), batch_size=4, num_workers=0)
    with tracking.start_run() as parent:
        stream = iter(loader)
        next(stream)
        with tracking.start_run(nested=True) as child:
            assert len(list(stream)) == 3
        loader.close()
    assert fetch_steps(tracking, parent.info.run_id) == [4]
    assert fetch_steps(tracking, child.info.run_id) == []


_ENDINGS = {
    # The process ends on its own after the block: the point waiting is logged at exit.
    "exit": "",
    # close() returns with every point logged: a SIGKILL right after loses nothing.
    "close then SIGKILL": "loader.close(); os.kill(os.getpid(), signal.SIGKILL)",
}


@pytest.mark.parametrize("ending", _ENDINGS)
def test_the_process_ending_loses_no_point(tracking: Any, tmp_path: Path, ending: str) -> None:
    script = textwrap.dedent(
        f"""
        import os, signal, sys
        import mlflow
        from uc_jupyter.data import DataLoader

        loader = DataLoader(list(range(16)), batch_size=4, num_workers=0)
        with mlflow.start_run() as run:
            print(run.info.run_id, flush=True)
            for epoch in range(3):
                for batch in loader:
                    pass
            {_ENDINGS[ending]}
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert done.returncode == (-9 if "SIGKILL" in ending else 0), done.stderr
    run_id = done.stdout.split()[0]
    assert fetch_steps(tracking, run_id) == [4, 8, 12]


def test_a_rank_call_returns_with_its_points_in_the_run(tracking: Any) -> None:
    """A rank's pass hands its point to the rank's logging thread; the rank waits for it before it
    replies, so when the call returns both ranks' points are in the parent's run."""
    from uc_jupyter.distributed.pool import RankPool

    with tracking.start_run() as run:
        pool = RankPool(2, devices="cpu", stop_grace=2.0)
        try:
            cell = textwrap.dedent(
                f"""
                import os
                os.environ["MLFLOW_RUN_ID"] = {run.info.run_id!r}
                from uc_jupyter.data import DataLoader
                loader = DataLoader(list(range(16)), batch_size=4, num_workers=0)
                sum(len(batch) for batch in loader)
                """
            )
            assert pool.execute(cell) == [16, 16]
            assert [fetch_steps(tracking, run.info.run_id, rank) for rank in (0, 1)] == [[4], [4]]
        finally:
            pool.shutdown()


def test_ranks_log_into_the_kernels_run_and_the_kernel_logs_the_jobs_worst_rank(
    tracking: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Called inside ``with mlflow.start_run()``, ranks log their keys into that run without being
    told (the call carries it, and the kernel's tracking URI: the ranks' environment names none), and
    the kernel logs the job's maximum exposed wait from their telemetry: rank 1, whose items take 5 ms,
    is the rank it names. A later call made without a run logs nothing into it."""
    from uc_jupyter.distributed.pool import RankPool

    monkeypatch.delenv("MLFLOW_TRACKING_URI")  # only mlflow.set_tracking_uri, in this process
    cell = textwrap.dedent(
        """
        import time, torch.distributed as dist
        from uc_jupyter.data import DataLoader

        class Items:
            def __init__(self, seconds):
                self.seconds = seconds
            def __len__(self):
                return 32
            def __getitem__(self, index):
                time.sleep(self.seconds)
                return index

        loader = DataLoader(Items(0.005 if dist.get_rank() == 1 else 0.0), batch_size=4, num_workers=0)
        delivered = 0
        for batch in loader:
            time.sleep(0.005)  # the step
            delivered += len(batch)
        delivered
        """
    )
    pool = RankPool(2, devices="cpu", stop_grace=2.0)
    try:
        with tracking.start_run() as run:
            assert pool.execute(cell) == [32, 32]
            client = tracking.tracking.MlflowClient()
            waits = [
                client.get_metric_history(run.info.run_id, metric_names(r)["exposed_wait_seconds"]) for r in (0, 1)
            ]
            assert [[m.step for m in history] for history in waits] == [[8], [8]]
            (worst,) = client.get_metric_history(run.info.run_id, JOB_METRICS["max_exposed_wait_seconds"])
            (which,) = client.get_metric_history(run.info.run_id, JOB_METRICS["max_exposed_wait_rank"])
            assert which.value == 1.0 and worst.step == 8
            assert abs(worst.value - waits[1][0].value) < 1e-6 and worst.value > 4 * waits[0][0].value + 0.01
        assert pool.execute(cell) == [32, 32]
        assert [len(client.get_metric_history(run.info.run_id, metric_names(r)["fetch"])) for r in (0, 1)] == [1, 1]
    finally:
        pool.shutdown()


def test_nothing_is_logged_after_the_run_has_ended(tracking: Any, s3_volume: Volume) -> None:
    """A pass that ends after its run did (an iterator kept past ``with start_run()``) logs nothing
    into the finished run; before, its window was logged there by the background thread."""
    path, folder = s3_volume()
    write_files(folder, 16)
    loader = DataLoader(UCVolumeDataset(path, min_free_bytes=0), batch_size=4, num_workers=0)
    with tracking.start_run() as run:
        stream = iter(loader)
        next(stream)
    assert len(list(stream)) == 3
    loader.close()
    client = tracking.tracking.MlflowClient()
    assert client.get_metric_history(run.info.run_id, metric_names(0)["fetch"]) == []


def test_nothing_is_logged_without_a_run(tracking: Any) -> None:
    loader = DataLoader(Squares(8), batch_size=2, num_workers=0)
    list(loader)
    assert loader._mlflow is None
    assert tracking.search_runs(search_all_experiments=True).empty


def _rank_main(rank: int, port: int, run_id: str, home: str, path: str, batch_sizes: list[int], out: str) -> None:
    import torch.distributed as dist

    os.environ.update(
        {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "UC_JUPYTER_HOME": home, "MLFLOW_RUN_ID": run_id}
    )
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        loader = DataLoader(UCVolumeDataset(path, min_free_bytes=0), batch_size=batch_sizes[rank], num_workers=0)
        with loader:  # close() delivers the MLflow metrics before the rank exits
            count = sum(len(b) for b in loader)
        Path(out, f"rank{rank}").write_text(str(count))
    except RuntimeError as exc:
        Path(out, f"rank{rank}").write_text(f"error: {exc}")
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("batch_sizes", [[4, 4], [4, 5]], ids=["same", "mismatch"])
def test_two_gloo_ranks_log_into_one_parent_run(
    tracking: Any, s3_volume: Volume, isolated_home: Path, tmp_path: Path, batch_sizes: list[int]
) -> None:
    path, folder = s3_volume()
    write_files(folder, 21)
    with tracking.start_run() as run:
        torch.multiprocessing.spawn(
            _rank_main,
            args=(free_port(), run.info.run_id, str(isolated_home), path, batch_sizes, str(tmp_path)),
            nprocs=2,
        )
    results = [Path(tmp_path, f"rank{r}").read_text() for r in (0, 1)]
    if batch_sizes[0] != batch_sizes[1]:
        assert all("ranks disagree on batch_size: rank 0 has 4, rank 1 has 5" in r for r in results)
        return
    assert results == ["11", "11"]  # 21 files padded to 22, 11 per rank
    logged = tracking.tracking.MlflowClient().get_run(run.info.run_id).data.metrics
    for rank in (0, 1):
        assert metric_names(rank)["fetch"] in logged
        assert metric_names(rank)["samples_per_second"] in logged


# ------------------------------------------------------------------ resume


@pytest.mark.parametrize("workers", [0, 1, 2])
def test_resume_mid_epoch_twice_delivers_every_file_once(s3_volume: Volume, workers: int) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 37)

    def fresh() -> DataLoader:
        dataset = UCVolumeDataset(path, shuffle=True, seed=9, min_free_bytes=0, transform=name_in)
        return DataLoader(
            dataset, batch_size=3, num_workers=workers, multiprocessing_context="fork" if workers else None
        )

    first = fresh()
    stream = iter(first)
    delivered = [next(stream) for _ in range(4)]
    state = json.loads(json.dumps(first.state_dict()))
    del stream

    second = fresh()
    second.load_state_dict(state)
    stream = iter(second)
    delivered += [next(stream) for _ in range(3)]
    state = json.loads(json.dumps(second.state_dict()))
    del stream

    third = fresh()
    third.load_state_dict(state)
    delivered += list(third)
    assert sorted(names(delivered)) == sorted(files)


def test_resume_refuses_other_data(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 10)
    loader = DataLoader(UCVolumeDataset(path, seed=1, shuffle=True), batch_size=2, num_workers=0)
    next(iter(loader))
    state = loader.state_dict()
    other_shuffle = DataLoader(UCVolumeDataset(path, seed=1), batch_size=2, num_workers=0)
    with pytest.raises(ValueError, match="the checkpoint's shuffle is True, this dataset's is False"):
        other_shuffle.load_state_dict(state)
    other_seed = DataLoader(UCVolumeDataset(path, seed=2, shuffle=True), batch_size=2, num_workers=0)
    with pytest.raises(ValueError, match="the checkpoint's seed is 1, this dataset's is 2"):
        other_seed.load_state_dict(state)
    with pytest.raises(ValueError, match="not a DataLoader state"):
        loader.load_state_dict({"epoch": 0})
    with pytest.raises(TypeError, match="Squares cannot be checkpointed"):
        DataLoader(Squares(4), num_workers=0).state_dict()


def test_spawned_workers_deliver_and_report(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    files = write_files(folder, 12)
    loader = DataLoader(
        UCVolumeDataset(path, min_free_bytes=0, transform=name_in),
        batch_size=4,
        num_workers=2,
        multiprocessing_context="spawn",
    )
    assert sorted(names(list(loader))) == sorted(files)
    assert loader.stats().worker_shard_sizes() == {(0, 0): 6, (0, 1): 6}


def test_workers_started_after_this_process_used_object_storage_are_spawned(s3_volume: Volume, catalog: Any) -> None:
    """A loader made in a clean process forks its workers; when the process has used object_store
    since (here a write, as a checkpoint read by dcp.load would), its next workers are spawned."""
    from uc_jupyter.storage.writes import open_writes

    path, folder = s3_volume()
    files = write_files(folder, 8)
    loader = DataLoader(UCVolumeDataset(path, transform=name_in), batch_size=4, num_workers=2, mlflow=False)
    assert loader.multiprocessing_context is None  # forked: nothing has used object_store yet
    resolved = catalog.resolve_volume_path(f"{path}/out", write=True)
    open_writes(resolved.url, resolved.storage_options).put_bytes("marker", b"1")
    assert sorted(names(list(loader))) == sorted(files)
    assert loader.multiprocessing_context.get_start_method() == "spawn"


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.usefixtures("busy_machine")
def test_a_pass_ends_with_every_workers_last_counters_on_a_loaded_machine(local_volume: Volume, context: str) -> None:
    path, folder = local_volume()
    write_files(folder, 37)  # not divisible by 4 workers: each ends its pass on a short batch
    loader = DataLoader(
        UCVolumeDataset(path, on_uneven="allow"),
        batch_size=3,
        num_workers=4,
        multiprocessing_context=context,
        mlflow=False,
    )
    for epoch in range(3):
        assert sum(len(batch) for batch in loader) == 37
        end = loader.live_stats()  # what a dashboard's last poll reads: no forced collection
        assert sum(s.files for (_, worker), s in end.samples.items() if worker >= 0) == 37 * (epoch + 1)


def name_and_size(path: str) -> tuple[str, int]:
    return Path(path).name, Path(path).stat().st_size


def test_pair_samples_count_one_per_pair(local_volume: Callable[..., tuple[str, Path]]) -> None:
    """torch collates (x, y) samples into a list of two fields: a batch of 4 pairs holds 4 samples."""
    path, folder = local_volume()
    write_files(folder, 10)
    loader = DataLoader(UCVolumeDataset(path, transform=name_and_size), batch_size=4, num_workers=0, mlflow=False)
    sizes: list[int] = []
    loader.add_hook(lambda timing: sizes.append(timing.batch_size))
    batches = list(loader)
    assert [len(names) for names, _ in batches] == [4, 4, 2]
    assert sizes == [4, 4, 2]
    assert loader.stats().samples_delivered == 10
    stream = iter(loader)
    next(stream), next(stream)
    assert loader.state_dict()["segments"] == [[1, 1, "pad", [8]]]  # 8 samples of 2 batches of pairs


# ------------------------------------------------------------------ paths stay valid while their batch is used


def read_batch(batch: list[str]) -> list[str]:
    """The names the files of ``batch`` carry, read now (FileNotFoundError if one is gone)."""
    return [name_in(path) for path in batch]


def test_streamed_paths_stay_valid_until_the_loop_moves_past_their_batch(s3_volume: Volume, tmp_path: Path) -> None:
    """Issue 19: past a full cache, a streamed file of the batch in hand was deleted to make room for
    the next download (FileNotFoundError: .../cache/stream/<pid>/6.bin)."""
    path, folder = s3_volume()
    files = write_files(folder, 16, size=32 * 1024)
    dataset = UCVolumeDataset(path, cache_dir=tmp_path / "cache", cache_max_bytes=6 * 32 * 1024, min_free_bytes=0)
    loader = DataLoader(dataset, batch_size=4, num_workers=0, collate_fn=list, mlflow=False)
    read: list[str] = []
    for batch in loader:
        read += read_batch(batch)
    assert sorted(read) == sorted(files)
    stats = dataset.stats().streams[0]
    assert stats.streamed > 0  # the budget was full: files did stream through


def test_later_passes_through_a_budget_of_a_few_files_neither_wait_nor_fail(s3_volume: Volume, tmp_path: Path) -> None:
    """The same budget of 6 files for 16, over three passes. A later pass found 5 files resident
    and pinned them ahead of the loop as hits, so the cache could evict none of them for the file the
    loop needed: the pass waited out the cache's wait_seconds (120 s) and raised CacheBudgetError;
    the first pass waited out starve_seconds (1 s) for room that nobody else could make. The cache's
    clock is injected and its wait_seconds are below its starve_seconds: either wait fails at once."""
    path, folder = s3_volume()
    files = write_files(folder, 16, size=32 * 1024)
    clock = wall_clock()
    cache = FileCache(
        tmp_path / "cache", max_bytes=6 * 32 * 1024, min_free_bytes=0, wait_seconds=0.5, clock=clock, sleep=clock.sleep
    )
    dataset = UCVolumeDataset(path, cache_dir=cache)
    loader = DataLoader(dataset, batch_size=4, num_workers=0, collate_fn=list, mlflow=False)
    for _ in range(3):
        read: list[str] = []
        for batch in loader:
            read += read_batch(batch)
        assert sorted(read) == sorted(files)
    assert dataset.stats().streams[0].hits > 0  # later passes reused what stayed resident


class QuickTime(ManualClock):
    """The cache's clock and sleep: a wait passes at once (a millisecond really, so that other
    processes run), so its rule of evicting after a second of waiting costs nothing here."""

    def sleep(self, seconds: float) -> None:
        super().sleep(seconds)
        time.sleep(0.001)


def test_every_path_stays_valid_until_the_loop_moves_past_its_batch(
    s3_volume: Volume, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Over batch sizes, worker counts, prefetch factors, budgets and both ways of caching: files
    go through the smallest budget a loader accepts (a batch in each worker and the loop's) or a
    few files more, far less than every batch torch asks for, over two passes of persistent
    workers, and each path of a batch is read just before the loop asks for the next. Workers that
    waited on each other for room (as they did below ``(prefetch_factor * num_workers + 1) *
    batch_size`` files) fail with the cache's CacheBudgetError instead of hanging."""
    path, folder = s3_volume()
    files = write_files(folder, 23, size=1000)  # not a multiple of most batch sizes: partial batches

    @settings(max_examples=30, deadline=None)
    @given(
        batch_size=st.integers(1, 5),
        workers=st.integers(0, 2),
        prefetch_factor=st.integers(1, 3),
        slack=st.integers(0, 4),
        keep=st.booleans(),
    )
    def check(batch_size: int, workers: int, prefetch_factor: int, slack: int, keep: bool) -> None:
        held = (workers + 1) * batch_size if workers else batch_size
        quick = QuickTime()
        cache = FileCache(
            tmp_path_factory.mktemp("cache"),
            max_bytes=(held + slack) * 1000,
            min_free_bytes=0,
            wait_seconds=10**4,  # on the quick clock: about 20 s of real waiting
            clock=quick,
            sleep=quick.sleep,
        )
        dataset = UCVolumeDataset(path, cache="auto" if keep else "never", cache_dir=cache, prefetch=1)
        extra: dict[str, Any] = {"prefetch_factor": prefetch_factor, "multiprocessing_context": "fork"}
        loader = DataLoader(
            dataset,
            batch_size=batch_size,
            num_workers=workers,
            collate_fn=list,
            mlflow=False,
            **(extra if workers else {}),
        )
        for _ in range(2):
            read: list[str] = []
            for batch in loader:
                read += read_batch(batch)
            assert sorted(read) == sorted(files)

    check()


def test_a_budget_too_small_for_one_batch_is_an_error_at_once(s3_volume: Volume, tmp_path: Path) -> None:
    """Four files in use at once cannot fit a budget of two and a half: an error naming the budget,
    not a path deleted under the loop (nor a wait that cannot end)."""
    path, folder = s3_volume()
    write_files(folder, 8, size=1000)
    dataset = UCVolumeDataset(path, cache="never", cache_dir=tmp_path / "cache", cache_max_bytes=2500, min_free_bytes=0)
    with pytest.raises(CacheBudgetError, match=r"2,500 bytes holds 2 of its files, but this loader needs room for 4"):
        DataLoader(dataset, batch_size=4, num_workers=0, collate_fn=list, mlflow=False)  # when it is made


def test_a_batch_larger_than_a_workers_share_is_an_error_at_once(s3_volume: Volume, tmp_path: Path) -> None:
    """The loader accepts a budget of six of the smallest files (a batch in each of 2 workers and the
    loop's), but a batch of two large files passes a worker's half of it: one line naming the
    numbers as the first pass starts, not a wait of the cache's wait_seconds."""
    path, folder = s3_volume()
    write_files(folder, 8, size=1000)
    write_files(folder, 8, size=5000, prefix="large")
    cache = FileCache(tmp_path / "cache", max_bytes=6000, min_free_bytes=0, wait_seconds=3600)
    dataset = UCVolumeDataset(path, cache="never", cache_dir=cache)
    loader = DataLoader(dataset, batch_size=2, num_workers=2, collate_fn=list, mlflow=False)
    refused = r"a batch of 2 files needs \d{1,2},000 bytes, more than a worker's share"
    with pytest.raises(CacheBudgetError, match=refused):
        for _ in loader:
            pass


def test_paths_of_workers_that_do_not_persist_stay_valid_after_torch_ends_them(s3_volume: Volume, s3: Any) -> None:
    """torch ends a worker that does not persist as soon as it says its stream ended, even while its
    last batches still wait their turn in the loop's queue; a sibling waiting for room used to take
    back its streamed files then (FileNotFoundError on a path of a batch not yet handed out). Half
    a budget that cannot hold the batches in flight, latency like the store's: about one run in two
    failed before."""
    path, folder = s3_volume()
    write_files(folder, 500, size=18_000)
    s3.configure(latency=0.025, latency_sigma=0.6, bandwidth=50e6)
    dataset = UCVolumeDataset(path, shuffle=True, cache_max_bytes=250 * 18_000, min_free_bytes=0)
    loader = DataLoader(
        dataset,
        batch_size=64,
        num_workers=2,
        prefetch_factor=4,
        persistent_workers=False,
        multiprocessing_context="fork",
        collate_fn=list,
        mlflow=False,
    )
    read = sum(len(Path(p).read_bytes()) for batch in loader for p in batch)
    assert read == 500 * 18_000
    stream = Path(dataset.cache.root) / "stream"  # type: ignore[union-attr]
    list(loader)  # the next pass takes back what the first pass's workers left
    loader.close()
    assert [p for p in stream.iterdir() if any(p.iterdir())] == []


# ------------------------------------------------------------------ a loader let go of


@pytest.mark.parametrize("monitor", [False, True])
def test_a_loader_let_go_of_stops_its_workers_at_once(monitor: bool) -> None:
    """Nothing of the loader's own keeps it alive (its reporter, its dashboard's source): when its last
    name goes, torch stops its persistent workers there and then. In a reference cycle it waited for
    the garbage collector, which stopped each worker only after torch's 5 s join timeout."""
    import gc
    import weakref

    loader = DataLoader(Squares(8), batch_size=2, num_workers=2, monitor=monitor, mlflow=False)
    for _ in range(2):
        assert sum(len(batch) for batch in loader) == 8
    workers = list(loader._iterator._workers)  # type: ignore[union-attr]
    assert loader.persistent_workers and all(w.is_alive() for w in workers)
    gone = weakref.ref(loader)
    collecting = gc.isenabled()
    gc.disable()  # freed by its reference count, not by a collection
    try:
        del loader
        assert gone() is None
        assert not any(w.is_alive() for w in workers)
    finally:
        if collecting:
            gc.enable()


def test_a_loader_in_a_cycle_of_the_callers_stops_its_workers_when_collected() -> None:
    """A cycle the loader cannot break (a dashboard of the caller's, over loader.live_stats, set as its
    dashboard_monitor) waits for the collector; the collector then stops the workers at once, not after
    torch's 5 s join timeout per worker (what it did when it closed their queues first)."""
    import gc
    import weakref

    from uc_jupyter.widgets import LoaderMonitor

    loader = DataLoader(Squares(8), batch_size=2, num_workers=3, monitor=True, mlflow=False)
    loader.dashboard_monitor = LoaderMonitor(loader.live_stats, title="mine", display=lambda widget: None)
    assert sum(len(batch) for batch in loader) == 8
    workers = list(loader._iterator._workers)  # type: ignore[union-attr]
    gone = weakref.ref(loader)
    del loader
    assert gone() is not None  # the caller's cycle holds it
    started = time.monotonic()
    gc.collect()
    assert gone() is None and not any(w.is_alive() for w in workers)
    # No join ran into torch's timeout (a worker that never heard "stop" is waited for that long).
    assert time.monotonic() - started < torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL


def burn_cpu(path: str) -> str:
    """A transform that decodes: 10 ms of this worker's CPU per file."""
    end = time.process_time() + 0.01
    while time.process_time() < end:
        pass
    return Path(path).name


def wait_on_storage(path: str) -> str:
    """A transform that waits 10 ms per file, off CPU, as a read from slow storage does."""
    time.sleep(0.01)
    return Path(path).name


def test_workers_tell_decoding_apart_from_waiting_for_storage_by_their_cpu_time(
    local_volume: Callable[..., tuple[str, Path]],
) -> None:
    path, folder = local_volume()
    write_files(folder, 40)
    shares, advice = {}, {}
    for transform in (burn_cpu, wait_on_storage):
        # One worker: a decoding worker then has a core to itself on a busy 2-core machine (CPU time
        # against wall time reads contention as waiting; the share is judged where that cannot hide it).
        loader = DataLoader(UCVolumeDataset(path, transform=transform), batch_size=4, num_workers=1, mlflow=False)
        for _ in loader:
            time.sleep(0.003)  # a step far shorter than a batch's 40 ms: the worker never rests
        stats = loader.stats()
        shares[transform.__name__] = stats.worker_cpu_share(0)
        assert verdict(stats).kind == "input-bound"
        advice[transform.__name__] = advise(stats, cpus=64)
    decoding, waiting = shares["burn_cpu"], shares["wait_on_storage"]
    assert decoding is not None and waiting is not None
    assert decoding > 0.4 and waiting < 0.3 and decoding > 2 * waiting, shares
    # Both are the decode stage, which more workers overlap; the CPU share says which kind it is.
    assert all(said[0].startswith("raise num_workers from 1 to 2: decode takes ") for said in advice.values()), advice
    no_workers = DataLoader(UCVolumeDataset(path), batch_size=4, num_workers=0, mlflow=False)
    list(no_workers)
    assert no_workers.stats().worker_cpu_share(0) is None  # the loop's own process read them


def test_a_loader_and_its_dataset_and_stats_read_in_one_line(local_volume: Callable[..., tuple[str, Path]]) -> None:
    path, folder = local_volume()
    write_files(folder, 10)
    loader = DataLoader(UCVolumeDataset(path, shuffle=True), batch_size=4, num_workers=0, mlflow=False)
    dataset = f"UCVolumeDataset('{path}', 10 files, shuffled, read in place)"
    assert repr(loader.dataset) == dataset
    assert repr(loader) == f"DataLoader({dataset}, batch_size=4, num_workers=0: 0 batches, 0 samples)"
    list(loader)
    said = repr(loader)
    assert re.fullmatch(
        rf"DataLoader\({re.escape(dataset)}, batch_size=4, num_workers=0: 3 batches, 10 samples, "
        r"exposed wait \d+%\)",
        said,
    ), said
    stats = repr(loader.stats())
    assert re.fullmatch(r"Snapshot\(1 rank: 3 batches, 10 samples at [\d.,]+ samples/s, exposed wait \d+%\)", stats), (
        stats
    )
    assert "\n" not in said + stats


@pytest.mark.parametrize("persistent", [False, True])
def test_a_pass_left_while_a_worker_waits_for_room_stops_that_worker_at_once(
    s3_volume: Volume, tmp_path: Path, persistent: bool
) -> None:
    """A budget of a batch in each worker and the loop's: each worker makes its first batch, then
    waits for the loop to move past it before pinning more. The loop takes one batch and leaves the
    pass (and, with persistent workers, the loader): the waiting workers must stop when torch asks
    them to, not be killed after torch's 5 s wait for them."""
    path, folder = s3_volume()
    write_files(folder, 40, size=1000)
    cache = FileCache(tmp_path / "cache", max_bytes=6000, min_free_bytes=0, wait_seconds=3600)
    dataset = UCVolumeDataset(path, cache="never", cache_dir=cache)
    loader = DataLoader(
        dataset,
        batch_size=2,
        num_workers=2,
        prefetch_factor=3,
        persistent_workers=persistent,
        collate_fn=list,
        mlflow=False,
        monitor=False,
    )
    batches = iter(loader)
    next(batches)
    workers = list(loader._inner._workers)  # type: ignore[attr-defined]  # torch's worker processes
    # Each worker made one batch and is making its second, for which its share has no room until
    # the loop moves past its first: it waits for that, now or once it gets there.
    began = time.monotonic()
    batches.close()  # the loop leaves the pass: without persistent workers, they are stopped
    if persistent:
        del batches, loader  # the loader goes: its persistent workers are stopped
        gc.collect()
    # torch joins each worker for up to MP_STATUS_CHECK_INTERVAL (5 s), then kills it: a worker left
    # waiting costs that whole wait, one that stops when asked a few milliseconds.
    assert time.monotonic() - began < torch.utils.data._utils.MP_STATUS_CHECK_INTERVAL
    assert not any(w.is_alive() for w in workers)
