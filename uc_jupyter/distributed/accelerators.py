"""Accelerator requests, pure: what ``gpus``/``num_accelerators`` and ``gpu_type``/``accelerator_type``
ask for, and whether a cluster's nodes can give it.

The reference runtime names accelerators per node: ``"GPU_8xH100"`` is a node of 8 H100s, so
``num_accelerators=16, accelerator_type="GPU_8xH100"`` is 2 nodes of 8. A plain model name
(``"H100"``) says the type and leaves the split to the cluster. Nothing here touches a machine or a
cluster: :func:`shortfall` judges a cluster from a list of its nodes' resources (as Ray reports them,
``{"GPU": 8.0, "accelerator_type:H100": 1.0, ...}``).

Example:
    >>> wanted = request(16, "GPU_8xH100")
    >>> (wanted.count, wanted.kind, wanted.per_node, wanted.nodes)
    (16, 'H100', 8, 2)
    >>> request(12, "GPU_8xH100")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: num_accelerators=12 is not a multiple of 8, the GPUs per node of ...: give 8, 16 or 24
    >>> parse_accelerator_type("gpu_1xa10")
    (1, 'A10')
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "KNOWN_GPU_TYPES",
    "Accelerators",
    "NodeResources",
    "has_gpus",
    "matches",
    "parse_accelerator_type",
    "request",
    "shortfall",
    "spelled",
]

# Accelerator names the reference runtime and cloud offerings use; matched against CUDA device names
# and against Ray's accelerator_type:<name> resources.
KNOWN_GPU_TYPES = ("A10", "A10G", "A100", "B200", "GB200", "H100", "H200", "L4", "L40S", "T4", "V100")

_PER_NODE = re.compile(r"^GPU_(\d+)x(.+)$", re.IGNORECASE)
_RAY_TYPE = "accelerator_type:"


@dataclass(frozen=True)
class Accelerators:
    """``count`` accelerators (one rank each) of ``kind`` (None: any), ``per_node`` on each node
    (None: however they fit)."""

    count: int
    kind: str | None = None
    per_node: int | None = None

    @property
    def nodes(self) -> int | None:
        """How many nodes the request spans, when it says (``per_node``)."""
        return None if self.per_node is None else self.count // self.per_node

    def describe(self) -> str:
        """``"2 nodes x 8 H100"``, ``"4 GPUs"``: the request in words, for messages."""
        kind = f" {self.kind}" if self.kind else " GPU"
        if self.per_node is not None:
            return f"{self.nodes} node{'s' if self.nodes != 1 else ''} x {self.per_node}{kind}"
        return f"{self.count}{kind}{'s' if self.count != 1 and not self.kind else ''}"


@dataclass(frozen=True)
class NodeResources:
    """One live node of a cluster: its address, its total and its free resources (Ray's names)."""

    address: str
    total: Mapping[str, float]
    free: Mapping[str, float]

    @property
    def types(self) -> tuple[str, ...]:
        """The accelerator types the node has (Ray's ``accelerator_type:<name>`` resources)."""
        return tuple(sorted(name.removeprefix(_RAY_TYPE) for name in self.total if name.startswith(_RAY_TYPE)))


def parse_accelerator_type(value: object, name: str = "accelerator_type") -> tuple[int | None, str]:
    """``"GPU_8xH100"`` -> (8, "H100"); ``"H100"`` -> (None, "H100"): the GPUs per node (None: not
    said) and the model, spelled as in :data:`KNOWN_GPU_TYPES`; a one-line ValueError otherwise."""
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{name} must be a GPU model name such as 'H100' or 'GPU_8xH100', got {value!r}")
    per_node: int | None = None
    model = value.strip()
    shaped = _PER_NODE.match(model)
    if shaped:
        per_node, model = int(shaped.group(1)), shaped.group(2)
        if per_node < 1:
            raise ValueError(f"{name}={value!r} has {per_node} GPUs per node; give at least 1, e.g. 'GPU_8xH100'")
    known = {_normal(k): k for k in KNOWN_GPU_TYPES}
    if _normal(model) not in known:
        close = difflib.get_close_matches(model.upper(), KNOWN_GPU_TYPES, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ValueError(f"unknown {name} {value!r}: {hint}known types are {', '.join(KNOWN_GPU_TYPES)}")
    return per_node, known[_normal(model)]


def spelled(
    gpus: object, num_accelerators: object, gpu_type: object, accelerator_type: object
) -> tuple[Any, Any, tuple[str, str]]:
    """(count, type, (count's name, type's name)) of a decorator's request, given by the reference's
    names or ours (not both, unless they agree); the names are how the user spelled it, for errors.

    Example:
        >>> spelled(None, 16, None, "GPU_8xH100")
        (16, 'GPU_8xH100', ('num_accelerators', 'accelerator_type'))
    """
    count = _one_of(gpus, num_accelerators, "gpus", "num_accelerators")
    kind = _one_of(gpu_type, accelerator_type, "gpu_type", "accelerator_type")
    names = (
        "num_accelerators" if gpus is None and num_accelerators is not None else "gpus",
        "accelerator_type" if gpu_type is None and accelerator_type is not None else "gpu_type",
    )
    return count, kind, names


def _one_of(value: Any, alias: Any, name: str, alias_name: str) -> Any:
    if value is not None and alias is not None and value != alias:
        raise ValueError(f"{name}={value!r} and {alias_name}={alias!r} disagree; give one of them")
    return value if value is not None else alias


def request(
    count: object,
    accelerator_type: object = None,
    *,
    count_name: str = "num_accelerators",
    type_name: str = "accelerator_type",
) -> Accelerators:
    """The request ``count`` x ``accelerator_type`` means; ``count`` may be left out (None) when the
    type says the GPUs per node (one node of them). One-line ValueErrors name the argument."""
    per_node, kind = (None, None) if accelerator_type is None else parse_accelerator_type(accelerator_type, type_name)
    if count is None and per_node is not None:
        count = per_node
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"{count_name} must be a positive whole number of ranks, got {count!r}")
    if per_node is not None and count % per_node:
        multiples = ", ".join(str(per_node * k) for k in range(1, 3))
        raise ValueError(
            f"{count_name}={count} is not a multiple of {per_node}, the GPUs per node of "
            f"{type_name}={accelerator_type!r}: give {multiples} or {per_node * 3}"
        )
    return Accelerators(count, kind, per_node)


def matches(kind: str, device_name: str) -> bool:
    """Whether a device or Ray accelerator name is of model ``kind``: ``"A100"`` matches
    ``"NVIDIA A100-SXM4-80GB"`` and ``"A100-80G"``, never ``"A10"`` an A100 (whole words only)."""
    return _normal(kind) in {_normal(part) for part in re.split(r"[^A-Za-z0-9]+", device_name) if part}


def shortfall(wanted: Accelerators, nodes: Sequence[NodeResources]) -> str | None:
    """None when ``nodes`` have ``wanted`` free now; else one line saying what is missing and what is
    free, node by node. A cluster with no GPU at all is the caller's to judge (see :func:`has_gpus`)."""
    fitting = [n for n in nodes if wanted.kind is None or any(matches(wanted.kind, t) for t in n.types)]
    if wanted.kind is not None and not fitting:
        others = sorted({t for n in nodes for t in n.types})
        have = f"it has {', '.join(others)}" if others else "its nodes do not say their GPU type"
        return f"no node of the cluster has {wanted.kind} GPUs ({have}); ask for one of those, or no type"
    free = [int(n.free.get("GPU", 0.0)) for n in fitting]
    if wanted.per_node is not None:
        enough = sum(1 for f in free if f >= wanted.per_node) >= (wanted.nodes or 0)
    else:
        enough = sum(free) >= wanted.count
    if enough:
        return None
    kind = f"{wanted.kind} " if wanted.kind else ""
    each = f"{wanted.nodes} node(s) with {wanted.per_node} free {kind}GPUs each" if wanted.per_node else None
    need = each or f"{wanted.count} free {kind}GPUs"
    listing = "; ".join(
        f"{n.address} {f} of {int(n.total.get('GPU', 0.0))} GPUs" for n, f in zip(fitting, free, strict=True)
    )
    return f"{wanted.describe()} asked, but the cluster has fewer than {need}; free now: {listing or 'none'}"


def has_gpus(nodes: Sequence[NodeResources]) -> bool:
    """Whether any node has a GPU at all (free or not)."""
    return any(n.total.get("GPU", 0.0) > 0 for n in nodes)


def _normal(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())
