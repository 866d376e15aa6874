"""A persistent pool of rank processes with ``torch.distributed`` ready: the engine behind
``@distributed`` and ``%%uc_distributed``.

``RankPool(n)`` *spawns* ``n`` processes (a kernel with live threads or CUDA must never fork), gives
each the torchrun environment (``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR=127.0.0.1``, a free ``MASTER_PORT`` unless one is set) and initialises the process group
(nccl when every rank has a GPU, gloo otherwise) through c10d's TCP rendezvous. Start-up is paid once;
later calls reuse the ranks.

Each call runs on every rank. Output streams back live, line by line, prefixed ``[rank N]``, on one
ordered channel per rank that also carries DataLoader telemetry (into :attr:`RankPool.collector`) and
the reply. If a rank raises, the others get a moment to finish, are then interrupted, and ranks that
still do not answer (stuck in a collective) are killed; the next call starts a fresh pool. A rank that
dies is reported at once with how it died. Ctrl-C reaches every rank and leaves one line
(``interrupted 2 ranks; the pool is still warm``, a KeyboardInterrupt). Ranks end themselves when the
kernel goes away, however it goes, and whatever a rank starts ends with it, even a grandchild in a
session of its own (see :mod:`uc_jupyter.distributed.launch`).

Each call carries the principal in force where it is made (the configured catalog's
``current_principal()``: an ``as_principal`` block, else ``UC_JUPYTER_PRINCIPAL``, or over a catalog
server the token's principal), and the ranks act as that principal for the call, whoever started the
pool: ``with as_principal("alice"): pool.run(fn)`` reads with alice's grants.

Where the ranks run is a *placement* (:mod:`uc_jupyter.distributed.launch`): this machine by
default, or a Ray cluster with ``cluster="ray"`` (the address in ``UC_JUPYTER_RAY_ADDRESS``, else Ray's
``RAY_ADDRESS``) or ``cluster="ray://host:port"`` (Ray Client). On a cluster the ranks of one node are
packed together on as few nodes as fit (or exactly ``nodes``), numbered ``RANK = NODE_RANK *
LOCAL_WORLD_SIZE + LOCAL_RANK`` with ``MASTER_ADDR`` rank 0's node; everything above holds the same
there (see :mod:`uc_jupyter.distributed.launch.ray`), and a rank or node that is lost is reported
within seconds with the node it was on.

Example:
    >>> with RankPool(2, devices="cpu") as pool:                        # doctest: +SKIP
    ...     pool.run(lambda: __import__("torch.distributed").distributed.get_rank())
    [0, 1]
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import math
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from uc_jupyter.catalog import get_catalog
from uc_jupyter.catalog.rules.privileges import validate_principal
from uc_jupyter.distributed import board
from uc_jupyter.distributed.checks import check_cluster, rank_count, seconds
from uc_jupyter.distributed.errors import (
    describe_exit,
    hide_internal_frames,
)
from uc_jupyter.distributed.launch import Exited, Generation, Placement, RankHandle, placement_for
from uc_jupyter.distributed.launch.local import visible_gpus
from uc_jupyter.distributed.launch.ray_cluster import before_disconnect
from uc_jupyter.distributed.outcome import Outcome, results
from uc_jupyter.distributed.payload import DEFAULT_LIMIT, pack, source_map
from uc_jupyter.distributed.protocol import (
    Call,
    CallKind,
    Output,
    Reply,
)
from uc_jupyter.distributed.start import start_ranks
from uc_jupyter.distributed.status import PoolStatus, RankInfo
from uc_jupyter.distributed.stuck import Stuck, stuck_in
from uc_jupyter.telemetry import mlflow_runs, mlflow_sink
from uc_jupyter.telemetry.collector import Collector

__all__ = [
    "OutputWriter",
    "PoolStatus",
    "RankInfo",
    "RankPool",
    "shutdown_all",
    "visible_gpus",
]

Devices = Literal["auto", "cpu", "cuda"]
Backend = Literal["auto", "gloo", "nccl"]
OutputWriter = Callable[[int, str, str], None]  # (rank, "stdout" | "stderr", text)

_FAILURE_GRACE = 1.0  # after one rank fails, how long the others may still finish on their own
_POLL = 0.05
_DUMP_LINES = 400  # of a stuck rank's log: its threads' stacks (a deep one is about 60 lines each)


def print_output(rank: int, stream: str, text: str) -> None:
    """The default output writer: each line to the kernel's stdout/stderr, prefixed ``[rank N]``."""
    target = sys.stderr if stream == "stderr" else sys.stdout
    target.write("".join(f"[rank {rank}] {line}" for line in text.splitlines(keepends=True)))
    target.flush()


class RankPool:
    """``n`` rank processes with ``torch.distributed`` initialised, reused across calls; each call runs
    as the principal in force where it is made.

    Args:
        n: number of ranks.
        devices: ``"cuda"`` (one GPU per rank), ``"cpu"``, or ``"auto"`` (GPUs when there is one for
            every rank, else CPU).
        backend: ``"nccl"``, ``"gloo"`` or ``"auto"`` (nccl on GPUs, gloo on CPU).
        cluster: where the ranks run: None (this machine), ``"ray"`` (the Ray cluster at
            ``UC_JUPYTER_RAY_ADDRESS``, else ``RAY_ADDRESS``) or ``"ray://host:port"`` (Ray Client).
        nodes: on a cluster, exactly this many nodes with ``n / nodes`` ranks each (None: as few as
            fit); on this machine only 1.
        gpu_type: on a cluster, GPU ranks only on nodes with this accelerator type (Ray's
            ``accelerator_type:<T>`` resource, e.g. "H100"); None: any. On this machine the
            decorator checks it against the visible devices.
        timeout: default bound, in seconds, on every call (None: no bound).
        start_timeout: how long the ranks may take to start and rendezvous.
        stop_grace: after an interrupt, a timeout or a failure, how long ranks may take to stop before
            they are killed.
        max_payload_bytes: the largest function + captures + arguments to ship (None: no limit).
        output: where rank output goes, ``output(rank, stream, text)``; prints ``[rank N] line`` by default.

    Example:
        >>> pool = RankPool(2, devices="cpu")                                 # doctest: +SKIP
        >>> pool.execute("import torch; t = torch.ones(1) * rank")            # doctest: +SKIP
        >>> pool.execute("torch.distributed.all_reduce(t); t.item()")        # doctest: +SKIP
        [1.0, 1.0]
        >>> pool.shutdown()                                                   # doctest: +SKIP
    """

    def __init__(
        self,
        n: int,
        *,
        devices: Devices = "auto",
        backend: Backend = "auto",
        cluster: str | None = None,
        nodes: int | None = None,
        gpu_type: str | None = None,
        timeout: float | None = None,
        start_timeout: float = 120.0,
        stop_grace: float = 3.0,
        max_payload_bytes: int | None = DEFAULT_LIMIT,
        output: OutputWriter | None = None,
    ) -> None:
        self.size = rank_count(n, "n")
        if devices not in ("auto", "cpu", "cuda"):
            raise ValueError(f"devices must be 'auto', 'cpu' or 'cuda', got {devices!r}")
        if backend not in ("auto", "gloo", "nccl"):
            raise ValueError(f"backend must be 'auto', 'gloo' or 'nccl', got {backend!r}")
        self.cluster = check_cluster(cluster)
        self.nodes = None if nodes is None else rank_count(nodes, "nodes")
        if self.nodes is not None and self.nodes > 1 and self.cluster is None:
            raise ValueError(
                f"nodes={nodes}: ranks on several machines need a cluster; give cluster='ray' (or "
                "'ray://host:port'), or leave nodes out for ranks on this machine"
            )
        if self.nodes is not None and self.size % self.nodes:
            raise ValueError(f"nodes={nodes} does not divide n={n}: every node runs the same number of ranks")
        if gpu_type is not None and (not isinstance(gpu_type, str) or not gpu_type.strip()):
            raise ValueError(f"gpu_type must be an accelerator type such as 'H100' or None, got {gpu_type!r}")
        self.gpu_type = gpu_type
        self.devices: Devices = devices
        self.backend: Backend = backend
        self.timeout = seconds(timeout, "timeout")
        self.start_timeout = seconds(start_timeout, "start_timeout") or 120.0
        self.stop_grace = seconds(stop_grace, "stop_grace") or 0.0
        self.max_payload_bytes = max_payload_bytes
        self.output: OutputWriter = output or print_output
        self.collector = Collector()
        self._generation: Generation | None = None
        self._placement: Placement | None = None
        self._lock = threading.RLock()
        self._busy = False
        self._ids = itertools.count(1)
        self._number = next(_pool_numbers)
        _live_pools.add(self)

    # ---------------------------------------------------------------- lifecycle
    @hide_internal_frames
    def start(self) -> None:
        """Start the ranks now (calls start them on first use anyway)."""
        principal = _caller()
        with self._lock:
            if self._generation is None:
                self._generation = self._launch_with_retries(principal)
                self._announce()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop every rank (and its children); waits up to ``timeout`` seconds, then kills."""
        with self._lock:
            generation, self._generation = self._generation, None
            board.withdraw(self._number)
        if generation is not None:
            generation.stop(timeout)
        placement, self._placement = self._placement, None
        if placement is not None:
            placement.close()

    def restart(self) -> None:
        """A fresh set of ranks (namespaces and process group start over)."""
        self.shutdown()
        self.start()

    def status(self) -> PoolStatus:
        generation = self._generation
        if generation is None:
            return PoolStatus(self.size, "stopped", self.devices, self.backend, None, (), self.cluster)
        ranks = tuple(
            RankInfo(h.rank, h.pid or 0, h.device, h.running(), h.node, h.node_rank) for h in generation.ranks
        )
        state: Literal["idle", "busy"] = "busy" if self._busy else "idle"
        return PoolStatus(
            self.size, state, generation.devices, generation.backend, generation.port, ranks, generation.cluster
        )

    def _announce(self) -> None:
        """Tell the JupyterLab status item (through a status file) what this pool is doing."""
        if self._generation is None:
            board.withdraw(self._number)
        else:
            board.publish(self._number, self.status())

    def __enter__(self) -> RankPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    # ---------------------------------------------------------------- calls
    @hide_internal_frames
    def run(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> list[Any]:
        """``fn(*args, **kwargs)`` on every rank; the results in rank order."""
        return self.call(fn, args, kwargs)

    @hide_internal_frames
    def call(
        self,
        fn: Callable[..., Any],
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        show: Iterable[int] | Literal["all"] | None = None,
        max_payload_bytes: int | Literal["pool"] | None = "pool",
    ) -> list[Any]:
        """Like :meth:`run`, with this call's ``timeout``, the ranks whose output to ``show`` and its own
        payload limit (``"pool"``: the pool's ``max_payload_bytes``)."""
        if not callable(fn):
            raise TypeError(f"RankPool.run needs a function, got {type(fn).__name__}")
        limit = self.max_payload_bytes if max_payload_bytes == "pool" else max_payload_bytes
        payload = pack((fn, tuple(args), dict(kwargs or {}), source_map(fn)), limit=limit, what=fn)
        return self._call("run", payload, timeout, show)

    @hide_internal_frames
    def execute(
        self,
        source: str,
        *,
        timeout: float | None = None,
        show: Iterable[int] | Literal["all"] | None = None,
    ) -> list[Any]:
        """Run cell ``source`` in each rank's persistent namespace (seeded with ``rank``,
        ``world_size``, ``local_rank``, ``device``); the value of a final expression per rank."""
        if not isinstance(source, str):
            raise TypeError(f"execute needs cell source as a str, got {type(source).__name__}")
        compile(source, "<cell>", "exec")  # a syntax error is the caller's, before any rank runs
        return self._call("execute", pack(source), timeout, show)

    @hide_internal_frames
    def push(self, values: Mapping[str, Any]) -> None:
        """Bind ``values`` (name -> object) in every rank's namespace."""
        bad = [name for name in values if not (isinstance(name, str) and name.isidentifier())]
        if bad:
            raise ValueError(f"cannot push {bad[0]!r}: names must be Python identifiers")
        self._call("push", pack(dict(values), limit=self.max_payload_bytes, what="the pushed variables"), None, None)

    @hide_internal_frames
    def pull(self, *names: str) -> dict[str, list[Any]]:
        """``{name: [value on rank 0, value on rank 1, ...]}`` from the ranks' namespaces."""
        per_rank = self._call("pull", pack(tuple(names)), None, None)
        return {name: [values[i] for values in per_rank] for i, name in enumerate(names)}

    # ---------------------------------------------------------------- the engine
    def _call(
        self, kind: CallKind, payload: bytes, timeout: float | None, show: Iterable[int] | str | None
    ) -> list[Any]:
        shown = self.shown_ranks(show)
        limit = seconds(timeout, "timeout") if timeout is not None else self.timeout
        principal = _caller()  # read here, in the caller's thread and context: who this call is made as
        run = mlflow_runs.caller_run()  # the MLflow run active here: the ranks' loaders log into it
        with self._lock:
            if self._generation is None:
                self._generation = self._launch_with_retries(principal)
            generation = self._generation
            call_id = next(self._ids)
            self._busy = True
            self._announce()
            try:
                for handle in generation.ranks:
                    with contextlib.suppress(OSError):  # a dead rank shows up as Exited below
                        handle.send(
                            Call(call_id=call_id, kind=kind, payload=payload, principal=principal, mlflow_run=run)
                        )
                # The job's worst rank into the same run, from the ranks' telemetry as it arrives.
                job = (
                    None
                    if run is None
                    else mlflow_sink.MlflowSink.for_active_run(None, baseline=self.collector.snapshot)
                )
                outcome = self._collect(generation, call_id, limit, shown, job)
                if job is not None:
                    job.end_pass(self.collector.snapshot())
                    job.wait()  # the job's points are in the run when the call returns, as the ranks' are
            finally:
                self._busy = False
            if outcome.killed or outcome.died:
                self._generation = None  # the process group is broken: the next call starts afresh
            self._announce()
        return results(outcome, limit, self.stop_grace)

    def _collect(
        self,
        generation: Generation,
        call_id: int,
        timeout: float | None,
        shown: set[int],
        job: mlflow_sink.MlflowSink | None = None,
    ) -> Outcome:
        outcome = Outcome(self.size)
        deadline = time.monotonic() + timeout if timeout is not None else math.inf
        first_failure: float | None = None
        kill_at = math.inf
        next_poll = 0.0

        def stop(reason: Literal["failure", "died", "timeout", "interrupt"]) -> None:
            nonlocal kill_at
            outcome.reason = reason
            if reason == "interrupt":
                outcome.interrupted = tuple(outcome.pending)
            for rank in outcome.pending:
                generation.ranks[rank].interrupt()
            kill_at = time.monotonic() + self.stop_grace

        while outcome.pending:
            try:
                now = time.monotonic()
                if outcome.reason is None and now >= deadline:
                    stop("timeout")
                elif outcome.reason is None and first_failure is not None and now >= first_failure + _FAILURE_GRACE:
                    stop("failure")
                if now >= kill_at:
                    outcome.killed = tuple(outcome.pending)
                    outcome.stuck = _where_stuck([generation.ranks[rank] for rank in outcome.killed])
                    break
                if job is not None and job.due():
                    job.hand_over(self.collector.snapshot())
                if now >= next_poll:  # a rank's children can hold its channel open after it died
                    next_poll = now + 0.5
                    for rank in outcome.pending:
                        returncode = generation.ranks[rank].returncode()
                        if returncode is not None:
                            self._died(outcome, generation, rank, Exited(returncode), stop)
                    continue
                try:
                    rank, message = generation.inbox.get(timeout=_POLL)
                except queue.Empty:
                    continue
                if isinstance(message, Output):
                    self._write(rank, message, shown)
                elif isinstance(message, Reply) and message.call_id == call_id:
                    outcome.replies[rank] = message
                    if message.failure is not None and first_failure is None:
                        first_failure = now
                elif isinstance(message, Exited) and rank in outcome.pending:
                    self._died(outcome, generation, rank, message, stop)
            except KeyboardInterrupt:
                if outcome.reason == "interrupt":  # a second Ctrl-C: do not wait any longer
                    kill_at = 0.0
                else:
                    stop("interrupt")
        if outcome.died or outcome.killed:
            generation.kill()
        self._drain(generation, shown)  # output that raced a kill
        return outcome

    def _died(
        self,
        outcome: Outcome,
        generation: Generation,
        rank: int,
        exited: Exited,
        stop: Callable[[Literal["died"]], None],
    ) -> None:
        handle = generation.ranks[rank]
        handle.terminate()  # whatever it started goes too
        outcome.died[rank] = exited.how or f"its process {describe_exit(exited.returncode)}"
        outcome.died[rank] += handle.where()
        outcome.tails[rank] = handle.log_tail()
        if outcome.reason in (None, "failure"):
            stop("died")

    def _write(self, rank: int, message: Output, shown: set[int]) -> None:
        """Write a rank's output, if the call shows that rank."""
        if rank in shown:
            self.output(rank, message.stream, message.text)

    def _drain(self, generation: Generation, shown: set[int]) -> None:
        while True:
            try:
                rank, message = generation.inbox.get_nowait()
            except queue.Empty:
                return
            if isinstance(message, Output):
                self._write(rank, message, shown)

    def shown_ranks(self, show: Iterable[int] | str | None) -> set[int]:
        """The ranks ``show`` ("all", None or rank numbers) selects; a ValueError for ranks not in the pool."""
        if show is None or show == "all":
            return set(range(self.size))
        if isinstance(show, str):
            raise ValueError(f"show must be 'all' or a list of ranks, got {show!r}")
        ranks = set()
        for rank in show:
            if not isinstance(rank, int) or isinstance(rank, bool) or not 0 <= rank < self.size:
                raise ValueError(f"show: rank {rank!r} is not one of this pool's ranks 0..{self.size - 1}")
            ranks.add(rank)
        return ranks

    # ---------------------------------------------------------------- start-up
    def _launch_with_retries(self, principal: str) -> Generation:
        if self._placement is None:
            self._placement = placement_for(self.cluster, self.nodes, self.gpu_type)
        # The last generation's samples are of processes that are gone. A new generation's producers
        # count from the start again, seq included, so the collector (which keeps a producer's newest
        # sample by seq) would drop every sample of theirs as older and dashboards would freeze.
        self.collector.clear()
        try:
            return start_ranks(
                self._placement,
                self.size,
                self.devices,
                self.backend,
                principal,
                self.collector,
                self.start_timeout,
                functools.partial(self._write, shown=set(range(self.size))),
            )
        except BaseException:
            # A pool that did not start holds nothing: not its cluster connection either.
            placement, self._placement = self._placement, None
            placement.close()
            raise


def _caller() -> str:
    """The principal in force here and now, checked before any rank is asked to act as it: the
    configured catalog's (over a catalog server, the token's principal, not the local label)."""
    return validate_principal(get_catalog().current_principal())


# ---------------------------------------------------------------- the shared pool
_live_pools: weakref.WeakSet[RankPool] = weakref.WeakSet()
_pool_numbers = itertools.count(1)


@atexit.register
def shutdown_all() -> None:
    """Stop every pool of this process (at exit)."""
    for pool in list(_live_pools):
        with contextlib.suppress(Exception):
            pool.shutdown(timeout=2.0)


before_disconnect(shutdown_all)  # a Ray connection ends after the pools it serves


def _where_stuck(ranks: Sequence[RankHandle], *, wait: float = 2.0) -> dict[int, Stuck]:
    """Where each of ``ranks`` (about to be killed for not stopping) is stuck: each is asked for its
    stack dump, and its log read until the dump is there, for at most ``wait`` seconds in all (a
    rank whose dump does not come is left out: the error then says only that it did not stop)."""
    for handle in ranks:
        handle.dump_stacks()
    found: dict[int, Stuck] = {}
    deadline = time.monotonic() + wait
    while True:
        for handle in ranks:
            if handle.rank not in found:
                stuck = stuck_in(handle.log_tail(_DUMP_LINES))
                if stuck is not None:
                    found[handle.rank] = stuck
        if len(found) == len(ranks) or time.monotonic() >= deadline:
            return found
        time.sleep(0.05)  # the dump is written by the rank, and passed on by its supervisor
