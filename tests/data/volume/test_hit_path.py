"""How much of uc_jupyter a cache hit walks through: the distinct functions and modules of ours that each
``next()`` of a DataLoader enters over a fully cached remote volume (counted with ``sys.setprofile``).

A hit should be one call into the cache; everything else each ``next()`` does is bookkeeping that the
training loop pays for every batch. The redesign's targets (issue "One storage layer, ...") are: the
first ``next()`` of a pass (which starts the pass) at most 30 functions in 8 modules, every later one at
most 12 in 5, which the stages meet: a later ``next()`` is the loop's timing, the hand-out stage
(each file's item, counted, and the files the loop moved past released), and the consumer's progress;
the window over the cache runs once per run of hits, and a hit is one call into the cache.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

from tests.data.conftest import write_files
from uc_jupyter.data import DataLoader, UCVolumeDataset
from uc_jupyter.testing.clocks import ManualClock
from uc_jupyter.testing.scripts import run_python

Volume = Callable[..., tuple[str, Path]]

FIRST_NEXT = (30, 8)  # functions, modules
LATER_NEXT = (12, 5)


class Entered:
    """The uc_jupyter functions (module, qualified name) entered while it is active, on this thread."""

    def __init__(self) -> None:
        self.functions: set[tuple[str, str]] = set()

    def _profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            module = frame.f_globals.get("__name__", "")
            if module.startswith("uc_jupyter.") and not module.startswith("uc_jupyter.testing"):
                self.functions.add((module, frame.f_code.co_qualname))

    def __enter__(self) -> Entered:
        sys.setprofile(self._profile)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.setprofile(None)

    @property
    def modules(self) -> set[str]:
        return {module for module, _ in self.functions}


def _walks(loader: DataLoader) -> Iterator[Entered]:
    """What each ``next()`` of one pass entered."""
    batches = iter(loader)
    while True:
        with Entered() as entered:
            try:
                next(batches)
            except StopIteration:
                return
        yield entered


def walk_of_a_cached_pass(path: str) -> dict[str, Any]:
    """In this process: one pass over the volume at ``path`` to fill the cache, then what each
    ``next()`` of a second pass (all hits) entered, as lists of ``[module, function]``."""
    # Clocks that stand still: what a next() does must not depend on when the telemetry falls due or
    # how fast the pace thinks the loop takes files.
    dataset = UCVolumeDataset(path, min_free_bytes=0, clock=ManualClock())
    loader = DataLoader(dataset, batch_size=4, num_workers=0, mlflow=False, clock=ManualClock())
    filled = sum(len(batch) for batch in loader)  # the first pass downloads every file
    first, *later = list(_walks(loader))
    worst = max(later, key=lambda entered: len(entered.functions))
    return {
        "filled": filled,
        "hits": loader.stats().hits,
        "first": sorted(first.functions),
        "later": sorted(worst.functions),
    }


# In a fresh interpreter: what a user's process walks, whatever earlier tests left installed in this one.
_MEASURE = """
import json, sys
from tests.data.volume.test_hit_path import walk_of_a_cached_pass
print(json.dumps(walk_of_a_cached_pass(sys.argv[1])))
"""


def test_a_cached_pass_walks_few_of_our_functions(s3_volume: Volume) -> None:
    path, folder = s3_volume()
    write_files(folder, 20)
    walk, _ = run_python(_MEASURE, path)
    assert (walk["filled"], walk["hits"]) == (20, 20)  # the second pass hit the cache for all 20
    first = {tuple(f) for f in walk["first"]}
    modules = {module for module, _ in first}
    assert len(first) <= FIRST_NEXT[0] and len(modules) <= FIRST_NEXT[1], walk["first"]
    assert not {m for m in modules if m.startswith("uc_jupyter.storage.") and m != "uc_jupyter.storage.downloads"}, (
        "a pass of cache hits builds no storage client"
    )
    later = {tuple(f) for f in walk["later"]}
    assert len(later) <= LATER_NEXT[0] and len({m for m, _ in later}) <= LATER_NEXT[1], walk["later"]
