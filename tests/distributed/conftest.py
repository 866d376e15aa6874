"""Rank pools for the distributed tests, and a check after every test that no rank outlives its pool."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psutil
import pytest

from uc_jupyter.distributed.pool import RankPool, current_shared_pool, shutdown_shared_pool
from uc_jupyter.testing.waits import wait_until

KEPT: list[RankPool] = []  # pools that live across the tests of a module


RANK_ENTRIES = ("uc_jupyter.distributed._worker", "uc_jupyter.distributed._supervisor")


def rank_processes() -> set[int]:
    """Pids of rank processes (and their supervisors) descending from this test process."""
    found = set()
    for child in psutil.Process().children(recursive=True):
        try:
            command = " ".join(child.cmdline())
            if any(entry in command for entry in RANK_ENTRIES) and child.status() != "zombie":
                found.add(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def pool_pids(pool: RankPool) -> set[int]:
    return {info.pid for info in pool.status().ranks}


def with_supervisors(pids: set[int]) -> set[int]:
    """``pids`` (ranks) and their parents (each rank's supervisor)."""
    found = set(pids)
    for pid in pids:
        try:
            found.add(psutil.Process(pid).ppid())
        except psutil.NoSuchProcess:
            continue
    return found


def wait_until_gone(pids: set[int], within: float = 10.0) -> set[int]:
    """The pids still alive after ``within`` seconds (at once when none is): the caller says what that means."""

    def alive() -> set[int]:
        return {pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"}

    with contextlib.suppress(AssertionError):  # not a failure here: the caller asserts or ends them
        wait_until(lambda: not alive(), "the processes to end", within)
    return alive()


@pytest.fixture(scope="module")
def pool() -> Iterator[RankPool]:
    """Two CPU ranks shared by a module's tests (start-up is paid once, as in a notebook)."""
    shared = RankPool(2, devices="cpu", stop_grace=2.0)
    shared.start()
    KEPT.append(shared)
    yield shared
    KEPT.remove(shared)
    pids = with_supervisors(pool_pids(shared))
    shared.shutdown()
    assert not wait_until_gone(pids), "ranks outlived shutdown()"


@pytest.fixture(autouse=True)
def no_orphans() -> Iterator[None]:
    """After each test, the only rank processes left are those of the pools kept for the module."""
    yield
    if (shared := current_shared_pool()) is not None and shared not in KEPT:
        shutdown_shared_pool()
    kept = with_supervisors(set().union(*(pool_pids(p) for p in KEPT))) if KEPT else set()
    leftover = wait_until_gone(rank_processes() - kept)
    assert not leftover, f"rank processes left behind: {sorted(leftover)}"
