"""The kernel's one rank pool for ``@distributed``, ``@ray_launch`` and ``%%uc_distributed``: kept warm
across calls while what they ask for stays the same.

Example:
    >>> pool = shared_pool(2, devices="cpu")       # doctest: +SKIP
    >>> shared_pool(2, devices="cpu") is pool       # doctest: +SKIP
    True
"""

from __future__ import annotations

import threading

from uc_jupyter.distributed.checks import check_cluster
from uc_jupyter.distributed.pool import Backend, Devices, RankPool

__all__ = ["current_shared_pool", "shared_pool", "shutdown_shared_pool"]

_shared: RankPool | None = None
_shared_key: tuple[object, ...] = ()
_shared_lock = threading.Lock()


def shared_pool(
    n: int,
    *,
    devices: Devices = "auto",
    backend: Backend = "auto",
    cluster: str | None = None,
    nodes: int | None = None,
    gpu_type: str | None = None,
) -> RankPool:
    """The kernel's pool for ``@distributed`` and ``%%uc_distributed``: reused while its size,
    devices, cluster (for ``"ray"``, the address the environment names now), nodes and gpu type
    match, replaced (the old one shut down) when they do not.

    Example:
        >>> pool = shared_pool(2, devices="cpu")       # doctest: +SKIP
        >>> shared_pool(2, devices="cpu") is pool       # doctest: +SKIP
        True
    """
    global _shared, _shared_key
    where = check_cluster(cluster)
    if where == "ray":  # the same words may name another cluster once UC_JUPYTER_RAY_ADDRESS changed
        from uc_jupyter.distributed.launch.ray_cluster import cluster_address

        where = cluster_address(where)
    with _shared_lock:
        current = _shared
        wanted = (n, devices, backend, where, nodes, gpu_type)
        if current is not None and _shared_key == wanted:
            return current
        if current is not None:
            current.shutdown()
        _shared = RankPool(n, devices=devices, backend=backend, cluster=cluster, nodes=nodes, gpu_type=gpu_type)
        _shared_key = wanted
        return _shared


def current_shared_pool() -> RankPool | None:
    """The shared pool, if one was made (running or not)."""
    return _shared


def shutdown_shared_pool() -> None:
    """Stop the shared pool's ranks (``%unload_ext uc_jupyter``, kernel exit)."""
    global _shared
    with _shared_lock:
        current, _shared = _shared, None
    if current is not None:
        current.shutdown()
