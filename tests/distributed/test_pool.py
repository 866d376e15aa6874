"""RankPool with real CPU ranks (gloo), spawned here and placed on a two-node Ray cluster (the
``placement`` parameter): results, namespaces, output, failures, interrupts."""

from __future__ import annotations

import _thread
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import cloudpickle
import numpy as np
import pytest

from uc_jupyter.distributed import PayloadError, RankDied, RankError, RankPool, RankStartError, RankTimeout
from uc_jupyter.processes import free_port
from uc_jupyter.testing.waits import wait_until

from .conftest import PoolMaker, pool_pids, wait_until_gone

cloudpickle.register_pickle_by_value(sys.modules[__name__])  # ranks cannot import test modules by name


def all_reduce_sum(offset: int) -> float:
    import torch
    import torch.distributed as dist

    value = torch.tensor([float(dist.get_rank() + offset)])
    dist.all_reduce(value)
    return float(value.item())


def whoami() -> tuple[int, int, str, str, str]:
    import torch.distributed as dist

    env = os.environ
    return dist.get_rank(), dist.get_world_size(), env["LOCAL_RANK"], env["MASTER_ADDR"], dist.get_backend()


# ---------------------------------------------------------------- results and namespaces
def test_all_reduce_and_results_in_rank_order(pool: RankPool) -> None:
    assert pool.run(all_reduce_sum, 10) == [21.0, 21.0]
    if pool.cluster is None:
        assert pool.run(whoami) == [(0, 2, "0", "127.0.0.1", "gloo"), (1, 2, "1", "127.0.0.1", "gloo")]
    else:  # one rank on each node: each is its node's local rank 0, and rank 0's node is the master
        master = pool.status().ranks[0].node
        assert pool.run(whoami) == [(0, 2, "0", master, "gloo"), (1, 2, "0", master, "gloo")]
        assert [info.node_rank for info in pool.status().ranks] == [0, 1]
    assert pool.call(all_reduce_sum, kwargs={"offset": 1}) == [3.0, 3.0]


def test_four_ranks(make_pool: PoolMaker) -> None:
    with make_pool(4, devices="cpu") as four:
        assert four.run(all_reduce_sum, 0) == [6.0] * 4
        assert [r[0] for r in four.run(whoami)] == [0, 1, 2, 3]
        status = four.status()
        assert status.size == 4 and status.state == "idle" and status.backend == "gloo"
        assert [info.rank for info in status.ranks] == [0, 1, 2, 3] and all(i.alive for i in status.ranks)
    assert four.status().state == "stopped"


def test_execute_keeps_each_ranks_namespace(pool: RankPool) -> None:
    local = [0, 0] if pool.cluster else [0, 1]  # on Ray the module's two ranks are on two nodes
    assert pool.execute("counter = rank * 10\nstr(device), world_size, local_rank") == [("cpu", 2, r) for r in local]
    assert pool.execute("counter += 1") == [None, None]
    assert pool.execute("counter") == [1, 11]
    pool.push({"scale": 3})
    assert pool.execute("counter * scale") == [3, 33]
    assert pool.pull("counter", "scale") == {"counter": [1, 11], "scale": [3, 3]}


def test_execute_runs_collectives_across_cells(pool: RankPool) -> None:
    pool.execute("import torch, torch.distributed as dist\nt = torch.ones(2) * (rank + 1)")
    assert pool.execute("dist.all_reduce(t); t.tolist()") == [[3.0, 3.0], [3.0, 3.0]]


# ---------------------------------------------------------------- output
def test_output_is_streamed_live_in_order_per_rank(tmp_path: Path, make_pool: PoolMaker) -> None:
    seen: list[tuple[int, str, str]] = []
    flag = tmp_path / "kernel-saw-rank-1"

    def record(rank: int, stream: str, text: str) -> None:
        for line in text.splitlines():
            seen.append((rank, stream, line))
            if line == "waiting for the kernel":
                flag.write_text("seen")

    def chatty(flag: str) -> bool:
        import torch.distributed as dist

        rank = dist.get_rank()
        for i in range(200):
            print(f"line {i}")
        print("to stderr", file=sys.stderr)
        os.system("echo from a shell")  # file-descriptor-level output is forwarded too
        if rank == 1:
            # The kernel sees this line while the call still runs: it creates the flag in response.
            print("waiting for the kernel")
            wait_until(lambda: os.path.exists(flag), "the kernel to create the flag", 20, interval_s=0.01)
        print("no newline at the end", end="")
        return True

    with make_pool(2, devices="cpu", output=record) as chat:
        assert chat.run(chatty, str(flag)) == [True, True]
        chat.call(print, ("only rank 0 shows",), show=[0])
    for rank in (0, 1):
        lines = [line for r, stream, line in seen if r == rank and stream == "stdout"]
        assert lines[:200] == [f"line {i}" for i in range(200)]
        assert "from a shell" in lines and "no newline at the end" in lines
        assert (rank, "stderr", "to stderr") in seen
    assert [r for r, _, line in seen if line == "only rank 0 shows"] == [0]


def test_default_output_is_prefixed_with_the_rank(pool: RankPool, capsys: pytest.CaptureFixture[str]) -> None:
    pool.run(print, "hello")
    out = capsys.readouterr().out.splitlines()
    assert sorted(out) == ["[rank 0] hello", "[rank 1] hello"]


# ---------------------------------------------------------------- failures
def fail_on(bad_rank: int, message: str) -> int:
    import torch.distributed as dist

    if dist.get_rank() == bad_rank or bad_rank < 0:
        raise ValueError(f"{message} on {dist.get_rank()}")
    return dist.get_rank()


def test_one_failing_rank_raises_the_original_type_with_its_traceback(pool: RankPool) -> None:
    before = pool_pids(pool)
    with pytest.raises(ValueError, match="bad shard on 1") as caught:
        pool.run(fail_on, 1, "bad shard")
    note = caught.value.__notes__[-1].splitlines()
    assert note[0] == "[rank 1] ValueError: bad shard on 1"  # then the rank's own frames, none of ours
    assert note[1:] == [
        f'  File "{__file__}", line {fail_on.__code__.co_firstlineno + 4}, in fail_on',
        '    raise ValueError(f"{message} on {dist.get_rank()}")',
    ]
    assert isinstance(caught.value.rank_error, RankError)  # type: ignore[attr-defined]
    assert pool.run(all_reduce_sum, 0) == [1.0, 1.0]  # still usable: the same ranks
    assert pool_pids(pool) == before


def test_every_rank_failing_gives_a_rank_error_with_each_traceback(pool: RankPool) -> None:
    with pytest.raises(RankError) as caught:
        pool.run(fail_on, -1, "broken")
    error = caught.value
    assert error.ranks == (0, 1)
    assert str(error) == "2 of 2 ranks failed: rank 0: ValueError: broken on 0; rank 1: ValueError: broken on 1"
    rendered = "\n".join(error._render_traceback_())
    assert "[rank 0] ValueError: broken on 0" in rendered and "[rank 1] ValueError: broken on 1" in rendered
    assert pool.run(all_reduce_sum, 0) == [1.0, 1.0]


class OnlyOnRanks(Exception):
    def __init__(self, a: int, b: int) -> None:  # two arguments: does not unpickle the usual way
        super().__init__(f"{a}-{b}")
        self.a = a


def test_an_exception_that_cannot_be_rebuilt_comes_back_as_a_rank_error(pool: RankPool) -> None:
    def fail() -> None:
        raise OnlyOnRanks(1, 2)

    with pytest.raises(RankError, match=r"rank \d of 2 raised OnlyOnRanks: 1-2|2 of 2 ranks failed"):
        pool.run(fail)


def test_a_rank_stuck_in_a_collective_is_killed_and_the_pool_starts_afresh(make_pool: PoolMaker) -> None:
    def one_fails_other_waits() -> None:
        import torch
        import torch.distributed as dist

        if dist.get_rank() == 0:
            raise ValueError("rank 0 gave up")
        dist.all_reduce(torch.ones(1))  # never completes: rank 0 is gone from the collective

    with make_pool(2, devices="cpu", stop_grace=1.0) as stuck:
        stuck.start()  # the timed span below is the call's, not the start's
        before = pool_pids(stuck)
        started = time.monotonic()
        with pytest.raises(ValueError, match="rank 0 gave up") as caught:
            stuck.run(one_fails_other_waits)
        assert time.monotonic() - started < 15
        notes = "\n".join(caught.value.__notes__)
        assert "ranks 1 did not stop" in notes
        # Where rank 1 was when it was killed: in the collective, called from the test's function.
        assert re.search(
            r"rank 1 was in all_reduce \(distributed_c10d\.py:\d+\), called from one_fails_other_waits", notes
        )
        assert not wait_until_gone(before)
        assert stuck.status().state == "stopped"
        assert stuck.run(all_reduce_sum, 0) == [1.0, 1.0]  # a fresh pool
        assert not pool_pids(stuck) & before


def send_telemetry(seq: int) -> None:
    """Forward one loop sample of this rank, numbered ``seq``, as a DataLoader does."""
    import torch.distributed as dist

    from uc_jupyter.telemetry.model import Sample
    from uc_jupyter.telemetry.uplink import forward

    forward([Sample(rank=dist.get_rank(), worker=-1, seq=seq, time=float(seq), batches=seq)])


def test_the_telemetry_of_a_new_generation_of_ranks_reaches_the_collector(pool: RankPool) -> None:
    """Before: after a restart (a rank died, or restart()), the new ranks' samples, numbered from 1
    again, were dropped as older than the dead ranks' and the pool's dashboards froze."""
    pool.run(send_telemetry, 5)
    assert {key: s.batches for key, s in pool.collector.snapshot().samples.items()} == {(0, -1): 5, (1, -1): 5}
    pool.restart()
    pool.run(send_telemetry, 1)
    assert {key: s.batches for key, s in pool.collector.snapshot().samples.items()} == {(0, -1): 1, (1, -1): 1}


def test_a_rank_killed_by_a_signal_is_reported_within_seconds(make_pool: PoolMaker) -> None:
    def die_on_rank_1() -> int:
        import torch.distributed as dist

        if dist.get_rank() == 1:
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(60)
        return 0

    with make_pool(2, devices="cpu", stop_grace=1.0) as doomed:
        doomed.start()  # the timed span below is the call's, not the start's
        before = pool_pids(doomed)
        started = time.monotonic()
        with pytest.raises(RankDied, match="rank 1 died: its process killed by signal SIGKILL") as caught:
            doomed.run(die_on_rank_1)
        assert time.monotonic() - started < 10
        assert caught.value.ranks[0] == 1
        assert not wait_until_gone(before)
        assert doomed.run(all_reduce_sum, 0) == [1.0, 1.0]


def test_interrupt_reaches_every_rank_and_the_pool_stays_usable(pool: RankPool) -> None:
    before = pool_pids(pool)
    timer = threading.Timer(1.0, _thread.interrupt_main)  # what Ctrl-C / a kernel interrupt does
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt, match="^interrupted 2 ranks; the pool is still warm$"):
        pool.execute("import time\nwhile True:\n    time.sleep(0.05)")
    timer.join()
    assert time.monotonic() - started < 8
    assert pool_pids(pool) == before  # interrupted, not killed
    assert pool.run(all_reduce_sum, 0) == [1.0, 1.0]


def test_ranks_that_ignore_an_interrupt_are_killed_and_the_line_says_so(make_pool: PoolMaker) -> None:
    started: set[int] = set()

    def interrupt_once_both_started(rank: int, stream: str, text: str) -> None:
        started.update([rank] if "started" in text else [])
        if started == {0, 1}:
            started.add(-1)  # once
            _thread.interrupt_main()  # what Ctrl-C / a kernel interrupt does

    # 'started' is printed inside the try: printed before it, an interrupt could land between the two
    # and end the rank (it did on CI), which is not a rank that ignores interrupts.
    stubborn = "import time\nsaid = False\nwhile True:\n    try:\n        if not said:\n"
    stubborn += "            said = True\n            print('started', flush=True)\n        time.sleep(0.05)\n"
    stubborn += "    except KeyboardInterrupt:\n        pass\n"
    with make_pool(2, devices="cpu", stop_grace=1.0, output=interrupt_once_both_started) as pool:
        pool.start()
        before = pool_pids(pool)
        with pytest.raises(KeyboardInterrupt) as caught:
            pool.execute(stubborn)
        assert str(caught.value) == (
            "interrupted 2 ranks; ranks 0, 1 did not stop within 1 s and were killed "
            "(the next call starts a fresh pool); rank 0 was in <module> (<rank cell 1>:8); "
            "rank 1 was in <module> (<rank cell 1>:8)"  # line 8: time.sleep, where each rank spends its time
        )
        assert not wait_until_gone(before) and pool.status().state == "stopped"


def test_a_rank_that_does_not_stop_at_a_timeout_is_killed_and_says_where_it_was(make_pool: PoolMaker) -> None:
    """A rank deaf to the stop (SIGINT ignored, in a long C call) is killed after stop_grace; the
    error shows where it was, from the stack dump it wrote on the pool's asking."""

    def deaf() -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        time.sleep(60)

    stopped = r"ran past timeout=1 s; ranks 0 were stopped, so the pool"
    with make_pool(1, devices="cpu", stop_grace=1.0) as stubborn, pytest.raises(RankTimeout, match=stopped) as caught:
        stubborn.call(deaf, timeout=1)
    (stuck,) = caught.value.failures
    line = deaf.__code__.co_firstlineno + 2
    assert stuck.headline == f"RankStuck: did not stop within 1 s; it was in deaf (test_pool.py:{line})"
    assert [frame.name for frame in stuck.frames if not frame.internal] == ["deaf"]
    assert "in deaf" in "\n".join(caught.value.__notes__)


def test_timeout_stops_the_call(pool: RankPool) -> None:
    with pytest.raises(RankTimeout, match=r"ran past timeout=1 s; ranks 0, 1 were stopped") as caught:
        pool.call(time.sleep, (60,), timeout=1)
    assert isinstance(caught.value, TimeoutError)
    assert pool.run(all_reduce_sum, 0) == [1.0, 1.0]


# ---------------------------------------------------------------- ports and processes
def test_a_taken_default_port_does_not_matter(make_pool: PoolMaker) -> None:
    with socket.socket() as taken:
        try:
            taken.bind(("127.0.0.1", 29500))
            taken.listen()
        except OSError:
            pass  # something else already holds it, which is the same situation
        with make_pool(2, devices="cpu") as ported:
            assert ported.run(all_reduce_sum, 0) == [1.0, 1.0]
            assert ported.status().master_port != 29500


def test_a_master_port_set_by_the_user_is_honoured(monkeypatch: pytest.MonkeyPatch, make_pool: PoolMaker) -> None:
    port = free_port()
    monkeypatch.setenv("MASTER_PORT", str(port))
    with make_pool(2, devices="cpu") as ported:
        assert ported.run(lambda: os.environ["MASTER_PORT"]) == [str(port), str(port)]
        assert ported.status().master_port == port


def test_a_rendezvous_that_cannot_bind_fails_clearly(monkeypatch: pytest.MonkeyPatch, make_pool: PoolMaker) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        monkeypatch.setenv("MASTER_PORT", str(taken.getsockname()[1]))
        with pytest.raises(RankStartError, match="the rank pool could not start: rank 0"):
            make_pool(2, devices="cpu", start_timeout=60).start()


KERNEL = """
import os, sys, time
from uc_jupyter.distributed import RankPool
pool = RankPool(2, devices="cpu")
pool.start()
print(" ".join(str(r.pid) for r in pool.status().ranks), flush=True)
if sys.argv[1] == "kill":
    os.kill(os.getpid(), 9)
"""


@pytest.mark.parametrize("how", ["kill", "exit"])
def test_ranks_end_when_the_kernel_ends(how: str, placement: str | None) -> None:
    kernel = KERNEL.replace('RankPool(2, devices="cpu")', f'RankPool(2, devices="cpu", cluster={placement!r})')
    done = subprocess.run([sys.executable, "-c", kernel, how], capture_output=True, text=True, timeout=120)
    pids = {int(p) for p in done.stdout.split()}
    assert len(pids) == 2, done.stderr
    assert not wait_until_gone(pids, within=10)


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("n", [0, -1, 1.5, True, "2"])
def test_bad_rank_counts(n: object) -> None:
    with pytest.raises(ValueError, match="n must be a positive whole number of ranks"):
        RankPool(n, devices="cpu")  # type: ignore[arg-type]


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="devices must be 'auto', 'cpu' or 'cuda'"):
        RankPool(2, devices="gpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="backend must be"):
        RankPool(2, backend="mpi")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="nodes=2: ranks on several machines need a cluster"):
        RankPool(2, nodes=2)
    with pytest.raises(ValueError, match="timeout must be a positive number of seconds"):
        RankPool(2, timeout=-1)
    with pytest.raises(ValueError, match="backend='nccl' needs a GPU per rank"):
        RankPool(1, devices="cpu", backend="nccl").start()


def test_unpicklable_functions_and_results_leave_the_pool_usable(pool: RankPool) -> None:
    lock = threading.Lock()
    unpicklable = r"cannot send <lambda> to the ranks: .*\(TypeError: cannot pickle '_thread.lock' object\)"
    with pytest.raises(PayloadError, match=unpicklable):
        pool.run(lambda: lock.locked())

    def uses_lock() -> bool:
        return lock.locked()

    with pytest.raises(PayloadError, match="uses_lock"):
        pool.run(uses_lock)
    with pytest.raises(RankError, match="returned a lock that cannot be sent back"):
        pool.execute("import threading\nthreading.Lock()")
    with pytest.raises(RankError, match="NameError: name 'nothing_here' is not defined on rank 0"):
        pool.pull("nothing_here")
    with pytest.raises(SyntaxError):
        pool.execute("def broken(:")
    with pytest.raises(ValueError, match="rank 5 is not one of this pool's ranks 0..1"):
        pool.call(int, show=[5])
    assert pool.run(all_reduce_sum, 0) == [1.0, 1.0]


def test_a_large_captured_array_is_refused_naming_it() -> None:
    weights = np.ones(300_000)  # 2.4 MB

    def train() -> float:
        return float(weights.sum())

    with RankPool(2, devices="cpu", max_payload_bytes=1_000_000) as small:
        with pytest.raises(PayloadError, match=r"train and what it captures pickle to 2\.4 MB, over the 1\.0 MB limit"):
            small.run(train)
        with pytest.raises(PayloadError, match=r"the largest: weights \(a closure variable, 2\.4 MB\); build weights"):
            small.run(train)
        with pytest.raises(PayloadError, match=r"argument 0 \(an argument, 2\.4 MB\)"):
            small.run(np.sum, weights)
        assert small.status().state == "stopped"  # nothing was started for a refused call
