"""Whether a cache budget can hold the files a loader needs at once (uc_jupyter.data.volume.files_at_once):
refused in one line with the numbers only when even the smallest files cannot fit; pure, no cache."""

from __future__ import annotations

import pytest

from uc_jupyter.data.cache import CacheBudgetError
from uc_jupyter.data.volume.files_at_once import check_files_at_once

NEED = (3, "a batch in each worker and the loop's: batch_size 1 x (2 workers + 1)")
MOST = (5, "batch_size 1 x (2 workers x prefetch_factor 2 + 1)")


def test_a_budget_for_fewer_files_than_the_loader_needs_is_refused_with_the_numbers() -> None:
    with pytest.raises(CacheBudgetError) as caught:
        check_files_at_once(1500, [1000] * 12, NEED, MOST, listed_all=True, where="/Volumes/main/ml/v")
    assert str(caught.value) == (
        "/Volumes/main/ml/v: cache_max_bytes 1,500 bytes holds 1 of its files, but this loader needs room for 3 "
        "at once (a batch in each worker and the loop's: batch_size 1 x (2 workers + 1)) and holds up to 5 "
        "(batch_size 1 x (2 workers x prefetch_factor 2 + 1)), and a file stays in the cache while its batch is "
        "in use; raise cache_max_bytes to at least 5,000 bytes, or lower batch_size, num_workers or "
        "prefetch_factor (or give a transform: a file is let go once its item is made)"
    )


def test_only_a_budget_that_even_the_smallest_files_overflow_is_refused() -> None:
    sizes = [100, 5000, 200, 300, 4000, 400, 6000]
    need = (4, "four")
    check_files_at_once(1000, sizes, need, need, listed_all=True, where="/Volumes/v")  # 100+200+300+400 fit
    with pytest.raises(
        CacheBudgetError, match=r"holds 3 of its files, .* room for 4 at once \(four\), .* 15,400 bytes"
    ):
        check_files_at_once(999, sizes, need, need, listed_all=True, where="/Volumes/v")  # advice: the largest 4


def test_a_listing_smaller_than_what_the_loader_needs_needs_room_for_all_of_it_only() -> None:
    check_files_at_once(2000, [1000] * 2, NEED, MOST, listed_all=True, where="/Volumes/v")
    with pytest.raises(CacheBudgetError, match=r"room for 2 at once .*, and a file stays"):
        check_files_at_once(1999, [1000] * 2, NEED, MOST, listed_all=True, where="/Volumes/v")


def test_a_listing_still_arriving_is_judged_only_once_it_has_as_many_files_as_the_loader_needs() -> None:
    check_files_at_once(1500, [1000] * 2, NEED, MOST, listed_all=False, where="/Volumes/v")  # more may come
    with pytest.raises(CacheBudgetError):
        check_files_at_once(1500, [1000] * 3, NEED, MOST, listed_all=False, where="/Volumes/v")
