"""Widget tests: a comm that records what widgets send, a settable clock, and recorded Snapshots.

ipywidgets talks to the browser through a comm from ``comm.create_comm``, which the ``comm`` package
documents as the hook to replace (ipykernel does). Here it makes a real ``BaseComm`` subclass whose
``publish_msg`` keeps each message instead of putting it on a kernel's iopub socket, so tests count
exactly what a browser would receive.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import comm
import pytest
from comm.base_comm import BaseComm

import uc_jupyter.widgets.dashboard  # noqa: F401  imported here once: a first import inside a poll thread takes seconds
from uc_jupyter.telemetry.model import MAIN_WORKER, Histogram, Sample, Snapshot


@dataclass
class Sent:
    comm_id: str
    msg_type: str  # comm_open, comm_msg, comm_close
    data: dict[str, Any]
    buffers: list[bytes]


@dataclass
class CommLog:
    messages: list[Sent] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def updates(self, since: int = 0) -> list[Sent]:
        """State updates (what a redraw sends), from message number ``since`` on."""
        with self.lock:
            taken = self.messages[since:]
        return [m for m in taken if m.msg_type == "comm_msg" and m.data.get("method") == "update"]

    def __len__(self) -> int:
        with self.lock:
            return len(self.messages)


class RecordingComm(BaseComm):
    log: CommLog

    def publish_msg(
        self,
        msg_type: str,
        data: dict[str, Any] | None = None,
        metadata: dict[str, Any] | None = None,
        buffers: list[bytes] | None = None,
        **keys: Any,
    ) -> None:
        with self.log.lock:
            self.log.messages.append(Sent(self.comm_id, msg_type, dict(data or {}), list(buffers or [])))


@pytest.fixture
def comms(monkeypatch: pytest.MonkeyPatch) -> CommLog:
    """Every widget made during the test sends through a RecordingComm into the returned log."""
    log = CommLog()
    recording = type("RecordingCommForTest", (RecordingComm,), {"log": log})
    monkeypatch.setattr(comm, "create_comm", recording)
    return log


# ------------------------------------------------------------------ recorded snapshots


def loop(rank: int, t: float, fetch: Sequence[float], between: Sequence[float], batch: int = 32) -> Sample:
    """The training loop's cumulative sample after ``len(fetch)`` batches of ``batch`` samples."""
    return Sample(
        rank=rank,
        worker=MAIN_WORKER,
        seq=len(fetch) + 1,
        time=t,
        batches=len(fetch),
        samples=batch * len(fetch),
        fetch=Histogram.of(fetch),
        between=Histogram.of(between),
        started=0.0,
    )


def worker(
    rank: int, index: int, t: float, shard: int, *, used: int = 0, budget: int = 0, evictions: int = 0, hits: int = 0
) -> Sample:
    return Sample(
        rank=rank,
        worker=index,
        seq=1,
        time=t,
        shard_size=shard,
        hits=hits,
        misses=10,
        cache_used_bytes=used,
        cache_max_bytes=budget,
        cache_evictions=evictions,
    )


def snapshot(t: float, *samples: Sample) -> Snapshot:
    return Snapshot({s.producer: s for s in samples}, time=t)


def recorded_run(
    seconds: float = 3.0, per_second: int = 20, shards: Sequence[Sequence[int]] = ((50, 50),)
) -> list[Snapshot]:
    """A run as a Collector would have seen it, one snapshot every ``1 / per_second`` s: two batches
    per snapshot whose fetch time grows (the loop turns input-bound), a filling cache, fixed shards."""
    run = []
    fetch: list[float] = []
    between: list[float] = []
    for step in range(int(seconds * per_second)):
        t = step / per_second  # exact multiples, so throttle boundaries are unambiguous
        for _ in range(2):
            fetch.append(0.0005 + 0.0005 * step)
            between.append(0.01)
        workers = [
            worker(rank, w, t, size, used=1_000_000 * (step + 1), budget=100_000_000, evictions=step // 10, hits=step)
            for rank, sizes in enumerate(shards)
            for w, size in enumerate(sizes)
        ]
        loops = [loop(rank, t, fetch, between[1:]) for rank in range(len(shards))]
        run.append(snapshot(t, *loops, *workers))
    return run
