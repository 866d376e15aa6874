"""A mix source's view of the consumer of the mix's stream: which of the files it handed out the loop may still use.

A mix stream hands out samples at places 0, 1, 2 ... of its pass; a source's ``k``-th sample of the
pass is the stream's sample at ``places[k]``. The loop's consumer says the first place it may still
use (:mod:`uc_jupyter.data.stream.loop_progress`); the source may release every one of its samples
before it. Without this view a source would be taken to be done with a file once it fetched its
next one, and a file streamed past a full cache was deleted while its batch was still to come.

Example:
    >>> from uc_jupyter.data.stream.loop_progress import Progress
    >>> progress = Progress(workers=0, batch_size=2)
    >>> progress.new_pass()
    >>> part = PartConsumer(progress.consumer(0), np.array([1, 2, 5]))  # the source's samples sit at 1, 2, 5
    >>> first_in_use = part.start()
    >>> first_in_use()  # the loop holds places 0-1: the source's first sample is in use
    0
    >>> progress.moved_past(0)  # places 2-3 now: its first is done with
    >>> first_in_use()
    1
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from uc_jupyter.data.stream.loop_progress import Consumer
from uc_jupyter.data.stream.stages import StageTimes

__all__ = ["PartConsumer"]


class PartConsumer:
    """``whole``'s view for a source whose samples sit at ``places`` (ascending) of the mix's pass,
    its stages' seconds added to ``stages`` (``whole``'s when it takes them per batch)."""

    def __init__(self, whole: Consumer, places: npt.NDArray[np.int64], stages: StageTimes | None = None) -> None:
        self._whole, self._places = whole, places
        self._stages = whole.stages if stages is None else stages

    @property
    def exact(self) -> bool:
        return self._whole.exact

    @property
    def batch_size(self) -> int:
        # The answer may change at any of the source's samples (a batch of the mix holds any number of them).
        return 1 if self._whole.exact else 0

    @property
    def in_use(self) -> int:
        return self._whole.in_use

    @property
    def streams(self) -> int:
        return self._whole.streams

    @property
    def elsewhere(self) -> bool:
        return self._whole.elsewhere

    @property
    def stages(self) -> StageTimes:
        """The mix stream's: a source's fetch and decode seconds reach the loop with the batches, and
        the mix reads each source's share of them where it turns from one source to the next."""
        return self._stages

    def start(self) -> Callable[[], int]:
        first_place, places = self._whole.start(), self._places

        def first_in_use() -> int:
            return int(np.searchsorted(places, first_place()))  # the source's samples before that place

        return first_in_use
