"""``DataLoader``: torch's DataLoader with tuned defaults, per-batch timing, telemetry, MLflow and resume.

Defaults (any argument you give wins): ``num_workers=6`` (clamped, with one notice line, to the CPUs
this process may use), ``prefetch_factor=4`` and ``persistent_workers=True`` when there are
workers, started with ``multiprocessing_context="spawn"`` (one notice line) once this process has
made object_store requests, which forked workers could not make.

For every batch the training loop receives, the loader records how long the loop waited in
``next()`` (fetch time), the time since the previous ``next()`` returned (compute time), the batch
size and the worker that produced it; hooks get each record, ``stats()`` a snapshot, and an
active MLflow run the aggregates (every pass's own window, logged off the loop's path, see
:mod:`uc_jupyter.telemetry.mlflow_sink`). Workers publish their cache and shard counters as
cumulative telemetry samples at most 10 times a second over a queue that never blocks them, and
each pass's last counters through shared memory, so the snapshot at a pass's end (``stats()``, the
MLflow point, a rank's telemetry to the kernel) holds every file of the pass, however loaded the
machine (see :mod:`uc_jupyter.data.loader.workers`).

The loader tells the dataset's streams which batches the loop has moved past (per worker, in
shared memory; see :mod:`uc_jupyter.data.stream.loop_progress`), so a path a :class:`UCVolumeDataset` hands
out stays valid until the loop asks for the batch after the one that holds it, whatever the batch
size, ``num_workers``, ``prefetch_factor`` and ``collate_fn``.

Example:
    >>> from uc_jupyter.data import UCVolumeDataset, DataLoader
    >>> loader = DataLoader(UCVolumeDataset("/Volumes/main/ml/images", recursive=True), batch_size=64)  # doctest: +SKIP
    >>> remove = loader.add_hook(lambda t: print(t.fetch_seconds))  # doctest: +SKIP
    >>> for batch in loader: ...                                    # doctest: +SKIP
    >>> loader.stats().percentiles()                                # doctest: +SKIP
    {'p50': 0.0004, 'p95': 0.002, 'p99': 0.03}
"""

from __future__ import annotations

import contextlib
import copy
import functools
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict
from typing import Any

import torch
import torch.utils.data

from uc_jupyter import options as opt
from uc_jupyter.data.loader.defaults import (
    apply_defaults,
    check_arguments,
    check_dataset,
    check_ranks_agree,
    check_structures,
    worker_start_method,
)
from uc_jupyter.data.loader.fit import check_fit
from uc_jupyter.data.loader.headroom import Headroom, measure_headroom
from uc_jupyter.data.loader.loop_timing import BatchTiming, LoopPass, LoopTiming, batch_len
from uc_jupyter.data.loader.torch_tasks import outstanding
from uc_jupyter.data.loader.workers import FinalSamples, ReportingCollate, WorkerInit, dataset_sample
from uc_jupyter.data.stream import loop_progress as consumer
from uc_jupyter.data.stream.grid import current_rank
from uc_jupyter.data.stream.loop_progress import Progress
from uc_jupyter.data.stream.partition import Grid
from uc_jupyter.data.stream.position import LoaderPosition
from uc_jupyter.telemetry import uplink
from uc_jupyter.telemetry.collector import Collector
from uc_jupyter.telemetry.mlflow_sink import MlflowSink
from uc_jupyter.telemetry.model import Sample, Snapshot
from uc_jupyter.telemetry.reporter import Reporter
from uc_jupyter.telemetry.watch import PassWatch, watch_passes

__all__ = ["BatchTiming", "DataLoader"]

_TELEMETRY_QUEUE_SIZE = 1024
_SAMPLES_PER_SECOND = 10.0  # the loop's own telemetry rate (docs/architecture.md: Telemetry)


class DataLoader(torch.utils.data.DataLoader[Any]):
    """A drop-in ``torch.utils.data.DataLoader`` with tuned defaults, timing hooks and exact resume.

    Takes torch's arguments, plus ``mlflow=False`` to keep it from logging to an active MLflow run,
    ``clock=`` for the loop's monotonic seconds (fetch and compute times, the telemetry rate; tests
    pass their own), and ``monitor=True`` to show the live dashboard (verdict and what to change,
    per-epoch figures, cache fill, shard sizes, fetch latency) once a pass runs longer than a
    second: one dashboard over the loader's passes in a cell (``loader.dashboard_monitor``, a
    :class:`~uc_jupyter.widgets.LoaderMonitor`), a text summary per pass where widgets cannot
    render. Counts and flags are checked as :mod:`uc_jupyter.options` says (``shuffle="no"``,
    ``batch_size=0``, ``num_workers=1.5``, ``prefetch_factor=0`` are one-line errors, never coerced).

    Example:
        >>> loader = DataLoader(dataset, batch_size=32, num_workers=2)   # doctest: +SKIP
        >>> state = loader.state_dict()       # what the loop received so far, JSON-serialisable
        >>> loader.load_state_dict(state)     # a new loader continues with exactly the rest

    The loader is ``Stateful``: ``dcp.save({"data": loader, ...})`` stores the whole job's data
    position (every rank's), and ``dcp.load`` restores it on any world size and ``num_workers``
    (see :meth:`load_state_dict`).
    """

    def __init__(
        self,
        dataset: Any,
        *args: Any,
        mlflow: bool = True,
        monitor: bool = False,
        clock: Callable[[], float] = time.monotonic,
        **kwargs: Any,
    ) -> None:
        check_dataset(dataset)
        mlflow, monitor = opt.flag("mlflow", mlflow), opt.flag("monitor", monitor)
        clock = opt.function("clock", clock) or time.monotonic
        check_arguments(dataset, args, kwargs)
        check_structures(dataset, args, kwargs)
        if not args:  # positional arguments follow torch's order; only fill in what is missing
            apply_defaults(kwargs)
        super().__init__(dataset, *args, **kwargs)
        # Ours to choose (and to choose again, see _plumb_workers) when the caller did not.
        self._choose_start = self.num_workers > 0 and self.multiprocessing_context is None
        self._own_functions = (self.worker_init_fn, self.collate_fn)
        self._clock = clock
        self._collector = Collector(clock=clock)
        self._fetch = LoopTiming(clock)  # the loop's counters and hooks, and each pass timed
        # The loop's telemetry goes out at most 10 times a second (a pass's end and stats() at once).
        self._reporter = Reporter(_Weakly(self._take), rate=_SAMPLES_PER_SECOND, clock=clock)
        self._checked_ranks = False
        self._rank = current_rank()[0]
        self._position = LoaderPosition(self._rank, self.num_workers)
        self._started = clock()
        self._mlflow: MlflowSink | None = None
        self._log_to_mlflow = mlflow
        self.monitor = monitor
        # The one dashboard of all monitored passes, made by the first; set your own LoaderMonitor
        # before iterating to choose where and when it shows.
        self.dashboard_monitor: PassWatch | None = None
        self._inner: Iterator[Any] | None = None
        # Persistent workers stop when the loader goes, even when the loader goes in a reference cycle
        # of the caller's (a LoaderMonitor of loader.live_stats set as its dashboard_monitor): the
        # finalizer holds torch's iterator, so the collector finds it and its queues intact instead of
        # closing the queues first and leaving torch to wait 5 s per worker that never heard "stop".
        self._persistent: list[Any] = [None]
        weakref.finalize(self, _stop_persistent_workers, self._persistent).atexit = False
        self._plumb_workers()
        self._check_fit()  # what is known now; a listing still arriving is judged as the first pass starts

    def _plumb_workers(self) -> None:
        """The workers' start method (when ours to choose) and what they share with the loop: the
        telemetry queue, the final samples and which batches the loop has moved past (a stream keeps
        each file it handed out pinned, its path valid, until then: uc_jupyter.data.stream.loop_progress)."""
        init_fn, collate_fn = self._own_functions
        if self._choose_start:
            self.multiprocessing_context = worker_start_method(self.dataset, collate_fn, init_fn)
        context = (self.multiprocessing_context or torch.multiprocessing) if self.num_workers > 0 else None
        self._progress = Progress(
            self.num_workers, self.batch_size or 1, shared=context, prefetch_factor=self.prefetch_factor
        )
        self._queue: Any = None
        self._finals: FinalSamples | None = None
        self.worker_init_fn, self.collate_fn = init_fn, collate_fn
        if context is not None:
            self._queue = context.Queue(maxsize=_TELEMETRY_QUEUE_SIZE)
            self._finals = FinalSamples(context, self.num_workers)
            self.worker_init_fn = WorkerInit(init_fn, self._queue, self._progress, self._finals)
            self.collate_fn = ReportingCollate(collate_fn)

    def _check_fit(self, *, waiting_for: int = 0) -> None:
        """The batch size against what a pass holds, the cache budget against the files the loop
        holds at once (:mod:`uc_jupyter.data.loader.fit`); ``waiting_for``: items of a listing still
        arriving to wait for first."""
        check_fit(
            self.dataset,
            self.sampler,
            batch_size=self.batch_size,
            workers=self.num_workers,
            prefetch_factor=self.prefetch_factor,
            waiting_for=waiting_for,
            drop_last=self.drop_last,
        )

    def _forks_unsafely(self) -> bool:
        """Whether workers about to start would be forked from a process that has since used
        object_store (a checkpoint read by dcp.load, another volume read in place)."""
        if not self._choose_start or (self.persistent_workers and self._iterator is not None):
            return False
        method = getattr(self.multiprocessing_context, "get_start_method", lambda: "fork")()
        from uc_jupyter.storage.objects import fork_safe

        return method == "fork" and not fork_safe()

    # ---------------------------------------------------------------- iteration
    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        began = self._clock()
        if self._forks_unsafely():
            self._plumb_workers()  # spawned from now on (one notice says so)
        epoch, positioned = self._position.epoch, self._position.resuming
        own = getattr(self.dataset, "stream_position", None) if self.num_workers == 0 else None
        self._position.begin(own if callable(own) else None)
        set_epoch = getattr(self.dataset, "set_epoch", None)
        if callable(set_epoch) and not (self.persistent_workers and self._iterator is not None):
            set_epoch(epoch)
        if not self._checked_ranks:
            check_ranks_agree(self.dataset, self.num_workers, self.batch_size)
            # Before torch's sampler makes its first batch of indices (batch_size of them, one by one).
            self._check_fit(waiting_for=(self.batch_size or 0) * current_rank()[1])
            self._checked_ranks = True
        if self._log_to_mlflow:
            self._mlflow = MlflowSink.for_active_run(self._rank, self._mlflow, baseline=self.stats, clock=self._clock)
        self._progress.new_pass()  # before torch asks the workers for this pass's first batches
        self._reclaim_finished_workers()
        starts_workers = self.num_workers > 0 and not (self.persistent_workers and self._iterator is not None)
        inner = self._inner = self._start_pass()
        run = LoopPass(
            epoch=epoch,
            setup=self._clock() - began,
            starts_workers=starts_workers,
            progress=self._progress,
            position=self._position,
            workers=self.num_workers > 0,
            items=self._items_counter(),
            reporter=self._reporter,
            sample=self._loop_sample,
            sink=self._mlflow,
            stats=self.stats,
            finish=functools.partial(self._pass_ended, inner),
        )
        timed = self._fetch.timed(inner, run)
        if self.persistent_workers:
            self._persistent[0] = self._iterator  # the workers that outlive this pass
        return self._monitored(timed, epoch, positioned) if self.monitor else timed

    def _start_pass(self) -> Iterator[Any]:
        """torch's iterator for a pass. Without workers torch starts the dataset's stream here
        (``iter(dataset)``), in this process: bound to this loader's progress while it does, so the
        stream knows when the loop is done with each file (uc_jupyter.data.stream.loop_progress)."""
        if self.num_workers > 0:
            return super().__iter__()
        bound = consumer.install(self.dataset, self._progress.consumer(0))
        try:
            return super().__iter__()
        finally:
            consumer.restore(bound)

    def _pass_ended(self, inner: Iterator[Any]) -> None:
        """Whatever ended the pass: the loop's telemetry and MLflow's point for it, and its workers
        stopped unless they persist. Also runs when the interpreter shuts down with the loop
        unfinished: never raises."""
        with contextlib.suppress(Exception):
            self._progress.end_pass()  # a worker waiting for the loop to move on stops waiting
            self._drain()
            if self._mlflow is not None:
                self._mlflow.end_pass(self.stats())  # its point is logged by the sink's thread
        if not self.persistent_workers:
            _stop_workers(inner)

    def _items_counter(self) -> Callable[[Any], int]:
        """How the pass counts the samples in what the loader yields: a collated batch's length, or
        without batching the dataset's own count (a table dataset's element is a batch of rows)."""
        if self.batch_size is not None or self.batch_sampler is not None:
            return batch_len
        items_in = getattr(self.dataset, "items_in", None)
        return items_in if callable(items_in) else _one

    def _monitored(self, inner: Iterator[Any], epoch: int, positioned: bool) -> Iterator[Any]:
        """The pass as one pass of the loader's dashboard: begun, then done, stopped or failed.
        ``positioned``: a checkpoint set its epoch (the view numbers it as is, not from the cell's first)."""
        if self.dashboard_monitor is None:
            # The registered view (import uc_jupyter registers the widgets' LoaderMonitor): the
            # loader sits below the widgets and never imports them (docs/architecture.md, "Layers").
            self.dashboard_monitor = watch_passes(
                _Weakly(self.live_stats), _monitor_title(self.dataset), headroom=_Weakly(self.headroom)
            )
        watch = self.dashboard_monitor
        total = self._batches_per_pass()
        watch.begin(f"epoch {epoch}", self._final_stats(), epoch=epoch, total=total, positioned=positioned)
        try:
            yield from inner
        except GeneratorExit:
            # The loop left the pass (a break, an abandoned iterator, its body raised; then IPython
            # marks it failed at the cell's end). The timed pass drained the workers on its way out.
            watch.end(self._collector.snapshot(), stopped=True)
            raise
        except BaseException as error:
            watch.end(self._final_stats(), error=error)
            raise
        watch.end(self._final_stats())

    def _batches_per_pass(self) -> int | None:
        """The batches a pass delivers, when known: len(loader), except for a stream read by several
        workers (torch counts its batches as if one stream made them, while each worker's share ends
        on a partial batch of its own), or a dataset without a length."""
        if self.num_workers > 1 and isinstance(self.dataset, torch.utils.data.IterableDataset):
            return None
        try:
            return len(self)
        except TypeError:
            return None

    def _final_stats(self) -> Snapshot:
        """stats(), or what the collector has if the iterator is too broken to be asked (a failed pass)."""
        try:
            return self.stats()
        except Exception:
            return self._collector.snapshot()

    def live_stats(self) -> Snapshot:
        """The newest snapshot, safe to call from another thread while the loop runs (a dashboard's):
        it collects waiting worker samples but leaves the loop's own bookkeeping alone."""
        self._collect_workers()
        return self._collector.snapshot()

    def _collect_workers(self) -> None:
        """Take the workers' samples waiting in the queue, then their final ones (which are newer)."""
        if self._queue is not None:
            self._collector.drain(self._queue)
        if self._finals is not None:
            for sample in self._finals.read():
                self._collector.offer(sample)

    def _drain(self) -> None:
        """Collect worker samples and the loop's own now, whatever the rate (a pass's end, stats())."""
        self._reporter.publish(self._loop_sample())

    def _loop_sample(self) -> Sample:
        """The training loop's cumulative counters now (what the reporter publishes)."""
        depths = outstanding(self._inner, self.num_workers)
        return self._fetch.sample(self._rank, self._clock(), self._started, depths, persistent=self.persistent_workers)

    def _take(self, loop: Sample) -> None:
        """The reporter's publication: the loop's sample with the workers' newest into the collector
        (and, inside a rank pool, on to the kernel, so its dashboards see this rank too)."""
        self._collect_workers()
        self._collector.offer(loop)
        if self.num_workers == 0:
            own = dataset_sample(self.dataset, 0)
            if own is not None:
                self._collector.offer(own)
        if uplink.installed():
            uplink.forward(self._collector.snapshot().samples.values())

    # ---------------------------------------------------------------- hooks and stats
    def add_hook(self, hook: Callable[[BatchTiming], object]) -> Callable[[], None]:
        """Call ``hook(timing)`` for every batch in the training process; returns a remover."""
        if not callable(hook):
            raise TypeError(f"add_hook needs a callable, got {type(hook).__name__}")
        timing = self._fetch
        timing.hooks = (*timing.hooks, hook)

        def remove() -> None:  # one registration of it, as list.remove would
            hooks = list(timing.hooks)
            if hook in hooks:
                hooks.remove(hook)
                timing.hooks = tuple(hooks)

        return remove

    def __repr__(self) -> str:
        """The dataset, the settings that shape a pass, and what it delivered so far (no collection
        forced: a repr never waits on workers).

        Example: ``DataLoader(UCVolumeDataset(...), batch_size=64, num_workers=2: 294 batches, 18,816
        samples, exposed wait 12%)``.
        """
        figures = self._collector.snapshot()
        said = [f"{figures.batches:,} batches, {figures.samples_delivered:,} samples"]
        if (wait := figures.exposed_wait) is not None:
            said.append(f"exposed wait {wait:.0%}")
        return (
            f"DataLoader({self.dataset!r}, batch_size={self.batch_size}, num_workers={self.num_workers}: "
            f"{', '.join(said)})"
        )

    def stats(self) -> Snapshot:
        """A frozen snapshot: counts, throughput, fetch latency histogram and percentiles, cache
        fill, per-rank shard sizes."""
        self._drain()
        return self._collector.snapshot()

    def offer(self, sample: Sample) -> None:
        """Feed a telemetry sample from elsewhere (another rank) into this loader's snapshots."""
        self._collector.offer(sample)

    # ---------------------------------------------------------------- resume
    @property
    def epoch(self) -> int:
        """The epoch the next pass runs (after :meth:`load_state_dict`: the checkpoint's, or the
        one after it when its epoch had ended): ``for epoch in range(loader.epoch, epochs)``."""
        return self._position.epoch

    def state_dict(self) -> dict[str, Any]:
        """The whole job's data position, JSON-serialisable: the epoch and what the training loop
        of every rank has received of it, per stream (a stream is a rank's DataLoader worker).

        Under ``torch.distributed`` this is a collective (every rank's counts are gathered, so
        every rank returns the same dict): call it on every rank together, as
        ``torch.distributed.checkpoint`` does. Without it, only this rank's counts are known.
        A state taken when a pass has ended points at the next epoch.
        """
        state = self._position.state(self._fingerprint(), current_rank()[1], self._on_uneven())
        # A Mix's epochs each run a schedule of their own (weights may change at resume): its state
        # holds the one of the state's epoch.
        plan_state = getattr(self.dataset, "plan_state", None)
        return {**state, "schedule": plan_state(int(state["epoch"]))} if callable(plan_state) else state

    def headroom(self, step: Callable[[Any], object], *, steps: int = 20) -> Headroom:
        """How much faster ``step`` (your training step, called with each batch) would run with a
        perfect loader: ``steps`` steps fed by this loader, then the same batches replayed from memory
        (the first batch, start-up, is not timed in either).

        It runs a pass of its own, which leaves the loader's position as it was (the next pass is the
        epoch it would have been), logs nothing to MLflow and shows no dashboard; its batches count in
        :meth:`stats`. Run it before a resumed pass, not between :meth:`load_state_dict` and that pass.

        Example:
            >>> loader.headroom(train_step)  # doctest: +SKIP
            Headroom(with a perfect loader the loop would run 1.80x faster: 52.0 ms a step fed by this
            loader, 28.9 ms from memory, over 19 steps)
        """
        if not callable(step):
            raise TypeError(f"headroom() needs your training step, a function of a batch; got {type(step).__name__}")
        steps = opt.whole_number("steps", steps, minimum=2)
        if self._position.resuming:
            raise RuntimeError(
                "headroom() runs a pass of its own, and a loaded position waits for the next pass: run "
                "headroom() before load_state_dict(), or after the resumed pass"
            )
        position, mlflow, monitor = copy.copy(self._position), self._log_to_mlflow, self.monitor
        self._log_to_mlflow = self.monitor = False
        try:
            return measure_headroom(self, step, steps, self._clock)
        finally:
            self._position, self._log_to_mlflow, self.monitor = position, mlflow, monitor

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue where ``state`` was taken: the next pass runs its epoch and delivers exactly
        what the training loops had not received of it, then normal epochs follow.

        On the grid it was taken on (world size, ``num_workers``, the dataset's ``on_uneven``) every
        stream continues where it stopped, batches in the order a run never interrupted gives; on
        another grid the rest of the epoch is split over the new one: exactly once with
        ``on_uneven="allow"``, with ``"pad"``/``"drop"`` only the reported padding repeats or the
        reported remainder is left out. ``batch_size`` may differ.
        """
        if not isinstance(state, dict) or "fingerprint" not in state or "epoch" not in state:
            raise ValueError("not a DataLoader state: expected the dict DataLoader.state_dict() returns")
        loader_state = getattr(self.dataset, "load_state_dict", None)
        if not callable(loader_state):
            raise TypeError(f"{type(self.dataset).__name__} cannot resume: it has no load_state_dict()")
        grid = self._grid()
        # Checks the data and readies the dataset's streams; a dataset that resumes another position
        # than the one given (a Mix with new weights: the rest of its epoch as a new plan) returns it.
        resumed = loader_state(state, grid=grid)
        self._position.load(resumed if isinstance(resumed, dict) else state, grid, self._on_uneven())
        self._iterator = None  # persistent workers hold the old position: start fresh ones

    def _on_uneven(self) -> str:
        return str(getattr(self.dataset, "on_uneven", "allow"))

    def _grid(self) -> Grid:
        rank, world = current_rank()
        return Grid(rank=rank, world_size=world, worker=0, num_workers=max(self.num_workers, 1))

    def _fingerprint(self) -> dict[str, Any]:
        fingerprint = getattr(self.dataset, "fingerprint", None)
        if not callable(fingerprint):
            raise TypeError(
                f"{type(self.dataset).__name__} cannot be checkpointed: it has no fingerprint(); "
                "use a dataset like UCVolumeDataset"
            )
        return asdict(fingerprint())

    def __enter__(self) -> DataLoader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Log what MLflow still has to take (the open pass's window too) and stop the workers."""
        if self._mlflow is not None:
            self._mlflow.end_pass(self.stats())
            self._mlflow.wait()  # every point of this loader is in the run when close() returns
        self._iterator = None
        self._reclaim_finished_workers()

    def _reclaim_finished_workers(self) -> None:
        """Take back the streamed files of workers that ended (kept while their last batches may wait
        in torch's queue): as a pass begins, the loop is past every batch of the last one."""
        cache = getattr(self.dataset, "cache", None) if self.num_workers else None
        reclaim = getattr(cache, "reclaim_finished_workers", None)
        if callable(reclaim):
            reclaim()


class _Weakly:
    """A bound method called through a weak reference: it keeps its loader alive neither from the
    loader's own reporter nor from a dashboard that outlives it. A loader in a reference cycle outlives
    its last name until the garbage collector runs, and stopping its workers from there took 5 s each
    (their queues were closed first). Once the loader is gone it returns what it returned last."""

    def __init__(self, method: Callable[..., Any]) -> None:
        self._ref = weakref.WeakMethod(method)
        self._last: Any = None

    def __call__(self, *args: Any) -> Any:
        bound = self._ref()
        if bound is not None:
            self._last = bound(*args)
        return self._last


def _one(element: Any) -> int:
    """One sample per element: a dataset that does not say how many its elements hold."""
    return 1


def _monitor_title(dataset: Any) -> str:
    """'DataLoader over /Volumes/main/ml/images' (or a table's name) when the dataset says what it reads."""
    # A UCVolumeDataset's folder (not its listing, which may still be arriving), or a table's name.
    source = getattr(dataset, "volume_path", None) or getattr(dataset, "name", None)
    return f"DataLoader over {source}" if isinstance(source, str) and source else "DataLoader"


def _stop_persistent_workers(persistent: list[Any]) -> None:
    """The loader is gone: stop the persistent workers it kept (torch's own, idempotent stop)."""
    iterator, persistent[0] = persistent[0], None
    if iterator is not None:
        _stop_workers(iterator)


def _stop_workers(inner: Iterator[Any]) -> None:
    """Stop the workers of a pass that ended (torch stops them at its end; one the loop left is
    otherwise stopped only when the garbage collector reaches its iterator, and from wherever that
    happens: measured, inside the fork of a later listing, where joining them took 5 s each)."""
    stop = getattr(inner, "_shutdown_workers", None)  # torch's own, idempotent; absent without workers
    if callable(stop):
        with contextlib.suppress(Exception):
            stop()
