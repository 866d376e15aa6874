"""The AWS region of a bucket, for volumes that name none (s3fs finds it the same way).

object_store signs for ``us-east-1`` unless told otherwise, and AWS answers a request signed for
the wrong region with a redirect it does not follow. Any request about a bucket, even an
unauthenticated HEAD that is refused, carries the bucket's region in ``x-amz-bucket-region``.

Example:
    >>> bucket_region("my-training-data")  # doctest: +SKIP
    'eu-west-1'
"""

from __future__ import annotations

import threading
import urllib.error
import urllib.request
from collections.abc import Mapping
from urllib.parse import quote

__all__ = ["bucket_region", "region_needed"]

_AWS = "https://s3.amazonaws.com"
_TIMEOUT_S = 5.0
_known: dict[tuple[str, str], str | None] = {}
_lock = threading.Lock()


def region_needed(config: Mapping[str, str], env: Mapping[str, str]) -> bool:
    """Whether a store with this ``config`` would be AWS itself with no region said anywhere."""
    if config.get("region") or config.get("default_region") or config.get("endpoint"):
        return False
    said = ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT")
    return not any(env.get(name) for name in said)


def bucket_region(bucket: str, *, base: str = _AWS) -> str | None:
    """The region AWS (or the S3 service at ``base``) says ``bucket`` is in; None when it does not
    answer (the store then keeps object_store's default and the first request says what is wrong).
    Asked once per bucket and process."""
    with _lock:
        if (base, bucket) in _known:
            return _known[(base, bucket)]
    request = urllib.request.Request(f"{base}/{quote(bucket, safe='')}", method="HEAD")
    region: str | None
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as answer:
            region = answer.headers.get("x-amz-bucket-region")
    except urllib.error.HTTPError as refused:  # 301, 403, 404: the header comes with them
        region = refused.headers.get("x-amz-bucket-region")
    except OSError:
        region = None
    with _lock:
        _known[(base, bucket)] = region
    return region
