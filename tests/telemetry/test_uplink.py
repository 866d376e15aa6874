"""uc_jupyter.telemetry.uplink: a rank's loader samples sent on to its kernel, when a sender is installed."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from uc_jupyter.telemetry.model import Sample
from uc_jupyter.telemetry.uplink import forward, install, installed


@pytest.fixture(autouse=True)
def no_sender_after() -> Iterator[None]:
    """Each test starts and ends with no sender installed (the module keeps one per process)."""
    install(None)
    yield
    install(None)


def samples(n: int) -> list[Sample]:
    return [Sample(rank=1, worker=w, seq=w + 1, time=float(w)) for w in range(n)]


def test_outside_a_rank_pool_nothing_is_installed_and_forward_consumes_nothing() -> None:
    assert not installed()
    pending = iter(samples(2))
    forward(pending)
    assert len(list(pending)) == 2  # the iterable was not even read


def test_forward_sends_the_samples_as_one_tuple_in_their_order() -> None:
    got: list[tuple[Sample, ...]] = []
    install(got.append)
    assert installed()
    batch = samples(3)
    forward(batch)
    forward(s for s in batch[:1])  # a generator (a collector's dict values, say) arrives whole too
    assert got == [tuple(batch), (batch[0],)]
    assert all(type(sent) is tuple for sent in got)


def test_the_sender_gets_a_copy_that_later_changes_of_the_list_do_not_reach() -> None:
    got: list[tuple[Sample, ...]] = []
    install(got.append)
    batch = samples(2)
    forward(batch)
    batch.clear()
    assert len(got[0]) == 2


def test_a_failing_sender_never_disturbs_the_training_loop() -> None:
    calls: list[int] = []

    def gone(sent: tuple[Sample, ...]) -> None:
        calls.append(len(sent))
        raise BrokenPipeError("the kernel went away")

    install(gone)
    forward(samples(2))  # no exception reaches the DataLoader
    forward(samples(1))
    assert calls == [2, 1]  # and it keeps trying: the rank's watchdog, not forward, ends the process


def test_installing_none_stops_forwarding() -> None:
    got: list[tuple[Sample, ...]] = []
    install(got.append)
    install(None)
    assert not installed()
    forward(samples(1))
    assert got == []
