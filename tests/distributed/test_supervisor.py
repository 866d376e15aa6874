"""Each rank runs under its own supervisor (a subreaper): orphans below the rank are adopted by it, the
rank's way of ending is reported as its own, and a rank whose supervisor is gone still ends its tree."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import cloudpickle
import psutil
import pytest

from uc_jupyter.distributed import RankDied, RankPool
from uc_jupyter.testing.waits import wait_until

from .conftest import PoolMaker, wait_until_gone

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name

DAEMON = "import os, time; os.setsid(); time.sleep(600)"
LAUNCHER = "import subprocess as s, sys; print(s.Popen([sys.executable, '-c', sys.argv[1]], stdout=s.DEVNULL).pid)"


def orphan_daemon() -> tuple[int, int, int]:
    """(the daemon's pid, its parent's pid, this rank's parent's pid) once its launcher has exited."""
    launched = subprocess.run([sys.executable, "-c", LAUNCHER, DAEMON], stdout=subprocess.PIPE, text=True, check=True)
    daemon = int(launched.stdout)
    wait_until(lambda: psutil.Process(daemon).ppid() != 1, "the orphan to be adopted, not by init", 10, interval_s=0.01)
    return daemon, psutil.Process(daemon).ppid(), os.getppid()


def session_child() -> int:
    return subprocess.Popen([sys.executable, "-c", DAEMON]).pid


def test_a_rank_runs_under_a_supervisor_that_adopts_its_orphans() -> None:
    with RankPool(1, devices="cpu") as pool:
        [(daemon, adopter, supervisor)] = pool.run(orphan_daemon)
        [info] = pool.status().ranks  # the rank itself
        assert psutil.Process(info.pid).ppid() == supervisor
        assert psutil.Process(supervisor).ppid() == os.getpid()  # the kernel started the supervisor
        assert "uc_jupyter.distributed._supervisor" in psutil.Process(supervisor).cmdline()
        assert adopter == supervisor  # not init: the daemon stays in the rank's tree
    assert not wait_until_gone({daemon, supervisor, info.pid})


@pytest.mark.parametrize(("code", "how"), [(3, "exited with code 3"), (-signal.SIGTERM, "killed by signal SIGTERM")])
def test_the_rank_ends_the_way_it_ended_for_the_kernel(code: int, how: str, make_pool: PoolMaker) -> None:
    def end() -> None:
        if code >= 0:
            os._exit(code)
        os.kill(os.getpid(), -code)

    with make_pool(1, devices="cpu") as pool, pytest.raises(RankDied, match=f"rank 0 died: its process {how}"):
        pool.run(end)


def test_a_rank_whose_supervisor_is_killed_ends_its_own_tree() -> None:
    with RankPool(1, devices="cpu") as pool:
        [child] = pool.run(session_child)
        [info] = pool.status().ranks
        supervisor = psutil.Process(info.pid).ppid()
        os.kill(supervisor, signal.SIGKILL)  # nothing is left to adopt what the rank leaves
        assert not wait_until_gone({info.pid, child}), "the rank or its child outlived the supervisor"
        with pytest.raises(RankDied, match="rank 0 died"):
            pool.run(os.getpid)


def test_the_supervisor_needs_its_channel() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "uc_jupyter.distributed._supervisor"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "usage: python -m uc_jupyter.distributed._supervisor FD" in done.stderr
