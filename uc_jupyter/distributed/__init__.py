"""Multi-rank training from a notebook: a persistent pool of spawned ranks with ``torch.distributed``
ready, run through ``@distributed`` or ``%%uc_distributed``.

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
    "distributed",
    "set_verbose",
    "shared_pool",
    "shutdown_shared_pool",
]

_HOMES = {
    "DistributedFunction": "uc_jupyter.distributed.decorator",
    "distributed": "uc_jupyter.distributed.decorator",
    "PayloadError": "uc_jupyter.distributed.errors",
    "RankDied": "uc_jupyter.distributed.errors",
    "RankError": "uc_jupyter.distributed.errors",
    "RankStartError": "uc_jupyter.distributed.errors",
    "RankTimeout": "uc_jupyter.distributed.errors",
    "set_verbose": "uc_jupyter.distributed.errors",
    "PoolStatus": "uc_jupyter.distributed.pool",
    "RankPool": "uc_jupyter.distributed.pool",
    "shared_pool": "uc_jupyter.distributed.pool",
    "shutdown_shared_pool": "uc_jupyter.distributed.pool",
}

__getattr__ = lazy_attributes("uc_jupyter.distributed", _HOMES)
