"""A local volume's pass read where its files lie: each file checked as it is handed out.

A local (``file://``) volume read in place (``cache="auto"``) skips the cache: its stages are select
(the files at the stream's positions) -> check (:meth:`~uc_jupyter.storage.local_volume.LocalVolume.check`:
a regular file of the listed size, no symbolic link on its way from the volume's root) -> decode
(:class:`~uc_jupyter.data.volume.decode.Decoding`). A decoder that reads open files reads through the
descriptor the check opened, never by path, so a symlink swapped in after the check is never read;
a path handed out is checked when it is handed out, and a consumer that opens it later reads
whatever is there then (``cache="always"`` rules that out).

Example:
    >>> decoding = Decoding(None, where, {})                                                # doctest: +SKIP
    >>> items = read_in_place(listing.files, [0, 1], volume, root, decoding, count, stages) # doctest: +SKIP
    >>> next(items)                                                                         # doctest: +SKIP
    '/data/volumes/images/a.png'
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

from uc_jupyter.data.stream.stages import StageTimes
from uc_jupyter.data.volume.decode import Decoding
from uc_jupyter.data.volume.handed_out import Count
from uc_jupyter.data.volume.listing import RemoteFile
from uc_jupyter.storage.local_volume import LocalVolume
from uc_jupyter.telemetry import producer

__all__ = ["read_in_place"]


def read_in_place(
    files: Sequence[RemoteFile],
    positions: Sequence[int],
    volume: LocalVolume,
    root: str,
    decoding: Decoding,
    count: Count,
    stages: StageTimes,
) -> Iterator[Any]:
    """Yield the item of each of ``files`` at ``positions``, checked in ``volume`` (whose folder's
    local path is ``root``) as it is yielded; ``count(size, downloaded, resident)`` each, and the
    seconds of the check (the fetch stage) and of the decode added to ``stages``."""
    check, open_checked = volume.check, volume.open
    through_descriptor = decoding.reads_files
    clock = time.perf_counter
    for index in positions:
        remote = files[index]
        began = clock()
        if through_descriptor:
            with open(open_checked(remote.relative, remote.size), "rb") as handle:
                checked = clock()
                item = decoding.read(handle, remote.relative)
        else:
            check(remote.relative, remote.size)
            checked = clock()
            item = decoding(f"{root}/{remote.relative}", remote.relative)
        decoded = clock()
        stages.fetch += checked - began
        stages.decode += decoded - checked
        count(remote.size, False, True)
        yield item
    producer.notify(final=True)
