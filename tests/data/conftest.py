"""Volumes for the data tests: local ones, and ones on a real S3-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch.utils.data

from uc_jupyter.testing.clocks import ManualClock

FileMaker = Callable[..., dict[str, bytes]]


def write_files(folder: Path, count: int, size: int = 100, prefix: str = "f", sub: str = "") -> dict[str, bytes]:
    """``count`` files of ``size`` distinct bytes each; returns {relative path: content}."""
    written: dict[str, bytes] = {}
    for i in range(count):
        relative = f"{sub}{prefix}{i:05d}.bin"
        content = (f"{relative}:".encode() + os.urandom(size))[:size].ljust(size, b".")
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        written[relative] = content
    return written


def wall_clock() -> ManualClock:
    """A manual clock that starts at the wall clock's time: the cache dates the entries it rebuilds
    from the disk by their files' mtimes, and tests compare its readings with ``time.time()``."""
    return ManualClock(now=time.time())


class WorkerTagged(torch.utils.data.IterableDataset[int]):
    """Worker ``w`` yields ``counts[w]`` items, each its own number."""

    def __init__(self, counts: list[int]) -> None:
        self.counts = counts

    def __iter__(self) -> Any:
        info = torch.utils.data.get_worker_info()
        worker = 0 if info is None else info.id
        return iter([worker] * self.counts[worker])
