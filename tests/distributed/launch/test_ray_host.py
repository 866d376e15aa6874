"""uc_jupyter.distributed.launch.ray_host, in this process (no cluster: the actor's class is a plain class
until Ray runs it): a rank started by the host, its messages relayed in order and its end after its
last word, stop, and the logs of hosts that are gone removed without following a planted link."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests.distributed.conftest import one_rank
from uc_jupyter.distributed.launch.ray_host import RankHost, Relayed, versions
from uc_jupyter.distributed.payload import unpack
from uc_jupyter.distributed.protocol import Call, Output, Ready, Reply, decode, encode


def plain_host() -> Any:
    """A RankHost run in this process: Ray's typing says its methods are the actor's remote ones."""
    return RankHost()


def said_until(host: Any, last: type, within: float = 60.0) -> list[object]:
    """What the host relayed (decoded), up to and including the first ``last``."""
    said: list[object] = []
    while not said or not isinstance(said[-1], last):
        taken = host.take(wait=within)
        assert taken, f"the host relayed nothing within {within} s; so far: {said}"
        for rank, item in taken:
            assert rank == 0
            said.append(item if isinstance(item, Relayed) else decode(item))
    return said


def test_a_ranks_words_come_in_order_and_its_end_after_its_last_word() -> None:
    ours = f"uc-jupyter-node-ranks-{os.getpid()}-*"
    before = set(Path(tempfile.gettempdir()).glob(ours))
    host = plain_host()
    (logs,) = set(Path(tempfile.gettempdir()).glob(ours)) - before  # the host's rank logs
    pids = host.start({0: one_rank()})
    assert list(pids) == [0] and pids[0] > 0
    started = said_until(host, Ready)
    assert isinstance(started[-1], Ready) and started[-1].backend == "gloo" and started[-1].device == "cpu"

    source = "print('from rank', rank)\nrank + 41"
    assert host.send(0, encode(Call(call_id=1, kind="execute", payload=encode(source), principal="alice")))
    answered = said_until(host, Reply)
    reply = answered[-1]
    assert isinstance(reply, Reply) and reply.call_id == 1 and reply.failure is None
    assert reply.value is not None and unpack(reply.value) == 41
    printed = "".join(m.text for m in answered if isinstance(m, Output) and m.stream == "stdout")
    assert printed == "from rank 0\n"  # the rank's output arrives before its reply

    host.stop(timeout=10.0)
    ended = said_until(host, Relayed, within=15.0)
    assert ended[-1] == Relayed(0)  # the rank left on Stop, cleanly
    assert not logs.exists()
    assert host.send(0, b"late") is False  # its channel is closed: said, not raised


def test_a_rank_the_host_did_not_start_is_named() -> None:
    host = plain_host()
    try:
        with pytest.raises(RuntimeError, match="^this node's host has not started rank 7$"):
            host.send(7, encode("hello"))
        assert host.log_tail(7) == ""
        assert host.take(wait=0.01) == []  # nothing said: an empty take, after the wait
    finally:
        host.stop(timeout=1.0)


def test_logs_of_hosts_that_are_gone_go_and_nothing_else_does(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    temporary = Path(tempfile.gettempdir())
    dead = Path(tempfile.mkdtemp(prefix=f"uc-jupyter-node-ranks-{gone.pid}-", dir=temporary))
    (dead / "rank-0.log").write_text("old")
    live = Path(tempfile.mkdtemp(prefix=f"uc-jupyter-node-ranks-{os.getpid()}-", dir=temporary))
    victim = tmp_path / "precious"
    victim.mkdir()
    (victim / "data").write_text("keep")
    planted = temporary / f"uc-jupyter-node-ranks-{gone.pid}-planted"
    planted.symlink_to(victim)  # looks like a dead host's logs; removing it must not follow it
    host = None
    try:
        host = plain_host()
        assert not dead.exists()
        assert live.exists()  # a host that still runs keeps its logs
        assert (victim / "data").read_text() == "keep"
    finally:
        if host is not None:
            host.stop(timeout=1.0)
        planted.unlink(missing_ok=True)
        for folder in (dead, live):
            subprocess.run(["rm", "-rf", str(folder)], check=True)


def test_versions_are_those_a_rank_must_share_with_the_kernel() -> None:
    import torch

    found = versions()
    assert found == {
        "Python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "torch": importlib.metadata.version("torch"),
        "uc_jupyter": importlib.metadata.version("uc_jupyter"),
    }
    assert found["torch"].split("+")[0] == torch.__version__.split("+")[0]
