"""``@ray_launch``: run a function once as a Ray driver, with a Ray cluster connected, from a notebook;
the reference runtime's way to start Ray work (tasks, actors, Ray Train, Ray Data) on the accelerators
asked. (The module is not named ray_launch: a submodule of that name would shadow the function
``uc_jupyter.distributed.ray_launch`` once imported.)

    @ray_launch(num_accelerators=16, accelerator_type="GPU_8xH100", cluster="ray")
    def train(epochs):
        import ray
        from ray.train import ScalingConfig
        from ray.train.torch import TorchTrainer
        trainer = TorchTrainer(loop, scaling_config=ScalingConfig(num_workers=16, use_gpu=True))
        return trainer.fit().metrics

    results = train.distributed(epochs=3)    # [metrics, None, ..., None]: one entry per accelerator

The function runs on global rank 0 of a one-rank CPU pool on the cluster (the kernel's shared pool),
so every accelerator stays free for the Ray work it starts. Ray is connected there before it runs
(``ray.init(address=UC_JUPYTER_RAY_ADDRESS)``, the cluster the rank runs on) and disconnected after
(``ray.shutdown()``). ``cluster`` is as for ``@distributed``; left out, it is ``"ray"`` when
``UC_JUPYTER_RAY_ADDRESS`` or ``RAY_ADDRESS`` is set, else the function runs on a local rank with a
Ray of its own over this machine's resources (``ray.init(address="local")``). Before the function
runs, the accelerators asked must be free on that Ray, or one line says what is free; a Ray without
any GPU runs the function anyway (said once), so a notebook runs the same on a laptop and in CI.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar

from uc_jupyter.distributed.accelerators import Accelerators, NodeResources, has_gpus, shortfall, spelled
from uc_jupyter.distributed.checks import check_cluster
from uc_jupyter.distributed.decorator import Decorated
from uc_jupyter.distributed.errors import ClusterError, PayloadError, hide_internal_frames
from uc_jupyter.distributed.payload import DEFAULT_LIMIT, pack
from uc_jupyter.distributed.shared import shared_pool
from uc_jupyter.notices import notice

__all__ = ["RayLaunchFunction", "launch_cluster", "ray_launch"]

P = ParamSpec("P")
R = TypeVar("R")

_NO_GPU_NOTICE = "uc_jupyter.ray_launch: no GPU"  # said once per rank process


class RayLaunchFunction(Decorated[P, R]):
    """A function to run once with Ray connected, by ``.distributed(...)``; calling it directly is an error."""

    decorator = "@ray_launch"
    usage = "(the result first, then None per further accelerator), or call {name}.fn(...) here"

    @hide_internal_frames
    def distributed(self, *args: P.args, **kwargs: P.kwargs) -> list[R | None]:
        """Run once on rank 0 with Ray connected; ``[result, None, ...]``, one entry per accelerator asked."""
        wanted = self.wanted()
        cluster = launch_cluster(self.cluster)
        pool = shared_pool(1, devices="cpu", cluster=cluster)
        fn, on_cluster = self.fn, cluster is not None

        def launched(*call_args: Any, **call_kwargs: Any) -> Any:  # shipped by value: it carries fn
            return _with_ray(fn, wanted, on_cluster, call_args, call_kwargs)

        # fn's module, so the pool's source map takes fn's code along: a rank's traceback shows the user's lines
        launched.__module__ = getattr(fn, "__module__", None) or __name__
        launched.__name__ = getattr(fn, "__name__", "launched")
        try:
            [result] = pool.call(launched, args, kwargs, timeout=self.timeout, max_payload_bytes=self.max_pickle_bytes)
        except PayloadError:  # say which of fn's own captures or arguments is large, not "fn"
            pack((fn, args, kwargs), limit=self.max_pickle_bytes, what=fn)
            raise
        return [result, *[None] * ((wanted.count if wanted else 1) - 1)]

    def wanted(self) -> Accelerators | None:
        """The accelerators asked (None: none asked); a one-line ValueError for a bad request."""
        if self.gpus is None and self.gpu_type is None:
            return None
        return self.requested()


def ray_launch(
    gpus: int | Callable[..., Any] | None = None,
    gpu_type: str | None = None,
    *,
    num_accelerators: int | None = None,
    accelerator_type: str | None = None,
    cluster: str | None = None,
    timeout: float | None = None,
    max_pickle_bytes: int | None = DEFAULT_LIMIT,
) -> Any:
    """Decorate a function to run once with Ray connected, needing ``gpus`` accelerators of ``gpu_type``
    free (``num_accelerators``/``accelerator_type`` are the same, by the reference's names; a type such
    as ``"GPU_8xH100"`` also says the GPUs per node); on ``cluster`` (see the module).

    Example:
        >>> @ray_launch(gpus=2)
        ... def nodes():
        ...     import ray
        ...     return len(ray.nodes())
        >>> nodes.distributed()       # doctest: +SKIP
        [1, None]
    """
    if callable(gpus):  # bare @ray_launch: nothing asked, Ray connected
        return ray_launch()(gpus)
    count, kind, names = spelled(gpus, num_accelerators, gpu_type, accelerator_type)

    def wrap(fn: Callable[P, R]) -> RayLaunchFunction[P, R]:
        if not callable(fn):
            raise TypeError(f"@ray_launch decorates a function, got {type(fn).__name__}")
        return RayLaunchFunction(
            fn,
            gpus=count,
            gpu_type=kind,
            cluster=cluster,
            timeout=timeout,
            max_pickle_bytes=max_pickle_bytes,
            names=names,
        )

    return wrap


def launch_cluster(cluster: object) -> str | None:
    """Where a ``@ray_launch`` function runs: ``cluster`` when given; else ``"ray"`` when
    ``UC_JUPYTER_RAY_ADDRESS`` or ``RAY_ADDRESS`` names a cluster, None (this machine) when neither does.

    Example:
        >>> launch_cluster("ray://10.0.0.5:10001")
        'ray://10.0.0.5:10001'
    """
    given = check_cluster(cluster)
    if given is not None:
        return given
    return "ray" if os.environ.get("UC_JUPYTER_RAY_ADDRESS") or os.environ.get("RAY_ADDRESS") else None


# ---------------------------------------------------------------- on rank 0
def _with_ray(
    fn: Callable[..., Any], wanted: Accelerators | None, on_cluster: bool, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """``fn(*args, **kwargs)`` with Ray connected: the rank's cluster, or a Ray of this machine."""
    import ray

    if on_cluster:
        where = "the Ray cluster"
        ray.init(address=os.environ["UC_JUPYTER_RAY_ADDRESS"], logging_level=logging.WARNING)
    else:
        where = "this machine's Ray"
        # "local": a Ray of its own, never one found through /tmp/ray/ray_current_cluster
        ray.init(address="local", include_dashboard=False, logging_level=logging.WARNING)
    try:
        if wanted is not None:
            _check_free(wanted, where, getattr(fn, "__name__", "the function"))
        return fn(*args, **kwargs)
    finally:
        ray.shutdown()


def _check_free(wanted: Accelerators, where: str, name: str) -> None:
    nodes = _nodes()
    if not has_gpus(nodes):  # as @distributed on a machine without CUDA: the same notebook runs anywhere
        notice(f"{where} has no GPU: running {name} without the {wanted.describe()} asked", key=_NO_GPU_NOTICE)
        return
    missing = shortfall(wanted, nodes)
    if missing:
        raise ClusterError(f"{where}: {missing}")


def _nodes() -> list[NodeResources]:
    """The live nodes of the connected Ray with their totals and what is free on each now."""
    import ray

    free: dict[str, dict[str, float]] = {}
    with contextlib.suppress(Exception):  # Ray keeps the per-node view private; totals stand in without it
        from ray._private.state import state

        free = {str(k): dict(v) for k, v in state.available_resources_per_node().items()}  # type: ignore[no-untyped-call]
    nodes = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("Alive"):
            total = dict(node["Resources"])
            # a node absent from a per-node answer has nothing free; no answer at all: its totals
            nodes.append(
                NodeResources(
                    str(node["NodeManagerAddress"]), total, free.get(str(node["NodeID"]), {}) if free else total
                )
            )
    return nodes
