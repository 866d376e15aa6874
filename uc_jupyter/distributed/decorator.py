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
"""

from __future__ import annotations

import difflib
import functools
import re
from collections.abc import Callable
from typing import Any, Generic, ParamSpec, TypeVar

from uc_jupyter.distributed.errors import hide_internal_frames
from uc_jupyter.distributed.payload import DEFAULT_LIMIT
from uc_jupyter.distributed.pool import Devices, rank_count, shared_pool, visible_gpus
from uc_jupyter.notices import notice

__all__ = ["KNOWN_GPU_TYPES", "DistributedFunction", "devices_for_gpus", "distributed"]

P = ParamSpec("P")
R = TypeVar("R")

# Accelerator names the reference runtime and cloud offerings use; matched against CUDA device names.
KNOWN_GPU_TYPES = ("A10", "A10G", "A100", "B200", "GB200", "H100", "H200", "L4", "L40S", "T4", "V100")

_CPU_NOTICE = "uc_jupyter.distributed: CPU ranks"  # said once per process, whatever the count


class DistributedFunction(Generic[P, R]):
    """A function to run on several ranks with ``.distributed(...)``; calling it directly is an error."""

    def __init__(
        self,
        fn: Callable[P, R],
        *,
        gpus: int,
        gpu_type: str | None,
        timeout: float | None,
        max_pickle_bytes: int | None,
    ) -> None:
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.gpus = gpus
        self.gpu_type = gpu_type
        self.timeout = timeout
        self.max_pickle_bytes = max_pickle_bytes

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        name = getattr(self.fn, "__name__", "this function")
        raise TypeError(
            f"{name} is decorated with @distributed: run it with {name}.distributed(...) "
            f"(one result per rank), or call {name}.fn(...) to run it here in the kernel"
        )

    @hide_internal_frames
    def distributed(self, *args: P.args, **kwargs: P.kwargs) -> list[R]:
        """Run on ``gpus`` ranks; the per-rank results, in rank order."""
        devices = devices_for_gpus(self.gpus, self.gpu_type)
        pool = shared_pool(self.gpus, devices=devices)
        return pool.call(self.fn, args, kwargs, timeout=self.timeout, max_payload_bytes=self.max_pickle_bytes)


def distributed(
    gpus: int | Callable[..., Any] | None = None,
    gpu_type: str | None = None,
    *,
    num_accelerators: int | None = None,
    accelerator_type: str | None = None,
    timeout: float | None = None,
    max_pickle_bytes: int | None = DEFAULT_LIMIT,
) -> Any:
    """Decorate a function to run on ``gpus`` ranks (``num_accelerators`` is the same, by its newer name).

    Example:
        >>> @distributed(gpus=2)
        ... def world():
        ...     import torch.distributed as dist
        ...     return dist.get_world_size()
        >>> world.distributed()       # doctest: +SKIP
        [2, 2]
    """
    if callable(gpus):  # bare @distributed: needs a count, so say how to give one
        raise TypeError("@distributed needs a rank count: write @distributed(gpus=N)")
    count = _one_of(gpus, num_accelerators, "gpus", "num_accelerators")
    kind = _one_of(gpu_type, accelerator_type, "gpu_type", "accelerator_type")

    def wrap(fn: Callable[P, R]) -> DistributedFunction[P, R]:
        if not callable(fn):
            raise TypeError(f"@distributed decorates a function, got {type(fn).__name__}")
        return DistributedFunction(fn, gpus=count, gpu_type=kind, timeout=timeout, max_pickle_bytes=max_pickle_bytes)

    return wrap


def _one_of(value: Any, alias: Any, name: str, alias_name: str) -> Any:
    if value is not None and alias is not None and value != alias:
        raise ValueError(f"{name}={value!r} and {alias_name}={alias!r} disagree; give one of them")
    return value if value is not None else alias


def devices_for_gpus(gpus: object, gpu_type: object) -> Devices:
    """Validate the request against this machine: "cuda" when it can be met, "cpu" when there is no GPU."""
    gpus = rank_count(gpus, "gpus", hint=" (e.g. @distributed(gpus=2))")
    if gpu_type is not None:
        _check_known(gpu_type)
    visible = visible_gpus()
    if visible == 0:
        notice(f"no CUDA device is visible: running {gpus} CPU ranks with gloo instead of GPUs", key=_CPU_NOTICE)
        return "cpu"
    if gpus > visible:
        raise ValueError(f"gpus={gpus} asked, but this machine has {visible} CUDA device(s); use gpus<={visible}")
    if gpu_type is not None:
        names = _device_names(gpus)
        wanted = _normal(str(gpu_type))
        wrong = [n for n in names if wanted not in _tokens(n)]
        if wrong:
            visible_names = ", ".join(sorted(set(names)))
            raise ValueError(f"gpu_type={gpu_type!r} asked, but the visible devices are {visible_names}")
    return "cuda"


def _check_known(gpu_type: object) -> None:
    if not isinstance(gpu_type, str) or not gpu_type.strip():
        raise ValueError(f"gpu_type must be a GPU model name such as 'H100', got {gpu_type!r}")
    if _normal(gpu_type) not in {_normal(k) for k in KNOWN_GPU_TYPES}:
        close = difflib.get_close_matches(gpu_type.upper(), KNOWN_GPU_TYPES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown gpu_type {gpu_type!r}: {hint}known types are {', '.join(KNOWN_GPU_TYPES)}")


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _tokens(device_name: str) -> set[str]:
    """``"NVIDIA A100-SXM4-80GB"`` -> {"nvidia", "a100", "sxm4", "80gb"}: "A10" must not match an A100."""
    return {_normal(part) for part in re.split(r"[^A-Za-z0-9]+", device_name) if part}


def _device_names(n: int) -> list[str]:
    import torch

    return [str(torch.cuda.get_device_name(i)) for i in range(n)]
