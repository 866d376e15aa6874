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

__all__ = ["check_store_options", "is_object_store", "reads_through_fsspec", "register_store", "store_args"]

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
# fsspec's own options, which every filesystem takes (its instance and listings caches).
_FSSPEC_COMMON = frozenset({"skip_instance_cache", "use_listings_cache", "listings_expiry_time", "max_paths"})


def reads_through_fsspec(url: str) -> bool:
    """Whether a folder at ``url`` whose options object_store cannot honour is read through fsspec
    (s3fs) instead: S3 only; other families' such options are refused."""
    return url.lower().startswith(("s3://", "s3a://"))


def check_store_options(options: Mapping[str, Any], url: str | None = None) -> None:
    """Refuse, at once, options the store of ``url`` would refuse when first read; without a URL (a
    storage credential, bound to one later), options that no store (S3, GCS, Azure) takes. Options
    object_store cannot honour that s3fs names (``fixed_upload_size``) are taken for S3: such a
    folder is read through fsspec. Nothing is contacted. A URL no object_store client serves
    (``file://``) takes any.

    Example:
        >>> check_store_options({"key": "AKIA", "secret": "s", "endpoint_url": "http://127.0.0.1:9000"})
        >>> check_store_options({"key": "AKIA", "fixed_upload_size": False})  # s3fs's: read through fsspec
        >>> check_store_options({"kee": "AKIA"})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        uc_jupyter.storage.config.Unsupported: storage option 'kee'; no store takes these options (S3, GCS, Azure): ...
    """
    if url is not None:
        if is_object_store(url):
            refused = _refusal(url, options)
            if refused is not None:
                raise refused
        return
    refusals = [_refusal(example, options) for example in _EXAMPLES]
    if None in refusals:
        return
    first = refusals[0]
    raise Unsupported(f"{first}; no store takes these options (S3, GCS, Azure): check their names and values")


def _refusal(url: str, options: Mapping[str, Any]) -> ValueError | None:
    """Why the folder at ``url`` could not be read with ``options`` (None: it could)."""
    try:
        store_args(url, options, env={})
        return None
    except Unsupported as unsupported:
        if not reads_through_fsspec(url):
            return unsupported
        # The options object_store refuses on their own must all be s3fs's (the rest are both's).
        alone = {key for key in options if _refuses_alone(url, key, options[key])}
        return None if alone <= _fsspec_names(url) else unsupported
    except ValueError as invalid:  # a value the store cannot parse
        return invalid


def _refuses_alone(url: str, key: str, value: Any) -> bool:
    try:
        store_args(url, {key: value}, env={})
        return False
    except Unsupported:
        return True
    except ValueError:  # a value to judge with the others
        return False


def _fsspec_names(url: str) -> frozenset[str]:
    """The options the fsspec filesystem of ``url``'s scheme names in its constructors (the rest it
    would take silently and ignore)."""
    import inspect

    import fsspec

    named = set(_FSSPEC_COMMON)
    for klass in fsspec.get_filesystem_class(url.partition("://")[0].lower()).__mro__:
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        for parameter in inspect.signature(init).parameters.values():
            if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY):
                named.add(parameter.name)
    return frozenset(named - {"self"})
