"""uc_jupyter.testing.soak.plan: sizes whose counts keep every rank's steps equal, and one fault an
epoch after the memory baseline."""

from __future__ import annotations

import pytest

from uc_jupyter.testing.soak.plan import BASELINE_EPOCH, FAULTS, RANKS, SoakSize, fault_epochs


@pytest.mark.parametrize("name", ["full", "quick", "tiny"])
def test_every_named_size_takes_whole_steps_and_has_room_for_every_fault(name: str) -> None:
    size = SoakSize.named(name)
    assert size.files % (RANKS * size.workers * size.batch_size) == 0
    assert size.rows % (RANKS * size.table_batch) == 0
    assert 0 < size.save_every < size.steps_per_epoch
    assert len(set(fault_epochs(size.epochs).values())) == len(FAULTS)


@pytest.mark.parametrize("epochs", range(BASELINE_EPOCH + len(FAULTS), 41))
def test_the_faults_come_after_the_baseline_one_an_epoch_in_order(epochs: int) -> None:
    at = fault_epochs(epochs)
    assert list(at) == list(FAULTS)
    assert sorted(at.values()) == list(at.values())
    assert min(at.values()) > BASELINE_EPOCH and max(at.values()) <= epochs
    assert len(set(at.values())) == len(FAULTS)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ({"files": 100}, "files=100 must be a positive multiple of 64"),
        ({"rows": 1000}, "rows=1000 must be a positive multiple of 512"),
        ({"epochs": 5}, "epochs=5: the soak needs 6"),
        ({"save_every": 1536}, "save_every=1536 must be below the 1536 steps"),
    ],
)
def test_counts_that_would_pad_a_rank_or_leave_no_room_are_refused(changes: dict[str, int], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        SoakSize().with_(**changes)


def test_an_unknown_size_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match=r"unknown soak size 'huge': use one of \['full', 'quick', 'tiny'\]"):
        SoakSize.named("huge")
