"""``@distributed``: run a function on N ranks from a notebook, compatible with the reference runtime.

    @distributed(gpus=2)
    def train(epochs):
        dataset = UCVolumeDataset("/Volumes/main/ml/images")   # build data inside: it is not shipped
        ...
        return model.state_dict() if rank == 0 else None

    results = train.distributed(epochs=3)    # one result per rank, in rank order

Everything is checked when ``train.distributed(...)`` is called, not when it is decorated. Without
CUDA devices the ranks run on CPU with gloo (said once, as one line on stderr), so the same notebook
works on a laptop and in CI; asking for more GPUs than are visible, or a ``gpu_type`` that is not
the visible one, is an error. The function, what it captures and its arguments are measured before
they are shipped; above ``max_pickle_bytes`` the error names the largest captured objects. The ranks
act as the principal in force where ``.distributed(...)`` is called (``with as_principal("alice"):
train.distributed()`` reads with alice's grants), whoever started the kernel's pool. A failing rank
raises its own error, shown as ``[rank N] Type: message`` and its own frames (see
:mod:`uc_jupyter.distributed.errors`).

``cluster="ray"`` (the address in ``UC_JUPYTER_RAY_ADDRESS``, else ``RAY_ADDRESS``) or
``cluster="ray://host:port"`` runs the ranks on a Ray cluster: ``gpus=N`` then means N GPU ranks on
the cluster (CPU ranks when it has no GPU, said once), and a reference accelerator name such as
``accelerator_type="GPU_8xH100"`` with ``num_accelerators=16`` places them as 2 nodes of 8 (see
:mod:`uc_jupyter.distributed.accelerators`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from uc_jupyter.distributed.accelerators import KNOWN_GPU_TYPES, Accelerators, matches, request, spelled
from uc_jupyter.distributed.checks import check_cluster
from uc_jupyter.distributed.errors import hide_internal_frames
from uc_jupyter.distributed.payload import DEFAULT_LIMIT
from uc_jupyter.distributed.pool import Devices, RankPool, visible_gpus
from uc_jupyter.distributed.shared import shared_pool
from uc_jupyter.notices import notice

__all__ = ["KNOWN_GPU_TYPES", "Decorated", "DistributedFunction", "distributed", "pool_for_request"]

P = ParamSpec("P")
R = TypeVar("R")

_CPU_NOTICE = "uc_jupyter.distributed: CPU ranks"  # said once per process, whatever the count


class Decorated(Generic[P, R]):
    """A decorated function and the request it was decorated with (what ``@distributed`` and
    ``@ray_launch`` share); calling it directly is an error that says how to run it."""

    decorator = "@distributed"
    usage = "(one result per rank), or call {name}.fn(...) to run it here in the kernel"

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        gpus: int | None,
        gpu_type: str | None,
        timeout: float | None,
        max_pickle_bytes: int | None,
        cluster: str | None = None,
        names: tuple[str, str] = ("gpus", "gpu_type"),
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.gpus = gpus
        self.gpu_type = gpu_type
        self.cluster = cluster
        self.names = names  # how the request was spelled (gpus or num_accelerators), for its errors
        self.timeout = timeout
        self.max_pickle_bytes = max_pickle_bytes

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        name = getattr(self.fn, "__name__", "this function")
        raise TypeError(
            f"{name} is decorated with {self.decorator}: run it with {name}.distributed(...) "
            + self.usage.format(name=name)
        )

    def requested(self) -> Accelerators:
        """The accelerators asked, checked; a one-line ValueError naming the option as it was spelled."""
        count_name, type_name = self.names
        return request(self.gpus, self.gpu_type, count_name=count_name, type_name=type_name)


class DistributedFunction(Decorated[P, R]):
    """A function to run on several ranks with ``.distributed(...)``; calling it directly is an error."""

    @hide_internal_frames
    def distributed(self, *args: P.args, **kwargs: P.kwargs) -> list[R]:
        """Run on ``gpus`` ranks (here or on the cluster); the per-rank results, in rank order."""
        wanted = self.requested()
        pool = pool_for_request(wanted, self.cluster, count_name=self.names[0])
        return pool.call(self.fn, args, kwargs, timeout=self.timeout, max_payload_bytes=self.max_pickle_bytes)


def distributed(
    gpus: int | Callable[..., Any] | None = None,
    gpu_type: str | None = None,
    *,
    num_accelerators: int | None = None,
    accelerator_type: str | None = None,
    timeout: float | None = None,
    max_pickle_bytes: int | None = DEFAULT_LIMIT,
    cluster: str | None = None,
) -> Any:
    """Decorate a function to run on ``gpus`` ranks (``num_accelerators`` is the same, by its newer name;
    ``accelerator_type`` is ``gpu_type``, and may say the GPUs per node: ``"GPU_8xH100"``), on this
    machine or, with ``cluster="ray"`` or ``"ray://host:port"``, on a Ray cluster.

    Example:
        >>> @distributed(gpus=2)
        ... def world():
        ...     import torch.distributed as dist
        ...     return dist.get_world_size()
        >>> world.distributed()       # doctest: +SKIP
        [2, 2]
        >>> @distributed(num_accelerators=16, accelerator_type="GPU_8xH100", cluster="ray")  # 2 nodes x 8
        ... def train(): ...
        >>> train.distributed()       # doctest: +SKIP
    """
    if callable(gpus):  # bare @distributed: needs a count, so say how to give one
        raise TypeError("@distributed needs a rank count: write @distributed(gpus=N)")
    count, kind, names = spelled(gpus, num_accelerators, gpu_type, accelerator_type)

    def wrap(fn: Callable[P, R]) -> DistributedFunction[P, R]:
        if not callable(fn):
            raise TypeError(f"@distributed decorates a function, got {type(fn).__name__}")
        return DistributedFunction(
            fn,
            gpus=count,
            gpu_type=kind,
            timeout=timeout,
            max_pickle_bytes=max_pickle_bytes,
            cluster=cluster,
            names=names,
        )

    return wrap


def pool_for_request(wanted: Accelerators, cluster: object, *, count_name: str = "gpus") -> RankPool:
    """The shared pool for ``wanted`` GPU ranks: checked against this machine's GPUs, or on a cluster
    left to the pool's placement (``devices="auto"``; the nodes the request names, if it does)."""
    where = check_cluster(cluster)
    if where is None:
        return shared_pool(wanted.count, devices=_devices_here(wanted, count_name))
    # On a cluster the pool plans devices against the cluster's GPUs (CPU ranks, said once, when it has
    # none) and places GPU ranks on nodes of the type asked.
    return shared_pool(wanted.count, devices="auto", cluster=where, nodes=wanted.nodes, gpu_type=wanted.kind)


def _devices_here(wanted: Accelerators, count_name: str) -> Devices:
    gpus = wanted.count
    visible = visible_gpus()
    if visible == 0:
        notice(f"no CUDA device is visible: running {gpus} CPU ranks with gloo instead of GPUs", key=_CPU_NOTICE)
        return "cpu"
    if gpus > visible:
        several = f"; {wanted.describe()} needs a cluster: give cluster='ray'" if (wanted.nodes or 1) > 1 else ""
        raise ValueError(
            f"{count_name}={gpus} asked, but this machine has {visible} CUDA device(s); use {count_name}<={visible}"
            + several
        )
    if wanted.kind is not None:
        names = _device_names(gpus)
        if not all(matches(wanted.kind, name) for name in names):
            visible_names = ", ".join(sorted(set(names)))
            raise ValueError(f"gpu_type={wanted.kind!r} asked, but the visible devices are {visible_names}")
    return "cuda"


def _device_names(n: int) -> list[str]:
    import torch

    return [str(torch.cuda.get_device_name(i)) for i in range(n)]
