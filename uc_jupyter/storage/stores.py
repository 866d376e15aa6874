"""Which object_store client serves a storage URL: one entry per scheme family.

Reads (:func:`uc_jupyter.storage.reads.open_storage`) and writes
(:func:`uc_jupyter.storage.writes.open_writes`) both ask :func:`store_args` here, so a URL is served by
the same store, with the same options, whichever way its bytes go. A scheme family is one function
from ``(url, options)`` to :class:`~uc_jupyter.storage.config.StoreArgs` and one :func:`register_store`
line; a scheme not registered is read through fsspec.

Example:
    >>> store_args("s3://lake/images", {"anon": True}, env={}).bucket
    'lake'
    >>> is_object_store("gs://lake/x"), is_object_store("memory://x")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from uc_jupyter.storage import cloud
from uc_jupyter.storage.config import StoreArgs, Unsupported, s3_store_args

__all__ = ["is_object_store", "register_store", "store_args"]

StoreMaker = Callable[[str, Mapping[str, Any] | None, Mapping[str, str] | None], StoreArgs]
_STORES: dict[str, StoreMaker] = {}


def register_store(schemes: Iterable[str], make: StoreMaker) -> None:
    """Serve URLs of ``schemes`` (lower case, without ``://``) through object_store with ``make``."""
    for scheme in schemes:
        _STORES[scheme] = make


register_store(("s3", "s3a"), s3_store_args)
register_store(("gs", "gcs"), lambda url, options, env: cloud.gcs_store_args(url, options))
register_store(("az", "azure", "abfs", "abfss"), lambda url, options, env: cloud.azure_store_args(url, options))


def _scheme(url: str) -> str:
    return url.partition("://")[0].lower()


def is_object_store(url: str) -> bool:
    """Whether an object_store client serves ``url`` (else fsspec does, or the local backend)."""
    return _scheme(url) in _STORES


def store_args(url: str, options: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> StoreArgs:
    """How to build the obstore store of the folder at ``url`` with these storage options, in
    environment ``env`` (default ``os.environ``: object_store reads ``AWS_*`` variables too).

    Raises:
        Unsupported: an option object_store cannot honour (named), or a scheme it does not serve.
    """
    make = _STORES.get(_scheme(url))
    if make is None:
        raise Unsupported(f"{_scheme(url)}:// is not an object_store scheme")
    return make(url, options, env)
