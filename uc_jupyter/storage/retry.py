"""Retrying storage and catalog requests: which errors are transient, and how long to wait.

One :class:`RetryPolicy` serves every retry loop of the project: downloads from a volume's storage
(full jitter: clients that failed together spread over the whole window) and calls to a catalog
server (equal jitter: spread apart, yet none retries at once; a server's ``Retry-After`` bounded).

Example:
    >>> policy = RetryPolicy(attempts=3, base_seconds=0.5, max_seconds=2.0)
    >>> [policy.delay(n, lambda: 1.0) for n in range(3)]
    [0.5, 1.0, 2.0]
    >>> RetryPolicy(jitter="equal").delays(3, lambda: 0.0)
    [0.05, 0.1, 0.2]
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from uc_jupyter import options as opt
from uc_jupyter.storage.errors import VolumeReadError

__all__ = ["RetryPolicy", "is_transient", "retry_delay"]

# S3 error codes worth retrying whatever their status (RequestTimeout comes as a 400).
_TRANSIENT_CODES = frozenset({"SlowDown", "Throttling", "RequestTimeout", "InternalError", "ServiceUnavailable"})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: attempt k (from 0) waits up to ``base_seconds * 2**k``, capped at
    ``max_seconds``, scaled by a random draw in [0, 1): over the whole window (``jitter="full"``) or
    into its upper half (``"equal"``). ``attempts`` counts the first try; ``max_retry_after`` bounds
    the wait a server asks for (a server asking for an hour should not hang a notebook for an hour).
    """

    attempts: int = 5
    base_seconds: float = 0.1
    max_seconds: float = 5.0
    jitter: Literal["full", "equal"] = "full"
    max_retry_after: float = 30.0

    def __post_init__(self) -> None:
        opt.whole_number("attempts", self.attempts, minimum=1)  # 0 attempts would read nothing, silently
        opt.non_negative_number("base_seconds", self.base_seconds)
        opt.non_negative_number("max_seconds", self.max_seconds)
        opt.choice("jitter", self.jitter, ("full", "equal"))
        opt.non_negative_number("max_retry_after", self.max_retry_after)

    def delay(self, attempt: int, draw: Callable[[], float]) -> float:
        """The wait after attempt ``attempt`` (from 0) failed; ``draw`` gives a number in [0, 1)."""
        window: float = min(self.max_seconds, self.base_seconds * 2**attempt)
        share = draw() if self.jitter == "full" else 0.5 + 0.5 * draw()
        return window * share

    def delays(self, retries: int, draw: Callable[[], float]) -> list[float]:
        """The waits before retries 1..``retries`` (at most ``attempts - 1`` of them)."""
        return [self.delay(n, draw) for n in range(min(retries, self.attempts - 1))]


def is_transient(exc: BaseException) -> bool:
    """Errors worth retrying: 5xx and 429 answers, throttling, resets and timeouts."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False
    if isinstance(exc, (ConnectionError, TimeoutError)):
        return True
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None)
    code = getattr(exc, "code", None)  # storage.errors.StorageResponseError
    response = getattr(exc, "response", None)
    if status is None and isinstance(response, dict):  # botocore ClientError
        status = response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(response.get("Error", {}).get("Code", ""))
    if isinstance(code, str) and code in _TRANSIENT_CODES:
        return True
    if isinstance(status, int):
        return status >= 500 or status == 429
    text = str(exc)
    if any(marker in text for marker in ("503", "502", "500 ", "504", "SlowDown", "reset by peer", "timed out")):
        return True
    cause = exc.__cause__ or exc.__context__
    return cause is not None and cause is not exc and is_transient(cause)


def retry_delay(
    exc: Exception, attempt: int, local_path: str, *, volume_path: str, policy: RetryPolicy, rng: random.Random
) -> float:
    """After ``attempt`` (from 0) failed with ``exc``: remove what it left at ``local_path`` and return
    how long to wait before the next one, or raise :class:`VolumeReadError` when ``exc`` is not worth
    retrying or no attempt is left. Every download loop goes through here, so all classify alike."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(local_path)
    if not is_transient(exc) or attempt >= policy.attempts - 1:
        tries = f" after {attempt + 1} attempts" if attempt else ""
        raise VolumeReadError(f"cannot read {volume_path}{tries}: {_describe(exc)}") from exc
    return policy.delay(attempt, rng.random)


def _describe(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:300]}"
