"""A volume folder on object storage through obstore (object_store's S3, GCS and Azure clients).

object_store runs on a tokio runtime that does not survive ``fork``: once a process has made one
request, a forked child that makes another hangs or crashes (checked with obstore 0.12.1; obstore
documents it as not fork-safe). DataLoader workers are forked, so the process that makes a
dataset must not start that runtime. This module keeps track of which process started it
(:func:`usable_here`):

- a listing in a process that has not started it runs in a short-lived forked child, which sends
  the pages back as they come (first page first) and exits; the process stays clean for its
  workers. A process that has started it (a worker, or one that read files itself) lists in place.
- downloads start it in the process that needs them. A forked child of a process that had started
  it cannot use it: it reads through fsspec instead (correct, slower; one notice says so and how
  to avoid it: DataLoader workers started with ``multiprocessing_context="spawn"``).

Example:
    >>> storage = ObjectStorage(store_args(url, options), url, options)                  # doctest: +SKIP
    >>> next(storage.pages(recursive=True)).files[:1]                                        # doctest: +SKIP
    [('a.png', 16384, '"9b2cf535f27731c974343645a3985328"')]
"""

from __future__ import annotations

import contextlib
import gc
import os
import pickle
import re
import signal
import warnings
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from uc_jupyter.errors import NotFound, UcJupyterWarning
from uc_jupyter.processes import unreachable
from uc_jupyter.storage.config import StoreArgs
from uc_jupyter.storage.credentials import provider_for, source_of
from uc_jupyter.storage.downloads import Downloads
from uc_jupyter.storage.errors import (
    StorageUnreachable,
    VolumeReadError,
    as_os_error,
    first_line,
    picklable,
    refused_because,
)
from uc_jupyter.storage.filesystem import FsspecStorage
from uc_jupyter.storage.pages import Entry, Page
from uc_jupyter.storage.regions import bucket_region, region_needed
from uc_jupyter.storage.retry import RetryPolicy
from uc_jupyter.storage.transfers import ObjectDownloads
from uc_jupyter.storage.tree import list_tree

__all__ = ["ObjectStorage", "fork_safe", "usable_here"]

_PAGE = 1000  # entries per listing page (S3 answers at most 1000 per request)
_started_in: int | None = None  # the process that started object_store's runtime (inherited by forks)


def usable_here() -> bool:
    """Whether this process may make object_store requests: it started the runtime itself, or no
    process it was forked from had started one."""
    return _started_in is None or _started_in == os.getpid()


def fork_safe() -> bool:
    """Whether a child forked from this process now could use object_store: no process on its
    way here (this one included) has made an object_store request. When False, start workers
    with ``multiprocessing_context="spawn"`` to keep them on object_store.

    Example:
        >>> fork_safe()  # in a fresh interpreter                                  # doctest: +SKIP
        True
    """
    return _started_in is None


def _starting() -> None:
    global _started_in
    if _started_in is None:
        _started_in = os.getpid()


class ObjectStorage:
    """Listing in pages and downloads of the folder ``url`` through one obstore store per process.
    ``options`` (the volume's) serve the fsspec fallback of a process that cannot use obstore."""

    def __init__(self, args: StoreArgs, url: str, options: Mapping[str, Any], *, where: str = "") -> None:
        self.url, self.where = url, where or url
        self._args = args
        self._root = f"{args.bucket}/{args.prefix}".rstrip("/")
        self._options = dict(options)
        self._stores: dict[tuple[int, bool], Any] = {}
        self._fallback: FsspecStorage | None = None
        # Options refused now, with their name (no request: the region of AWS buckets is found later).
        self._check = self._made(args.prefix or None, retries=False, discover=False)

    # ---------------------------------------------------------------- the seam
    @property
    def in_key_order(self) -> bool:
        """Whether a recursive listing comes in key order here (object_store's does, also with its
        sub-folders listed at once; fsspec's, in a process that cannot use object_store, is not
        promised): a dataset can then start an unshuffled pass on the first page."""
        return usable_here()

    def pages(self, *, recursive: bool) -> Iterator[Page]:
        if not usable_here():
            yield from self._fsspec_here().pages(recursive=recursive)
        elif _started_in == os.getpid() or not hasattr(os, "fork"):  # no fork, no forked workers either
            yield from self._pages_here(recursive)
        else:
            yield from _in_a_child(lambda: self._pages_here(recursive))

    def downloads(self, policy: RetryPolicy, *, on_retry: Callable[[], None], threads: int) -> Downloads:
        if not usable_here():
            fallback = self._fsspec_here()
            _fork_notice(self.where)
            return fallback.downloads(policy, on_retry=on_retry, threads=threads)
        _starting()
        return ObjectDownloads(self._store(retries=False), self._root, policy, on_retry=on_retry)

    # ---------------------------------------------------------------- internals
    def _pages_here(self, recursive: bool) -> Iterator[Page]:
        import obstore

        _starting()
        store = self._store(retries=True)
        started = False
        sent: set[str] = set()
        try:
            if recursive:
                # Sub-folders listed at once, the entries in key order (storage/tree.py).
                for files in _without_markers(list_tree(store, _entry), lambda relative: self._exists(store, relative)):
                    started = True
                    sent.update(relative for relative, _, _ in files)
                    yield Page(files, [])
            else:
                answer = obstore.list_with_delimiter(store, None)
                started = bool(answer["objects"] or answer["common_prefixes"])
                folders = sorted(p.rsplit("/", 1)[-1] for p in answer["common_prefixes"])
                files = [e for e in map(_entry, answer["objects"]) if e[0]]  # "": the folder's own marker
                yield Page(files, [f for f in folders if not f.startswith(".")])
        except Exception as exc:
            if "invalid path" not in str(exc):
                raise _listing_error(self.where, exc) from None
            # A key object_store cannot address ("a/../b", "a//b", "a/./b"): S3 allows any key, and
            # one such key would end the whole listing. fsspec lists them; they are left out.
            if self._args.kind != "s3":  # no fsspec filesystem for gs/Azure is installed
                raise OSError(
                    f"cannot list {self.where}: {first_line(exc)}; rename the objects whose keys have an "
                    "empty, '.' or '..' part"
                ) from None
            yield from self._addressable(self._fsspec_here().pages(recursive=recursive), sent)
            return
        if not started:
            self._missing_or_file()

    def _exists(self, store: Any, relative: str) -> bool:
        import obstore

        try:
            obstore.head(store, relative)
        except FileNotFoundError:
            return False
        return True

    def _addressable(self, pages: Iterator[Page], sent: set[str]) -> Iterator[Page]:
        left_out: list[str] = []
        for page in pages:
            files = []
            for entry in page.files:
                if _unaddressable(entry[0]):
                    left_out.append(entry[0])
                elif entry[0] not in sent:
                    files.append(entry)
            yield Page(files, page.folders)
        if left_out:
            warnings.warn(
                f"{self.where}: left out {len(left_out)} object(s) whose keys have an empty, '.' or '..' part, "
                f"e.g. {left_out[0]!r} (object_store cannot read them); rename them to read them",
                UcJupyterWarning,
                stacklevel=2,
            )

    def _missing_or_file(self) -> None:
        """Nothing below the folder: it is a file, or it does not exist."""
        import obstore

        if self._args.prefix:
            try:
                obstore.head(self._made(None, retries=True), self._args.prefix)
            except FileNotFoundError:
                pass
            except Exception as exc:
                raise _listing_error(self.where, exc) from None
            else:
                raise NotADirectoryError(f"{self.where} is a file, not a folder; give the folder that holds the files")
        raise NotFound(f"{self.where} does not exist")

    def _store(self, *, retries: bool) -> Any:
        key = (os.getpid(), retries)
        store = self._stores.get(key)
        if store is None:
            # A parent's stores stay where they are: dropping a client whose runtime did not come
            # through the fork could wait on threads that do not exist here.
            store = self._stores[key] = self._made(self._args.prefix or None, retries=retries)
        return store

    def _made(self, prefix: str | None, *, retries: bool, discover: bool = True) -> Any:
        """A store (no request is made): listings retry in object_store, a few times
        (:data:`_LISTING_RETRIES`); downloads retry with the dataset's policy, so object_store's own
        retries are off for them."""
        from obstore.store import AzureStore, GCSStore, S3Store

        args = self._args
        config = dict(args.config)
        provider = args.credential_provider
        retry = _LISTING_RETRIES if retries else {"max_retries": 0, "retry_timeout": timedelta(minutes=3)}
        kinds: dict[str, Any] = {"s3": S3Store, "gcs": GCSStore, "azure": AzureStore}
        if args.kind == "s3" and provider is None:
            source = source_of(config, os.environ, args.profile)
            provider, region = provider_for(source, config, args.profile)
            if provider is not None:
                for key in ("access_key_id", "secret_access_key", "session_token"):
                    config.pop(key, None)
            if region and "region" not in config:
                config["region"] = region
            elif discover and region_needed(config, os.environ):
                config["region"] = bucket_region(args.bucket) or "us-east-1"
        try:
            return kinds[args.kind](
                args.bucket,
                prefix=prefix,
                config=config,
                client_options=args.client_options,
                retry_config=retry,
                credential_provider=provider,
            )
        except Exception as exc:
            raise ValueError(
                f"cannot open {self.where}: invalid storage options ({first_line(exc)}): fix the credential's options"
            ) from None

    def _fsspec_here(self) -> FsspecStorage:
        """fsspec in a process object_store cannot run in (s3fs; gs and Azure have no fsspec
        filesystem installed: refused with what to do)."""
        if self._args.kind != "s3":
            raise VolumeReadError(
                f"cannot read {self.where}: this process was forked from one that had read through object_store, "
                'which cannot run after a fork: start DataLoader workers with multiprocessing_context="spawn" '
                "(or read only in the workers)"
            )
        if self._fallback is None:
            self._fallback = FsspecStorage(self.url, self._options, where=self.where)
        return self._fallback


def _without_markers(batches: Iterator[list[Entry]], exists: Callable[[str], bool]) -> Iterator[list[Entry]]:
    """The listing without folder markers (keys ending in ``/``, which object_store lists without
    their slash). A marker is empty and sorts right before what it holds; an empty entry with
    nothing below it is a file only if it exists under its own name (``exists``: one HEAD; an empty
    folder's marker does not)."""
    held: Entry | None = None  # an empty entry, judged by the one that follows it
    for batch in batches:
        files: list[Entry] = []
        for entry in batch:
            if held is not None:
                if not entry[0].startswith(held[0] + "/") and exists(held[0]):
                    files.append(held)
                held = None
            if not entry[0]:
                continue  # the folder's own marker
            if entry[1] == 0:
                held = entry
            else:
                files.append(entry)
        yield files
    if held is not None and exists(held[0]):
        yield [held]


# A listing's requests are retried in object_store (5xx answers, dropped connections): a few times,
# quickly. Its default (10 retries, 3 minutes) kept a notebook waiting 3-10 s on an endpoint that
# refused every connection, before a line about retries.
_LISTING_RETRIES = {
    "max_retries": 3,
    "retry_timeout": timedelta(seconds=20),
    "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2), "base": 2.0},
}


def _unaddressable(relative: str) -> bool:
    return any(part in ("", ".", "..") for part in relative.split("/"))


def _entry(meta: Mapping[str, Any]) -> Entry:
    version = meta.get("e_tag") or meta.get("version")
    if version is None and meta.get("last_modified") is not None:
        version = str(meta["last_modified"].timestamp())
    return (str(meta["path"]), int(meta["size"]), version)


_ENDPOINT = re.compile(r"\b(https?)://([^/\s:]+)(?::(\d+))?")


def _unreachable(error: BaseException) -> str:
    """For a request that never got an answer, what connecting to its endpoint says now, in words
    ("http://127.0.0.1:9000 refused the connection"; for https, a TLS handshake that fails: object_store
    says only "error sending request"); "" when the error names no endpoint, or the endpoint answers
    (the failure was something else). One connection, at most 2 s each step."""
    found = _ENDPOINT.search(str(error))
    if found is None:
        return ""
    scheme, host, port = found.group(1), found.group(2), found.group(3)
    endpoint = f"{scheme}://{host}{f':{port}' if port else ''}"
    https = scheme == "https"
    reason = unreachable(host, int(port or (443 if https else 80)), 2.0, tls=https)
    if reason is None:
        return ""
    if reason == "connection refused":
        return f"{endpoint} refused the connection (nothing listens there)"
    return f"{endpoint}: {reason}"


def _listing_error(where: str, exc: Exception) -> Exception:
    error = as_os_error(exc)
    if isinstance(error, FileNotFoundError):  # the bucket itself is missing
        return NotFound(f"{where} does not exist ({first_line(error)})")
    if isinstance(error, PermissionError):
        return PermissionError(
            f"cannot list {where}: the storage refused the credentials ({refused_because(error)}); "
            "check the volume's credentials and their grants"
        )
    if isinstance(error, (NotFound, NotADirectoryError)):
        return error
    cause = _unreachable(error) if "error sending request" in str(error) else ""
    if cause:  # the store cannot be reached: say where and why, not object_store's retry log
        return StorageUnreachable(f"cannot list {where}: {cause}; check the volume's endpoint, or that its store runs")
    return OSError(f"cannot list {where}: {type(error).__name__}: {first_line(error)}")


def _in_a_child(listing: Callable[[], Iterator[Page]]) -> Iterator[Page]:
    """``listing`` run in a forked child (this process keeps no object_store runtime), its pages
    sent back through a pipe as they come; its error raised here."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: list, send, exit (never return into the parent's code)
        # No cyclic collection here: it would finalise the parent's garbage in this copy, and a
        # torch DataLoader iterator left in a cycle then joins the parent's workers from here
        # (5 s each, measured: a dataset made after an abandoned loop took 10.6 s instead of 0.7 s).
        gc.disable()
        status = 0
        try:
            os.close(read)
            with os.fdopen(write, "wb") as out, warnings.catch_warnings(record=True) as warned:
                warnings.simplefilter("always")
                try:
                    for page in listing():
                        pickle.dump(("page", page), out, protocol=pickle.HIGHEST_PROTOCOL)
                        out.flush()
                    for warning in warned:  # the listing's warnings are the parent's to show
                        pickle.dump(("warning", (str(warning.message), warning.category)), out)
                    pickle.dump(("end", None), out)
                except BaseException as exc:
                    pickle.dump(("error", picklable(exc)), out)
        except BaseException:
            status = 1
        finally:
            os._exit(status)
    os.close(write)
    ended = False
    try:
        with os.fdopen(read, "rb") as answers:
            while True:
                try:
                    kind, value = pickle.load(answers)
                except EOFError:
                    raise OSError("the listing process ended before it had listed everything") from None
                if kind == "page":
                    yield value
                elif kind == "warning":
                    warnings.warn(value[0], value[1], stacklevel=3)
                elif kind == "error":
                    raise value
                else:
                    ended = True
                    return
    finally:
        if not ended:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):  # reaped already where SIGCHLD is ignored
            os.waitpid(pid, 0)


def _fork_notice(where: str) -> None:
    from uc_jupyter.notices import notice

    notice(
        f"{where}: this process was forked from one that had read through object_store, which cannot "
        "run after a fork, so it reads through fsspec (slower); start DataLoader workers with "
        'multiprocessing_context="spawn", or read only in the workers',
        key=("object-store-fork", os.getpid()),
    )
