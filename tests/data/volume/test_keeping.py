"""The budget the dashboard asks for keeps the data resident under the stream's own rule, and no smaller
budget near it does (uc_jupyter.data.volume.keeping)."""

from __future__ import annotations

import pytest

from uc_jupyter.data.volume.keeping import budget_to_keep, may_keep


@pytest.mark.parametrize(
    ("data", "window"),
    [
        (1_000_000_000, 80_000_000),  # a large pass: its windows are a small share of the budget
        (640_000, 3_000_000),  # a pass smaller than its windows: 40% of the budget stays resident
        (500, 0),
    ],
)
def test_the_budget_asked_for_keeps_the_data_and_a_smaller_one_does_not(data: int, window: int) -> None:
    budget = budget_to_keep(data, window=window)
    assert may_keep(resident=data, window=window, max_bytes=budget, headroom=0.1)
    assert not may_keep(resident=data, window=window, max_bytes=int(budget * 0.98), headroom=0.1)
