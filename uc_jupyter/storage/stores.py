"""Which object_store client serves a storage URL: one entry per scheme family.

Reads (:func:`uc_jupyter.storage.reads.open_storage`) and writes
(:func:`uc_jupyter.storage.writes.open_writes`) both ask :func:`store_args` here, so a URL is served by
the same store, with the same options, whichever way its bytes go. A scheme family is one function
from ``(url, options)`` to :class:`~uc_jupyter.storage.config.StoreArgs` and one :func:`register_store`
line naming the family; which spellings of a scheme belong to a family is
:func:`~uc_jupyter.storage.locations.family_of`'s to say, once. A family not registered is read
through fsspec.

Example:
    >>> store_args("s3://lake/images", {"anon": True}, env={}).bucket
    'lake'
    >>> is_object_store("gs://lake/x"), is_object_store("memory://x")
    (True, False)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from uc_jupyter.storage import cloud
from uc_jupyter.storage.config import StoreArgs, Unsupported, s3_store_args
from uc_jupyter.storage.locations import Family, family_of

__all__ = ["check_store_options", "is_object_store", "register_store", "store_args"]

StoreMaker = Callable[[str, Mapping[str, Any] | None, Mapping[str, str] | None], StoreArgs]
_STORES: dict[Family, StoreMaker] = {}


def register_store(family: Family, make: StoreMaker) -> None:
    """Serve URLs of ``family`` (every spelling of its scheme) through object_store with ``make``."""
    _STORES[family] = make


register_store("s3", s3_store_args)
register_store("gcs", lambda url, options, env: cloud.gcs_store_args(url, options))
register_store("azure", lambda url, options, env: cloud.azure_store_args(url, options))


def is_object_store(url: str) -> bool:
    """Whether an object_store client serves ``url`` (else fsspec does, or the local backend)."""
    return "://" in url and family_of(url) in _STORES


def store_args(url: str, options: Mapping[str, Any] | None, env: Mapping[str, str] | None = None) -> StoreArgs:
    """How to build the obstore store of the folder at ``url`` with these storage options, in
    environment ``env`` (default ``os.environ``: object_store reads ``AWS_*`` variables too).

    Raises:
        Unsupported: an option object_store cannot honour (named), or a scheme it does not serve.
    """
    make = _STORES.get(family_of(url)) if "://" in url else None
    if make is None:
        raise Unsupported(f"{url.partition('://')[0].lower()}:// is not an object_store scheme")
    return make(url, options, env)


# A folder of each family, for options not yet bound to a URL (a storage credential's).
_EXAMPLES = ("s3://bucket", "gs://bucket", "az://container")


def check_store_options(options: Mapping[str, Any], url: str | None = None) -> None:
    """Refuse, at once, options the store of ``url`` would refuse when first read; without a URL (a
    storage credential, bound to one later), options that no store (S3, GCS, Azure) takes. Nothing
    is contacted. A URL no object_store client serves (``file://``) takes any.

    Example:
        >>> check_store_options({"key": "AKIA", "secret": "s", "endpoint_url": "http://127.0.0.1:9000"})
        >>> check_store_options({"kee": "AKIA"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        uc_jupyter.storage.config.Unsupported: storage option 'kee'; no store takes these options (S3, GCS, Azure): ...
    """
    if url is not None:
        if is_object_store(url):
            store_args(url, options, env={})
        return
    refusals = []
    for example in _EXAMPLES:
        try:
            store_args(example, options, env={})
            return
        except ValueError as refused:  # Unsupported, or a value the store cannot parse
            refusals.append(str(refused))
    raise Unsupported(f"{refusals[0]}; no store takes these options (S3, GCS, Azure): check their names and values")
