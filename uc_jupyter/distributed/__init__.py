"""Multi-rank training from a notebook: a persistent pool of spawned ranks with ``torch.distributed``
ready (on this machine or a Ray cluster), run through ``@distributed`` or ``%%uc_distributed``;
``@ray_launch`` runs a function once with the Ray cluster connected.

Attributes load lazily so ``import uc_jupyter.distributed`` does not import torch.

Example:
    >>> from uc_jupyter.distributed import RankPool, distributed  # doctest: +SKIP
"""

from __future__ import annotations

from uc_jupyter.lazy import lazy_attributes

__all__ = [
    "DistributedFunction",
    "PayloadError",
    "PoolStatus",
    "RankDied",
    "RankError",
    "RankPool",
    "RankStartError",
    "RankTimeout",
    "RayLaunchFunction",
    "distributed",
    "ray_launch",
    "set_verbose",
    "shared_pool",
    "shutdown_shared_pool",
]

_HOMES = {
    "DistributedFunction": "uc_jupyter.distributed.decorator",
    "distributed": "uc_jupyter.distributed.decorator",
    "RayLaunchFunction": "uc_jupyter.distributed.ray_driver",
    "ray_launch": "uc_jupyter.distributed.ray_driver",
    "PayloadError": "uc_jupyter.distributed.errors",
    "RankDied": "uc_jupyter.distributed.errors",
    "RankError": "uc_jupyter.distributed.errors",
    "RankStartError": "uc_jupyter.distributed.errors",
    "RankTimeout": "uc_jupyter.distributed.errors",
    "set_verbose": "uc_jupyter.distributed.errors",
    "PoolStatus": "uc_jupyter.distributed.status",
    "RankPool": "uc_jupyter.distributed.pool",
    "shared_pool": "uc_jupyter.distributed.shared",
    "shutdown_shared_pool": "uc_jupyter.distributed.shared",
}

__getattr__ = lazy_attributes("uc_jupyter.distributed", _HOMES)
