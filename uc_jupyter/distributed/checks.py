"""The checks of a pool's options, shared by RankPool, ``@distributed``, ``@ray_launch`` and
``%%uc_distributed``: each a one-line ValueError naming the option.

Example:
    >>> rank_count(4, "n")
    4
    >>> check_cluster("ray://10.0.0.5:10001")
    'ray://10.0.0.5:10001'
"""

from __future__ import annotations

import math

__all__ = ["check_cluster", "rank_count", "seconds"]


def check_cluster(cluster: object) -> str | None:
    """``cluster`` when it is None, ``"ray"`` or ``"ray://host:port"``; else a one-line ValueError."""
    if cluster is None or cluster == "ray":
        return cluster
    if isinstance(cluster, str) and cluster.startswith("ray://") and len(cluster) > len("ray://"):
        return cluster
    raise ValueError(
        f"cluster must be None (this machine), 'ray' (the address in UC_JUPYTER_RAY_ADDRESS or RAY_ADDRESS) "
        f"or 'ray://host:port' (Ray Client), got {cluster!r}"
    )


def rank_count(value: object, name: str, hint: str = "") -> int:
    """``value`` when it is a whole number >= 1 (not a bool); else a one-line ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive whole number of ranks, got {value!r}{hint}")
    return value


def seconds(value: object, name: str) -> float | None:
    """``value`` as a float when it is a positive finite number of seconds, None for None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
        raise ValueError(f"{name} must be a positive number of seconds or None, got {value!r}")
    return float(value)
