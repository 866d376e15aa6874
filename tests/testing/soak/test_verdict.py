"""uc_jupyter.testing.soak.verdict: each check judged on made-up records, including the ones that
must fail (a sample missing, one twice, a corrupted one, memory that grew)."""

from __future__ import annotations

from uc_jupyter.testing.soak.verdict import (
    Check,
    EpochTally,
    epochs_exactly_once,
    memory_flat,
    no_corrupted_sample,
    table,
    tally,
)

FILES = [b"f0", b"f1", b"f2"]
ROWS = [b"p0", b"p1"]  # by row id


def test_an_epoch_with_every_sample_once_is_clean() -> None:
    assert tally([b"f2", b"f0", b"f1"], [1, 0], [b"p1", b"p0"], FILES, ROWS) == EpochTally(5, 0, 0, 0)


def test_a_sample_missing_twice_or_corrupted_is_counted() -> None:
    assert tally([b"f0", b"f0", b"f1"], [0, 1], [b"p0", b"p1"], FILES, ROWS) == EpochTally(5, 1, 1, 0)
    assert tally([b"f0", b"f1", b"zz"], [0], [b"p0"], FILES, ROWS) == EpochTally(4, 2, 0, 1)
    assert tally([b"f0", b"f1", b"f2"], [0, 1], [b"p0", b"p0"], FILES, ROWS) == EpochTally(5, 0, 0, 1)
    assert tally([b"f0", b"f1", b"f2"], [0, 1, 7], [b"p0", b"p1", b"p7"], FILES, ROWS) == EpochTally(6, 0, 0, 1)


def test_exactly_once_holds_only_when_every_epoch_finished_clean() -> None:
    clean = EpochTally(5, 0, 0, 0)
    assert epochs_exactly_once({0: clean, 1: clean}, epochs=2, samples=5) == Check(
        "every epoch exactly once", True, "2/2 epochs x 5 samples"
    )
    missing = epochs_exactly_once({0: clean}, epochs=2, samples=5)
    assert not missing.held and missing.numbers == "epoch 2: not finished"
    twice = epochs_exactly_once({0: clean, 1: EpochTally(6, 0, 1, 0)}, epochs=2, samples=5)
    assert not twice.held and twice.numbers == "epoch 2: 0 missing, 1 more than once"


def test_no_corrupted_sample_needs_samples_and_no_bad_one() -> None:
    assert no_corrupted_sample({0: EpochTally(5, 0, 0, 0)}).held
    assert not no_corrupted_sample({0: EpochTally(5, 1, 0, 1)}).held
    assert not no_corrupted_sample({}).held  # nothing checked holds nothing


def test_memory_flat_compares_each_process_with_its_own_baseline() -> None:
    held = memory_flat(
        {"driver": {2: 100 << 20, 20: 109 << 20}, "rank 0": {2: 100 << 20, 20: 92 << 20}}, baseline=2, last=20
    )
    assert held.held
    assert held.numbers == "driver 100->109 MiB (+9.0%), rank 0 100->92 MiB (-8.0%)"
    grew = memory_flat({"driver": {2: 100 << 20, 20: 111 << 20}}, baseline=2, last=20)
    assert not grew.held
    assert not memory_flat({"rank 1": {2: 100}}, baseline=2, last=20).held  # not measured at the end


def test_the_table_says_no_in_capitals_where_a_check_did_not_hold() -> None:
    lines = table([Check("a", True, "1"), Check("longer name", False, "2")]).splitlines()
    assert lines == [
        "check        held  numbers",
        "-----------  ----  -------",
        "a            yes   1",
        "longer name  NO    2",
    ]
