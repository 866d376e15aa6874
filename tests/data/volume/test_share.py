"""Each stream's share of the cache budget (uc_jupyter.data.volume.share): how far ahead of its
consumer a stream may pin, the refusal of a batch no share can hold, and who gets a share at all."""

from __future__ import annotations

import multiprocessing

import pytest

from uc_jupyter.data.cache import CacheBudgetError
from uc_jupyter.data.stream.grid import ranks_on_this_node
from uc_jupyter.data.stream.loop_progress import UNKNOWN, Progress
from uc_jupyter.data.volume.share import Share, stream_share


def share_over(sizes: list[int], *, batch: int, share: int, moved: list[int]) -> Share:
    return Share(sizes, batch_size=batch, share_bytes=share, first_in_use=lambda: moved[0])


def test_a_stream_pins_up_to_its_share_from_the_first_file_in_use() -> None:
    moved = [0]
    share = share_over([100, 300, 200, 100, 400, 100], batch=2, share=700, moved=moved)
    assert share.end(0, 6) == 4  # 100 + 300 + 200 + 100 = 700 fits; 400 more does not
    assert share.end(4, 6) == 4  # pinned up to its share: wait for the consumer
    moved[0] = 2  # the consumer moved past the first batch (files 0 and 1)
    assert share.end(4, 6) == 5  # 200 + 100 + 400 = 700
    assert share.end(0, 3) == 3  # never past what was asked about


def test_a_consumer_on_another_pass_leaves_the_stream_unbounded() -> None:
    share = share_over([500] * 4, batch=1, share=500, moved=[2**62])
    assert share.end(1, 4) == 4


def test_a_batch_larger_than_the_share_is_refused_with_the_numbers() -> None:
    share = share_over([400, 700, 100], batch=2, share=1000, moved=[0])
    with pytest.raises(CacheBudgetError) as raised:
        share.end(0, 3)
    message = str(raised.value)
    assert "\n" not in message
    assert "a batch of 2 files needs 1,100 bytes" in message and "share of the cache budget (1,000 bytes" in message


def test_a_listing_that_grows_is_read_only_as_far_as_asked() -> None:
    sizes = [10, 10]
    share = share_over(sizes, batch=1, share=25, moved=[0])
    assert share.end(0, 2) == 2
    sizes += [10, 10]  # more arrived
    assert share.end(2, 4) == 2  # 10 + 10 + 10 would pass 25 from file 0
    assert share.end(0, 4) == 2


def test_only_streams_of_a_loader_in_other_processes_that_hold_their_files_get_a_share(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    fork = multiprocessing.get_context("fork")
    workers = Progress(workers=3, batch_size=4, shared=fork, prefetch_factor=2).consumer(1)
    assert stream_share(9_000, workers, holds=True, listed_bytes=None) == 3_000
    assert stream_share(9_000, workers, holds=False, listed_bytes=None) is None  # a transform lets go
    assert stream_share(9_000, workers, holds=True, listed_bytes=3_000) is None  # a share holds it all
    assert stream_share(9_000, Progress(workers=0, batch_size=4).consumer(0), holds=True, listed_bytes=None) is None
    assert stream_share(9_000, UNKNOWN, holds=True, listed_bytes=None) is None
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "3")  # three ranks on this machine share its cache
    assert ranks_on_this_node() == 3
    assert stream_share(9_000, workers, holds=True, listed_bytes=None) == 1_000
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "many")
    assert ranks_on_this_node() == 1


def test_an_idle_stream_at_the_end_of_its_share_waits_for_the_consumer_letting_go_meanwhile() -> None:
    moved = [0]
    share = share_over([500] * 6, batch=2, share=1000, moved=moved)
    asked: list[int] = []

    def let_go(size: int) -> None:  # what the stream's hand-out stage releases while it waits
        asked.append(size)
        if len(asked) == 3:
            moved[0] = 2  # the loop moved past the stream's first batch

    assert share.reach(2, 6, idle=False, let_go=let_go) == 2  # files still to hand out: no wait
    assert asked == []
    assert share.reach(2, 6, idle=True, let_go=let_go) == 4
    assert asked == [0, 0, 0]
