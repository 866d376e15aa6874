"""A volume folder's listing while it arrives, so that an unshuffled pass starts on its first page.

An object store lists a folder a page at a time; 20,000 files take a few tenths of a second even
with sub-folders listed at once, 1.3 million (ImageNet) several seconds. An unshuffled pass reads
the files in the listing's order, so its first files are known from the first page on: the
dataset is made once the first file is listed (errors, such as a missing folder, still come from
the constructor), and its streams fetch while the listing goes on. A shuffled pass draws one
permutation of the whole listing, the same on every rank, so it waits for the end (the listing's
sub-folders are listed at once to keep that wait short; see ``data/storage/tree.py``).

The listing runs on a thread of the process that made the dataset. DataLoader workers forked
while it runs cannot see that thread's later work, so each page is also appended to a spool: an
unlinked temporary file whose descriptor forked workers inherit (frames of a length and a pickle,
written with ``pwrite`` at the end and read with ``pread``: no shared file offset). A worker reads
the spool from its start and waits on it for files not yet listed. Pickled (a spawned worker, a
rank), a growing listing waits for its end and travels whole.

The order is the store's own, which for S3, GCS and Azure is key order: the same as a listing
sorted after the fact, so a streamed listing and a whole one agree file by file.

Example:
    >>> pages = storage.pages(recursive=True)                                       # doctest: +SKIP
    >>> growing = GrowingListing(pages, wanted, where="/Volumes/c/s/v/x", url=url)  # doctest: +SKIP
    >>> growing.wait_for(1), growing.files[0].relative                              # doctest: +SKIP
    (1000, 'part-00/img-000000.png')
    >>> growing.final().digest                                                      # doctest: +SKIP
    '3f0c9a2e51b7d8e4'
"""

from __future__ import annotations

import contextlib
import os
import pickle
import struct
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from uc_jupyter.data.volume.listing import Listing, ListingDigest, RemoteFile, kept_files
from uc_jupyter.storage.errors import picklable
from uc_jupyter.storage.pages import Page

__all__ = ["GrowingListing"]

_HEADER = struct.Struct("<Q")  # a frame's payload length
_POLL_SECONDS = 0.002  # how often a forked worker looks for files not yet in the spool


class GrowingListing:
    """The files of a folder listed so far (``files``), and the whole :class:`Listing` at its end."""

    def __init__(self, pages: Iterator[Page], wanted: Callable[[str], bool], *, where: str, url: str) -> None:
        self.where, self.url = where, url
        self.files: list[RemoteFile] = []
        # Unlinked at once: gone with its last descriptor (this process's and its forked workers').
        self._spool = tempfile.TemporaryFile(prefix="uc-jupyter-listing-")  # noqa: SIM115
        self._owner = os.getpid()
        self._written = 0  # spool bytes written (the owner) or read (a forked worker)
        self._final: Listing | None = None
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._list, args=(pages, wanted), name="uc-jupyter-listing", daemon=True)
        self._thread.start()

    # ---------------------------------------------------------------- reading
    def total(self) -> int | None:
        """How many files the whole listing has, or None while it is still arriving (or failed)."""
        self._catch_up()
        return len(self.files) if self._final is not None else None

    def known(self) -> int:
        """How many files are listed now, without waiting."""
        self._catch_up()
        return len(self.files)

    def wait_for(self, count: int) -> int:
        """Wait until ``count`` files are listed or the listing has ended; how many are listed.

        Raises:
            the listing's own error (a missing folder, refused credentials), once the files listed
            before it are all taken.
        """
        while True:
            self._catch_up()
            if len(self.files) >= count or self._final is not None:
                return len(self.files)
            if self._error is not None:
                raise self._error
            if os.getpid() == self._owner:
                with self._changed:
                    if len(self.files) < count and self._final is None and self._error is None:
                        self._changed.wait(timeout=1.0)
            else:
                time.sleep(_POLL_SECONDS)  # a forked worker: the listing thread is in its parent

    def first(self, what: str = "files") -> GrowingListing:
        """This listing once its first file is listed; its error (a missing folder, refused
        credentials), or a folder with nothing to read (``what`` names what was looked for),
        raised here as a whole listing raises them."""
        if self.wait_for(1) == 0:
            raise ValueError(f"{self.where} holds no {what} to read")
        return self

    def final(self) -> Listing:
        """The whole listing, once it has ended (waits for it)."""
        while self._final is None:
            self.wait_for(len(self.files) + 1)
        return self._final

    def __getstate__(self) -> dict[str, Any]:
        raise TypeError("a listing still arriving does not travel: pickle the dataset, which waits for its end")

    # ---------------------------------------------------------------- the listing thread (the owner)
    def _list(self, pages: Iterator[Page], wanted: Callable[[str], bool]) -> None:
        digest = ListingDigest()
        visible = 0
        last = ""
        try:
            for page in pages:
                files, shown = kept_files(page.files, wanted)
                visible += shown
                last = _in_key_order(self.where, files, last)
                digest.add(files)
                self._append(("files", [(f.relative, f.size, f.version) for f in files]))
                with self._changed:
                    self.files.extend(files)
                    self._changed.notify_all()
            skipped = visible - len(self.files)
            self._append(("end", (digest.value(), skipped)))
            final = Listing(self.where, self.url, tuple(self.files), digest.value(), skipped=skipped)
            with self._changed:
                self._final = final
                self._changed.notify_all()
        except BaseException as exc:  # the readers raise it; this thread only ends
            # This process's readers first: the spool itself may be what failed (a full disk).
            with self._changed:
                self._error = exc
                self._changed.notify_all()
            with contextlib.suppress(Exception):
                self._append(("error", picklable(exc)))
        finally:
            # Workers forked before this hold their own descriptor; those forked later inherit the end.
            self._spool.close()

    def _append(self, frame: tuple[str, Any]) -> None:
        payload = pickle.dumps(frame, protocol=pickle.HIGHEST_PROTOCOL)
        data = memoryview(_HEADER.pack(len(payload)) + payload)
        fd = self._spool.fileno()
        while data:  # a short write (a nearly full disk) goes on where it stopped, or raises
            written = os.pwrite(fd, data, self._written)
            self._written += written
            data = data[written:]

    # ---------------------------------------------------------------- a forked worker
    def _catch_up(self) -> None:
        """In a process forked from the owner: take the frames the spool holds beyond those read."""
        if os.getpid() == self._owner or self._final is not None or self._error is not None:
            return
        if getattr(self, "_reader", None) != os.getpid():
            # What the parent's thread had appended when this process was forked may be ahead of
            # or behind its spool: read the spool from its start.
            self._reader, self._written = os.getpid(), 0
            del self.files[:]  # the same list: what was handed out (the streams' files) sees the refill
            self._changed = threading.Condition()
        fd = self._spool.fileno()
        while True:
            header = os.pread(fd, _HEADER.size, self._written)
            if len(header) < _HEADER.size:
                return
            (length,) = _HEADER.unpack(header)
            payload = os.pread(fd, length, self._written + _HEADER.size)
            if len(payload) < length:
                return  # still being written
            self._written += _HEADER.size + length
            kind, value = pickle.loads(payload)
            if kind == "files":
                self.files.extend(RemoteFile(relative, size, version) for relative, size, version in value)
            elif kind == "end":
                digest, skipped = value
                self._final = Listing(self.where, self.url, tuple(self.files), digest, skipped=skipped)
                self._spool.close()  # this process's copy: nothing more to read
                return
            else:
                self._error = value
                self._spool.close()
                return


def _in_key_order(where: str, files: list[RemoteFile], last: str) -> str:
    """Check that ``files`` come after ``last`` and after each other (a pass already reads them in
    this order); the last path. A store that lists out of key order (S3 Express directory buckets)
    ends the listing with a line saying what to do."""
    for file in files:
        if file.relative <= last:
            raise OSError(
                f"cannot list {where} in order: the store listed {file.relative!r} after {last!r}; "
                "make the dataset with shuffle=True, which waits for the whole listing"
            )
        last = file.relative
    return last
