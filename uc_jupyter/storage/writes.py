"""The write seam of a volume folder: files put whole, read back, listed and deleted, by keys below it.

:func:`open_writes` chooses the backend once per folder, as :func:`~uc_jupyter.storage.open_storage`
does for reads:

- ``s3://`` / ``gs://`` / Azure URLs: obstore, with the same options mapping as reads
  (:func:`~uc_jupyter.storage.stores.store_args`) and the same fork rule
  (:func:`~uc_jupyter.storage.objects.fork_safe`): a process forked from one that had made an
  object_store request cannot write through it, and is refused in one line; reads and listings in a
  process that has made none run in a short forked child, so it stays clean for its forked
  DataLoader workers (puts and deletes start object_store in the process). Large files go up as
  multipart uploads, their parts sent at once; the object appears when the upload completes.
- ``file://`` folders: :class:`~uc_jupyter.storage.local_writes.LocalWrites`, an ``openat`` walk
  from the volume root's descriptor that follows no symlink (as
  :class:`~uc_jupyter.storage.local_volume.LocalVolume` reads), so a folder inside the volume swapped for a
  symlink never redirects a write or a delete outside it. Files are written beside their place and
  renamed into it.

Keys are relative to the folder, ``/``-separated: an empty part (``a//b``, a leading or trailing
``/``), ``.``, ``..``, a NUL or a backslash is refused (:func:`checked_key`), so no key names a place
outside the folder on any backend.

Example:
    >>> writes = open_writes(tmp_url, {})                                                # doctest: +SKIP
    >>> writes.put_bytes("step-1/.metadata", b"...")                                     # doctest: +SKIP
    >>> writes.list("step-1")                                                            # doctest: +SKIP
    ['step-1/.metadata']
    >>> checked_key("step-1/__0_0.distcp")
    'step-1/__0_0.distcp'
    >>> checked_key("step-1/../other")
    Traceback (most recent call last):
    ...
    ValueError: invalid key 'step-1/../other': give a path below the folder, without empty, '.' or '..' parts
"""

from __future__ import annotations

import builtins
import contextlib
import gc
import os
import pickle
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO, Protocol, cast

from uc_jupyter.storage import urls as st
from uc_jupyter.storage.config import Unsupported
from uc_jupyter.storage.errors import as_os_error, first_line, picklable, refused_because
from uc_jupyter.storage.keys import Listed, checked_key, checked_prefix
from uc_jupyter.storage.stores import is_object_store, store_args

__all__ = ["VolumeWrites", "open_writes", "staging_folder"]

_PART = 16 << 20  # bytes per part of a multipart upload (S3 asks at least 5 MiB for all but the last)
_PARTS_AT_ONCE = 8  # parts of one file in flight


class VolumeWrites(Protocol):
    """What is written through a volume folder's storage (keys below the folder, see :func:`checked_key`)."""

    url: str
    where: str

    def put_file(self, key: str, local_path: str | os.PathLike[str]) -> None:
        """Copy the local file to ``key``: visible whole once this returns, or not at all."""

    def put_bytes(self, key: str, data: bytes) -> None:
        """Write ``data`` to ``key``: visible whole once this returns, or not at all."""

    def new_file(self, key: str) -> contextlib.AbstractContextManager[BinaryIO]:
        """A file to write ``key`` through, put whole when the block ends without an error and
        dropped otherwise: written beside its place and renamed on file://, staged on local disk
        (:func:`staging_folder`) and uploaded on object storage."""

    def read_bytes(self, key: str) -> bytes:
        """The content of ``key``.

        Raises:
            FileNotFoundError: there is no file ``key``.
        """

    def read_range(self, key: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``key`` from ``offset`` (fewer at its end).

        Raises:
            FileNotFoundError: there is no file ``key``.
        """

    def delete(self, keys: Iterable[str]) -> None:
        """Delete the files ``keys`` (those absent are ignored)."""

    def list(self, prefix: str = "") -> list[str]:
        """The keys of every file below the folder ``prefix`` ("": the whole folder), sorted."""

    def listing(self, prefix: str = "", *, temporaries: bool = False) -> builtins.list[Listed]:
        """:meth:`list` with each file's size and when it was last modified (seconds since the epoch);
        ``temporaries``: with the files still being written beside their place (or left so by a killed
        writer; :data:`~uc_jupyter.storage.keys.TEMPORARY`; only file:// folders have them)."""


def staging_folder() -> str:
    """Where files bound for object storage wait on local disk: ``staging`` in ``UC_JUPYTER_CACHE_DIR``
    (each node's own local disk) when it is set, else in the home (``UC_JUPYTER_HOME``); made if needed.
    What is staged there is held by its process (:mod:`uc_jupyter.storage.staged`), and a dead one's
    is removed by the next export, save, or ``uc-jupyter gc``."""
    from uc_jupyter.config import settings

    given = settings()
    folder = (given.cache_dir or given.home) / "staging"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


def open_writes(
    url: str, options: Mapping[str, Any] | None, *, where: str = "", root: str | None = None, stay_clean: bool = True
) -> VolumeWrites:
    """The writes of the folder at ``url`` with the volume's storage ``options``; ``where`` (its
    /Volumes path) names it in errors. No request is made and nothing is created yet.

    ``root``: for a ``file://`` folder, the volume's own storage URL (``url`` lies below it): the walk
    starts there and follows no symlink on the way down. Without it, the walk starts at ``url``
    itself (a symlink in ``url``'s own path is the caller's to rule out).

    ``stay_clean`` (object storage): reads and listings in a process that has made no object_store
    request run in a short forked child, so it can still fork DataLoader workers that use object_store;
    False: they run here (a process that is about to write anyway, or has threads that forbid a fork).

    Raises:
        ValueError: the options are invalid for object_store, or ``url`` is not below ``root``.
    """
    given = dict(options or {})
    if st.is_local(url):
        from uc_jupyter.storage.local_writes import LocalWrites

        return LocalWrites.below(st.local_path(root or url), st.local_path(url), where=where or url)
    if not is_object_store(url):
        raise ValueError(f"cannot write {where or url}: only s3://, gs://, Azure and file:// volumes take writes")
    try:
        args = store_args(url, given)
    except (Unsupported, ValueError) as why:
        raise ValueError(f"cannot write {where or url}: {why} is not supported for writes; remove it") from None
    return ObjectWrites(args, url, given, where=where or url, stay_clean=stay_clean)


class ObjectWrites:
    """Writes through obstore into the folder ``url`` (one store per process, object_store's retries on)."""

    def __init__(self, args: Any, url: str, options: Mapping[str, Any], *, where: str, stay_clean: bool = True) -> None:
        from uc_jupyter.storage.objects import ObjectStorage

        self.url, self.where, self.stay_clean = url, where, stay_clean
        # The reading side's store maker: the same credentials sources, region discovery and checks.
        self._storage = ObjectStorage(args, url, options, where=where)

    def put_file(self, key: str, local_path: str | os.PathLike[str]) -> None:
        import obstore

        size = os.path.getsize(local_path)
        self._call(
            "write",
            key,
            lambda store: obstore.put(
                store,
                checked_key(key),
                Path(local_path),
                use_multipart=size > _PART,
                chunk_size=_PART,
                max_concurrency=_PARTS_AT_ONCE,
            ),
        )

    def put_bytes(self, key: str, data: bytes) -> None:
        import obstore

        self._call("write", key, lambda store: obstore.put(store, checked_key(key), data, use_multipart=False))

    @contextlib.contextmanager
    def new_file(self, key: str) -> Iterator[BinaryIO]:
        from uc_jupyter.storage.staged import staged_file

        checked_key(key)
        # Locked until it is uploaded and gone: a kill -9 leaves it to the next sweep (storage.staged).
        with staged_file(staging_folder(), "put-") as staged:
            with open(staged, "wb") as out:
                yield cast(BinaryIO, out)
            self.put_file(key, staged)

    def read_bytes(self, key: str) -> bytes:
        import obstore

        checked_key(key)
        return bytes(self._clean("read", key, lambda store: bytes(obstore.get(store, key).bytes())))

    def read_range(self, key: str, offset: int, length: int) -> bytes:
        import obstore

        checked_key(key)
        if length <= 0:
            return b""
        found = self._clean(
            "read", key, lambda store: bytes(obstore.get_range(store, key, start=offset, length=length))
        )
        return bytes(found)

    def delete(self, keys: Iterable[str]) -> None:
        import obstore

        wanted = [checked_key(key) for key in keys]
        if wanted:
            self._call("delete", wanted[0], lambda store: obstore.delete(store, wanted))

    def list(self, prefix: str = "") -> list[str]:
        return [key for key, _, _ in self.listing(prefix)]

    def listing(self, prefix: str = "", *, temporaries: bool = False) -> builtins.list[Listed]:
        import obstore  # an object appears whole when its upload completes: no temporaries here

        folder = checked_prefix(prefix)

        def listed(store: Any) -> builtins.list[Listed]:
            found = [
                Listed(str(meta["path"]), int(meta["size"]), meta["last_modified"].timestamp())
                for chunk in obstore.list(store, folder or None)
                for meta in chunk
            ]
            return sorted(entry for entry in found if entry.key and not entry.key.endswith("/"))

        result: builtins.list[Listed] = self._clean("list", folder or ".", listed)
        return result

    def _clean(self, action: str, key: str, call: Callable[[Any], Any]) -> Any:
        """``call`` in a short forked child while this process has made no object_store request
        (a dataset's maker reads an export's manifest and stays clean for its forked workers, as
        listings do: :mod:`uc_jupyter.storage.objects`); here otherwise."""
        from uc_jupyter.storage import objects

        if self.stay_clean and objects.fork_safe() and hasattr(os, "fork"):
            return _in_a_child(lambda: self._call(action, key, call))
        return self._call(action, key, call)

    def _call(self, action: str, key: str, call: Callable[[Any], Any]) -> Any:
        from uc_jupyter.storage import objects

        if not objects.usable_here():
            raise OSError(
                f"cannot {action} {self.where}/{key}: this process was forked from one that had used object_store, "
                "which cannot run after a fork: write from a spawned process (or from the parent)"
            )
        objects._starting()
        store = self._storage._store(retries=True)
        try:
            return call(store)
        except Exception as exc:
            error = as_os_error(exc)
            if isinstance(error, FileNotFoundError):
                raise FileNotFoundError(f"{self.where}/{key} does not exist") from None
            if isinstance(error, PermissionError):
                raise PermissionError(
                    f"cannot {action} {self.where}/{key}: the storage refused the credentials "
                    f"({refused_because(error)}); check the volume's credentials and their grants"
                ) from None
            raise OSError(f"cannot {action} {self.where}/{key}: {type(error).__name__}: {first_line(error)}") from None


def _in_a_child(call: Callable[[], Any]) -> Any:
    """``call()`` run in a forked child; its result (or its error) returned (raised) here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: call, send, exit (never return into the parent's code)
        gc.disable()  # no collection of the parent's garbage in this copy (see objects._in_a_child)
        status = 0
        try:
            os.close(read)
            with os.fdopen(write, "wb") as out:
                try:
                    answer: tuple[str, Any] = ("ok", call())
                except BaseException as exc:
                    answer = ("error", picklable(exc))
                pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as answers:
            try:
                kind, value = pickle.load(answers)
            except EOFError:
                raise OSError("the process reading the volume ended before it answered") from None
    finally:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    if kind == "error":
        raise value
    return value
