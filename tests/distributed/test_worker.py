"""uc_jupyter.distributed._worker, the rank's entry point, driven over its channel as a pool drives it
(one rank, no pool): cells and their values, names kept between calls, each call acting as its own
principal, and the failures that answer a call while the rank keeps serving."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.distributed.conftest import KEPT_RANKS, one_rank, with_supervisors
from uc_jupyter.distributed.launch.local import RankProcess, start_rank_process
from uc_jupyter.distributed.payload import pack, source_map, unpack
from uc_jupyter.distributed.protocol import Call, CallKind, Output, Ready, Reply, Stop


class Rank:
    """One rank and what it said, read by a thread so that every wait here has a limit."""

    def __init__(self, process: RankProcess) -> None:
        self.process = process
        self.said: queue.Queue[object] = queue.Queue()
        self.ids = iter(range(1, 1_000))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while True:
            try:
                self.said.put(self.process.channel.recv())
            except (EOFError, OSError):
                self.said.put(None)
                return

    def next_said(self) -> object:
        return self.said.get(timeout=60)

    def call(self, kind: CallKind, payload: object, principal: str = "alice") -> tuple[Reply, str]:
        """The reply to one call, and what the rank printed to stdout on the way."""
        call_id = next(self.ids)
        self.process.send(Call(call_id=call_id, kind=kind, payload=pack(payload), principal=principal))
        printed = ""
        while True:
            message = self.next_said()
            if isinstance(message, Output) and message.stream == "stdout":
                printed += message.text
            if isinstance(message, Reply):
                assert message.call_id == call_id
                return message, printed

    def value(self, kind: CallKind, payload: object, principal: str = "alice") -> object:
        reply, _ = self.call(kind, payload, principal)
        assert reply.failure is None, reply.failure
        assert reply.value is not None
        return unpack(reply.value)


@pytest.fixture(scope="module")
def rank(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rank]:
    logs: Path = tmp_path_factory.mktemp("rank-logs")
    started = Rank(start_rank_process(0, one_rank(principal="admin"), logs))
    kept: set[int] = set()
    try:
        while not isinstance(message := started.next_said(), Ready):
            assert message is not None, started.process.log_tail()
        assert (message.rank, message.device, message.backend) == (0, "cpu", "gloo")
        kept = with_supervisors({message.pid})
        KEPT_RANKS.update(kept)
        yield started
    finally:
        KEPT_RANKS.difference_update(kept)
        started.process.send(Stop())
        try:
            assert started.process.process.wait(30) == 0  # Stop: the rank leaves cleanly
        finally:
            started.process.terminate()
            started.process.end(5.0)
            started.process.channel.close()


def test_a_cell_answers_its_last_expression_after_its_output(rank: Rank) -> None:
    reply, printed = rank.call("execute", "print('rank', rank, 'of', world_size)\nrank * 10 + 7")
    assert reply.failure is None and reply.value is not None and unpack(reply.value) == 7
    assert printed == "rank 0 of 1\n"
    assert rank.value("execute", "x = 1") is None  # no final expression, no value


def test_names_stay_between_calls_pushed_pulled_and_run(rank: Rank) -> None:
    assert rank.value("push", {"base": 40}) is None
    assert rank.value("execute", "answer = base + 2") is None
    assert rank.value("pull", ("answer", "base")) == [42, 40]
    assert rank.value("run", (divmod, (17, 5), {}, source_map(divmod))) == (3, 2)


def test_each_call_acts_as_its_own_principal_in_its_thread_and_its_children(rank: Rank) -> None:
    cell = (
        "import os, threading\n"
        "from uc_jupyter.catalog import current_principal\n"
        "seen = []\n"
        "t = threading.Thread(target=lambda: seen.append(os.environ['UC_JUPYTER_PRINCIPAL']))\n"
        "t.start(); t.join()\n"
        "(current_principal(), seen[0])"
    )
    assert rank.value("execute", cell, principal="alice") == ("alice", "alice")
    assert rank.value("execute", cell, principal="bob") == ("bob", "bob")  # never the earlier caller


@pytest.mark.parametrize("principal", ["", "alice\nadmin", " admin", "a" * 256])
def test_a_call_with_a_malformed_principal_is_refused_and_the_rank_keeps_serving(rank: Rank, principal: str) -> None:
    reply, printed = rank.call("execute", "print('ran'); 1", principal=principal)
    assert reply.value is None and reply.failure is not None and printed == ""  # nothing ran
    assert reply.failure.short_type == "ValueError"
    assert rank.value("execute", "2") == 2


def test_failures_answer_the_call_naming_the_rank_and_the_rank_keeps_serving(rank: Rank) -> None:
    reply, _ = rank.call("pull", ("never_defined",))
    assert reply.failure is not None and reply.failure.message == "name 'never_defined' is not defined on rank 0"
    reply, _ = rank.call("execute", "(i for i in range(3))")
    assert reply.failure is not None and reply.failure.short_type == "TypeError"
    assert reply.failure.message.startswith("rank 0 returned a generator that cannot be sent back")
    reply, _ = rank.call("execute", "1 / 0")
    assert reply.failure is not None and reply.failure.short_type == "ZeroDivisionError"
    assert reply.failure.rank == 0 and "<rank cell" in reply.failure.traceback
    reply, _ = rank.call("run", (divmod, (17, 5)))  # not the (function, args, kwargs, sources) a pool sends
    assert reply.failure is not None and reply.failure.short_type == "ValueError"
    reply, _ = rank.call("launch", "x")  # type: ignore[arg-type]  # no such kind
    assert reply.failure is not None and reply.failure.message == "unknown call kind 'launch'"
    assert rank.value("execute", "3") == 3
