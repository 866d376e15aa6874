"""The random number generators' state of every rank, as one item of a checkpoint.

A training step draws from Python's ``random``, NumPy's global generator and torch's (CPU, and
CUDA where it is in use): augmentations, dropout, sampling. Resuming bit-for-bit needs them back.
:class:`RandomState` is ``Stateful`` for ``torch.distributed.checkpoint``: its state holds every
rank's generators (gathered under ``torch.distributed``, so every rank saves the same item and the
keys do not depend on the world size; without it, only its own). Loaded on a grid of the same
size, each rank gets its own generators back. A rank the checkpoint did not have (resumed on more
ranks) is seeded from the first saved rank's state and its rank number, so it draws a sequence of
its own, the same on every resume.

Example:
    >>> import random
    >>> state = RandomState().state_dict()
    >>> before = random.random()
    >>> RandomState().load_state_dict(state)
    >>> random.random() == before
    True
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
from typing import Any

import numpy as np
import torch

from uc_jupyter.data.stream.grid import current_rank, every_rank

__all__ = ["RandomState"]


def _capture() -> dict[str, Any]:
    """This process's generators as plain values (JSON: no pickle needed to read them back)."""
    version, internal, gauss = random.getstate()
    kind, keys, pos, has_gauss, cached = np.random.get_state(legacy=True)
    assert isinstance(keys, np.ndarray)  # the legacy form is a tuple holding the key array
    state: dict[str, Any] = {
        "python": [version, list(internal), gauss],
        "numpy": [kind, keys.tolist(), int(pos), int(has_gauss), float(cached)],
        "torch": base64.b64encode(torch.get_rng_state().numpy().tobytes()).decode(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        state["cuda"] = [base64.b64encode(s.numpy().tobytes()).decode() for s in torch.cuda.get_rng_state_all()]
    return state


def _restore(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    kind, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(torch.frombuffer(bytearray(base64.b64decode(state["torch"])), dtype=torch.uint8))
    if "cuda" in state and torch.cuda.is_available():
        saved = [torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8) for s in state["cuda"]]
        if len(saved) == torch.cuda.device_count():
            torch.cuda.set_rng_state_all(saved)


def _seed_new_rank(first: dict[str, Any], rank: int) -> None:
    """Seed a rank the checkpoint did not have: from rank 0's saved state and ``rank``."""
    digest = hashlib.sha256(json.dumps([first, rank], sort_keys=True).encode()).digest()
    seed = int.from_bytes(digest[:8], "little")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


class RandomState:
    """``Stateful`` random generators of every rank (see the module docstring).

    Example:
        >>> import torch.distributed.checkpoint as dcp                                   # doctest: +SKIP
        >>> dcp.save({"model": model.state_dict(), "rng": RandomState()}, storage_writer=writer)  # doctest: +SKIP
    """

    def state_dict(self) -> dict[str, Any]:
        """Every rank's generators (a collective under torch.distributed: call it on every rank)."""
        mine = json.dumps(_capture())
        rank, world = current_rank()
        # Without torch.distributed only this rank's are known; the others' stay None.
        ranks = every_rank(mine) or [mine if r == rank else None for r in range(world)]
        return {"ranks": ranks}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Put back this rank's generators (a rank beyond the saved ones: seeded, see above)."""
        ranks = state.get("ranks") if isinstance(state, dict) else None
        if not isinstance(ranks, list) or not ranks:
            raise ValueError("not a RandomState state: expected the dict RandomState.state_dict() returns")
        rank = current_rank()[0]
        if rank < len(ranks) and ranks[rank] is not None:
            _restore(json.loads(ranks[rank]))
        else:
            _seed_new_rank(json.loads(next(r for r in ranks if r is not None)), rank)
