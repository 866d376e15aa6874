"""Rank pools for the distributed tests, on this machine and on a real two-node Ray cluster (the
``placement`` parameter of tests/conftest.py), and a check after every test that no rank (and no Ray
rank host) outlives its pool."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psutil
import pytest

from tests.conftest import PoolMaker
from uc_jupyter.distributed.launch.local import rank_environment
from uc_jupyter.distributed.pool import RankPool
from uc_jupyter.distributed.shared import current_shared_pool, shutdown_shared_pool
from uc_jupyter.processes import free_port
from uc_jupyter.testing.ray_cluster import leftover_rank_hosts
from uc_jupyter.testing.waits import wait_until

__all__ = ["PoolMaker"]

KEPT: list[RankPool] = []  # pools that live across the tests of a module
KEPT_RANKS: set[int] = set()  # pids of ranks started without a pool that live across a module's tests


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


def one_rank(*, principal: str = "alice", backend: str = "gloo") -> dict[str, str]:
    """The environment of rank 0 in a world of one on this machine (its rendezvous on a free port)."""
    return rank_environment(
        rank=0,
        size=1,
        local_rank=0,
        local_size=1,
        node_rank=0,
        master_addr="127.0.0.1",
        port=free_port(),
        principal=principal,
        devices="cpu",
        backend=backend,
    )


def pool_pids(pool: RankPool) -> set[int]:
    return {info.pid for info in pool.status().ranks}


def with_supervisors(pids: set[int]) -> set[int]:
    """``pids`` (ranks), their parents (each rank's supervisor) and, for ranks on Ray, the supervisor's
    parent (the rank's host actor)."""
    found = set(pids)
    for pid in pids:
        try:
            supervisor = psutil.Process(pid).parent()
            if supervisor is None:
                continue
            found.add(supervisor.pid)
            host = supervisor.parent()
            if host is not None and host.pid in set(leftover_rank_hosts()):
                found.add(host.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def wait_until_gone(pids: set[int], within: float = 10.0) -> set[int]:
    """The pids still alive after ``within`` seconds (at once when none is): the caller says what that means."""

    def alive() -> set[int]:
        living = set()
        for pid in pids:
            with contextlib.suppress(psutil.NoSuchProcess):  # gone between the listing and the look
                if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                    living.add(pid)
        return living

    with contextlib.suppress(AssertionError):  # not a failure here: the caller asserts or ends them
        wait_until(lambda: not alive(), "the processes to end", within)
    return alive()


@pytest.fixture(scope="module")
def pool(placement: str | None) -> Iterator[RankPool]:
    """Two CPU ranks shared by a module's tests (start-up is paid once, as in a notebook); on Ray, one
    on each node."""
    shared = RankPool(2, devices="cpu", stop_grace=2.0, cluster=placement, nodes=2 if placement else None)
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
    kept |= KEPT_RANKS
    leftover = wait_until_gone((rank_processes() | set(leftover_rank_hosts())) - kept)
    assert not leftover, f"rank processes left behind: {sorted(leftover)}"
