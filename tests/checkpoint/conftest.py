"""State dicts for the checkpoint tests (their volumes are the suite's local and S3 ones, in
tests/conftest.py): state dicts whose every dtype and shape a checkpoint must give back bit for bit."""

from __future__ import annotations

import torch
import torch.distributed.checkpoint as dcp

from uc_jupyter.checkpoint import UCVolumeReader, UCVolumeWriter


def every_kind(seed: int) -> dict[str, object]:
    """A state dict of every kind of item: tensors of several dtypes and shapes (0-d, empty, strided),
    and plain Python values (stored as bytes)."""
    generator = torch.Generator().manual_seed(seed)
    weights = torch.randn(64, 33, generator=generator)
    return {
        "model": {
            "weight": weights,
            "bias.bf16": torch.randn(33, generator=generator).to(torch.bfloat16),
            "steps": torch.tensor(seed, dtype=torch.int64),
            "mask": torch.rand(7, 3, generator=generator) > 0.5,
            "empty": torch.empty(0, 4),
            "transposed": weights.t()[:5],
            "half": torch.randn(2, 3, 4, generator=generator).half(),
        },
        "extra": {"epoch": seed, "note": "résumé", "lr": [0.1, 0.01]},
    }


def zeros_like(state: dict[str, object]) -> dict[str, object]:
    """Where a load goes: the same tensors' shapes, all zero, and placeholders for the plain values."""
    model = state["model"]
    assert isinstance(model, dict)
    return {
        "model": {name: torch.zeros_like(t) for name, t in model.items()},
        "extra": {"epoch": -1, "note": "", "lr": []},
    }


def assert_bit_equal(loaded: dict[str, object], saved: dict[str, object]) -> None:
    loaded_model, saved_model = loaded["model"], saved["model"]
    assert isinstance(loaded_model, dict) and isinstance(saved_model, dict)
    assert loaded_model.keys() == saved_model.keys()
    for name, tensor in saved_model.items():
        got = loaded_model[name]
        assert got.dtype == tensor.dtype and got.shape == tensor.shape, name
        assert torch.equal(got.reshape(-1).view(torch.uint8), tensor.reshape(-1).view(torch.uint8)), name
    assert loaded["extra"] == saved["extra"]


def save(path: str, state: dict[str, object], **options: object) -> None:
    """``state`` saved into the run folder ``path`` by one process (no process group)."""
    dcp.save(state, storage_writer=UCVolumeWriter(path, **options), no_dist=True)  # type: ignore[arg-type]


def load(path: str, like: dict[str, object]) -> dict[str, object]:
    """What ``path`` holds, loaded into zeros shaped ``like``."""
    target = zeros_like(like)
    dcp.load(target, storage_reader=UCVolumeReader(path), no_dist=True)
    return target
