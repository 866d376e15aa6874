"""A notebook cell run on every rank: what ``%%uc_distributed`` calls (each option is a keyword here).

The cell runs in each rank's persistent namespace (``rank``, ``world_size``, ``local_rank`` and
``device`` are defined there), as the principal in force in the kernel when the cell runs. ``push``
copies notebook variables into every rank first; ``pull`` brings each named variable back as a list
with one value per rank. IPython syntax (``%magic``,
``!shell``) cannot run on a rank and is refused before anything starts.

Example:
    >>> ns = {"lr": 0.1}
    >>> run_cell("import torch\\nw = torch.ones(1) * lr * (rank + 1)", namespace=ns, n=2,
    ...          push=["lr"], pull=["w"])                                       # doctest: +SKIP
    >>> ns["w"]                                                                 # doctest: +SKIP
    [tensor([0.1000]), tensor([0.2000])]
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, MutableMapping, Sequence
from typing import Any, Literal

from uc_jupyter.distributed.accelerators import request
from uc_jupyter.distributed.checks import check_cluster
from uc_jupyter.distributed.decorator import pool_for_request
from uc_jupyter.distributed.errors import hide_internal_frames
from uc_jupyter.distributed.pool import Devices, PoolStatus, RankPool
from uc_jupyter.distributed.shared import current_shared_pool, shared_pool, shutdown_shared_pool
from uc_jupyter.telemetry.watch import watch_passes, watching

__all__ = ["CellUsageError", "check_plain_python", "manage_pool", "run_cell"]


class CellUsageError(ValueError):
    """The cell or its options cannot run; nothing ran on the ranks."""


@hide_internal_frames
def run_cell(
    source: str,
    *,
    namespace: MutableMapping[str, Any] | None = None,
    n: int | None = None,
    gpus: int | None = None,
    gpu_type: str | None = None,
    devices: Devices = "auto",
    push: Sequence[str] | None = None,
    pull: Sequence[str] | None = None,
    show: Literal["all"] | Sequence[int] = "all",
    timeout: float | None = None,
    monitor: bool = False,
    cluster: str | None = None,
) -> list[Any] | None:
    """Run ``source`` on ``n`` ranks (or ``gpus`` GPU ranks, CPU ranks without GPUs); the per-rank
    values of a final expression, or None when every rank's is None.

    ``%%uc_distributed``'s help is made from the sections below and the signature's defaults.

    Args:
        source: the cell: plain Python that every rank runs.
        namespace: the notebook's variables (push reads them, pull writes them).
        n: how many ranks run the cell.
        gpus: run on this many GPU ranks, CPU ranks when the machine has none (default: use -n).
        gpu_type: the GPU model wanted, e.g. H100, or the GPUs per node and model, e.g. GPU_8xH100
            (--gpus 16 then runs 2 nodes of 8 on a cluster) (default: any).
        devices: what the ranks of -n compute on: auto (GPUs when there are), cpu or cuda.
        push: notebook variables copied into every rank first, comma-separated (default: none).
        pull: rank variables brought back afterwards, each as a list with one value per rank
            (default: none).
        show: whose output is shown: all, or rank numbers such as 0,2; every rank still runs.
        timeout: seconds the cell may run before its ranks are stopped (default: no limit).
        monitor: show the live dashboard with every rank's data loading numbers.
        cluster: where the ranks run: ray (the Ray cluster at UC_JUPYTER_RAY_ADDRESS, else
            RAY_ADDRESS) or ray://host:port (Ray Client); --gpus then counts the cluster's GPUs
            (default: this machine, or %config UCMagics.cluster).

    Notebook:
        %%uc_distributed -n 2 --push lr --pull losses
        %%uc_distributed --gpus 16 --gpu-type GPU_8xH100 --cluster ray --timeout 3600 --show 0 --monitor
        %uc_distributed --status
    """
    check_plain_python(source)
    ns = namespace if namespace is not None else {}
    try:
        pool = _pool_for(n, gpus, gpu_type, devices, cluster)
        pool.shown_ranks(show)  # a bad --show fails before anything runs
        missing = [name for name in push or () if name not in ns]
        if missing:
            raise NameError(f"--push {missing[0]}: no variable of that name in the notebook")
        shipped = {name: ns[name] for name in push or ()}
        if shipped:
            pool.push(shipped)
    except (ValueError, NameError) as exc:
        if isinstance(exc, CellUsageError):
            raise
        raise CellUsageError(str(exc)) from None
    with _monitoring(pool, monitor):
        values = pool.execute(source, timeout=timeout, show=show)
    if pull:
        ns.update(pool.pull(*pull))
    return values if any(v is not None for v in values) else None


def manage_pool(action: Literal["status", "restart", "shutdown"]) -> PoolStatus | None:
    """``%uc_distributed --status|--restart|--shutdown``: the shared pool's status (None when there is none).

    Actions:
        status: show the rank pool's size, devices and state (the line magic %uc_distributed).
        restart: start the pool's ranks afresh, emptying their namespaces (line magic).
        shutdown: stop the pool's ranks (line magic).
    """
    pool = current_shared_pool()
    if action == "shutdown":
        shutdown_shared_pool()
        return None
    if pool is None:
        return None
    if action == "restart":
        pool.restart()
    return pool.status()


def check_plain_python(source: str) -> None:
    """Refuse IPython syntax (``%line magics``, ``!shell``) and syntax errors: ranks run plain Python."""
    from IPython.core.inputtransformer2 import TransformerManager

    if not isinstance(source, str) or not source.strip():
        raise CellUsageError("the cell is empty: write the code every rank should run")
    python = TransformerManager().transform_cell(source)  # type: ignore[no-untyped-call]
    for number, (before, after) in enumerate(zip(source.splitlines(), python.splitlines(), strict=False), 1):
        if before != after and "get_ipython()" in after:
            raise CellUsageError(
                f"line {number} ({before.strip()!r}) uses IPython syntax, which ranks cannot run: "
                "move magics and shell commands to another cell"
            )
    try:
        compile(source, "<rank cell>", "exec")
    except SyntaxError as exc:  # the cell's own mistake: one line, before any rank starts
        code = f" ({exc.text.strip()!r})" if exc.text and exc.text.strip() else ""
        raise CellUsageError(f"line {exc.lineno}{code}: {exc.msg}") from None


def _pool_for(n: int | None, gpus: int | None, gpu_type: str | None, devices: Devices, cluster: str | None) -> RankPool:
    where = check_cluster(cluster)  # a bad --cluster fails before anything else is judged
    if n is not None and gpus is not None:
        raise ValueError("give either -n (ranks) or --gpus (GPU ranks), not both")
    if gpus is not None or gpu_type is not None:
        if devices != "auto":
            raise ValueError("--devices goes with -n; --gpus picks GPUs itself (CPU ranks when there are none)")
        wanted = request(gpus if gpus is not None else n, gpu_type, count_name="gpus", type_name="gpu_type")
        return pool_for_request(wanted, where)
    if n is None:
        raise ValueError("say how many ranks: -n N (or --gpus N)")
    return shared_pool(n, devices=devices, cluster=where)


@contextlib.contextmanager
def _monitoring(pool: RankPool, monitor: bool) -> Iterator[None]:
    if not monitor:
        yield
        return
    pool.collector.clear()  # this cell's numbers, not the previous cells'
    # The registered view (the widgets' dashboard): the pool sits below the widgets.
    with watching(watch_passes(pool.collector.snapshot, f"{pool.size} ranks")):
        yield
