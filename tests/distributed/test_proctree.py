"""Process trees from /proc: finding every descendant in any session, and ending a tree that keeps
forking, without touching anything outside it."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
from collections.abc import Iterator

import psutil
import pytest
from hypothesis import given
from hypothesis import strategies as st

from uc_jupyter.distributed import proctree
from uc_jupyter.distributed.proctree import descendants, descendants_in, kill_tree
from uc_jupyter.testing.waits import wait_until

DAEMON = "import os, time; os.setsid(); time.sleep(600)"
# Forks a new sleeping child every few milliseconds until it is killed.
FORKER = """
import subprocess, sys, time
while True:
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    time.sleep(0.005)
"""


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes a test starts; killed with their trees afterwards whatever happened."""
    processes: list[subprocess.Popen[bytes]] = []
    yield processes
    for process in processes:
        kill_tree(process.pid, include_root=True)
        process.wait()


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_the_module_example_runs() -> None:
    result = doctest.testmod(proctree, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def forests() -> st.SearchStrategy[dict[int, int]]:
    """Parent maps like /proc's: pid -> parent pid, over small pids (cycles included, /proc has none)."""
    return st.dictionaries(st.integers(1, 30), st.integers(0, 30), max_size=30)


@given(links=forests(), root=st.integers(0, 30))
def test_descendants_are_those_with_the_root_as_an_ancestor(links: dict[int, int], root: int) -> None:
    found = descendants_in(links, root)
    assert len(found) == len(set(found)) and root not in found

    def reaches(pid: int) -> bool:
        seen = set()
        while pid in links and pid not in seen:
            seen.add(pid)
            pid = links[pid]
            if pid == root:
                return True
        return False

    assert set(found) == {pid for pid in links if pid != root and reaches(pid)}
    position = {pid: i for i, pid in enumerate(found)}
    assert all(position[links[pid]] < position[pid] for pid in found if links[pid] != root)  # parents first


def test_a_grandchild_in_its_own_session_is_a_descendant(started: list[subprocess.Popen[bytes]]) -> None:
    spawn = f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {DAEMON!r}]); time.sleep(600)"
    parent = subprocess.Popen([sys.executable, "-c", spawn])
    started.append(parent)
    wait_until(lambda: len(descendants(parent.pid)) == 1, "the child to start", 10, interval_s=0.01)
    [grandchild] = descendants(parent.pid)
    assert psutil.Process(grandchild).ppid() == parent.pid
    wait_until(lambda: os.getsid(grandchild) != os.getsid(parent.pid), "the grandchild's setsid()", 10, interval_s=0.01)
    assert descendants(parent.pid) == {grandchild}


def test_a_tree_that_keeps_forking_is_ended_and_nothing_else(started: list[subprocess.Popen[bytes]]) -> None:
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    started.append(bystander)
    forker = subprocess.Popen([sys.executable, "-c", FORKER])
    started.append(forker)
    wait_until(lambda: len(descendants(forker.pid)) >= 5, "five children of the forker", 10, interval_s=0.01)
    tree = descendants(forker.pid)
    assert kill_tree(forker.pid, include_root=True) >= len(tree) + 1
    assert forker.wait(10) == -9
    wait_until(
        lambda: not any(running(pid) for pid in tree | descendants(forker.pid)),
        "the forker's whole tree to end",
        10,
        interval_s=0.01,
    )
    assert running(bystander.pid)


SUBREAPER = f"""
import json, os, subprocess, sys, time
from uc_jupyter.distributed.proctree import become_subreaper
assert become_subreaper()
launch = "import subprocess as s, sys; print(s.Popen([sys.executable, '-c', {DAEMON!r}], stdout=s.DEVNULL).pid)"
daemon = int(subprocess.run([sys.executable, "-c", launch], stdout=subprocess.PIPE, text=True, check=True).stdout)
time.sleep(0.2)
parent = int(open(f"/proc/{{daemon}}/stat").read().rpartition(")")[2].split()[1])
print(json.dumps({{"daemon": daemon, "parent": parent, "me": os.getpid()}}))
os.kill(daemon, 9)
os.waitpid(daemon, 0)
"""


def test_a_subreaper_adopts_an_orphaned_daemon() -> None:
    done = subprocess.run([sys.executable, "-c", SUBREAPER], capture_output=True, text=True, timeout=60, check=True)
    report = json.loads(done.stdout)
    assert report["parent"] == report["me"]  # re-parented to the subreaper, not to init
