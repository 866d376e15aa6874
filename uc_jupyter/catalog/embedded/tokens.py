"""The bearer tokens of ``uc-jupyter serve``: who a request comes from, proven by a secret.

A token reads ``ucj_<id>_<secret>``: the prefix lets a leaked token be found by a grep (of logs,
repositories, pastes), ``<id>`` (16 hex digits) names it in listings and revocations, and
``<secret>`` is ``secrets.token_urlsafe(32)``: 256 random bits. The token is shown once, by
:meth:`TokenStore.create`; ``<home>/tokens.db`` (SQLite, 0600, in the 0700 catalog folder) keeps only
its SHA-256. A fast hash is right here: a password KDF (scrypt, argon2) makes guessing *low-entropy*
secrets slow, but nobody can enumerate 2**256 secrets at any hash speed, and the server hashes the
token of every request, which a KDF would make cost tens of milliseconds each.

:meth:`TokenStore.authenticate` reads the token's row on every call (one primary-key lookup, no cache),
so a revocation committed by any process refuses the very next request everywhere (one already past
its check completes); about 20 microseconds a call here, whatever the number of principals. It compares hashes
in constant time and raises the same :class:`~uc_jupyter.catalog.Unauthenticated` for a malformed,
unknown, tampered, expired or revoked token, and for one whose principal was dropped (or dropped and
registered again: a token belongs to the principal registered when it was made).

Tokens live apart from ``secrets.db``: the server opens this file for every request and never needs the
storage credentials for that, and moving ``tokens.db`` away ends every token at once without touching
the catalog. Who may do what follows the catalog's principal (:func:`~uc_jupyter.catalog.current_principal`):
anyone registered makes, lists and revokes their own tokens; metastore admins those of every principal.
On the embedded catalog that principal is whatever the process says it is, so the tokens file is as
safe as the home folder's permissions; the server is what makes them matter.

Example:
    >>> import tempfile
    >>> from datetime import datetime, timedelta, timezone
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> _ = cat.create_principal("alice")
    >>> store = TokenStore(cat)
    >>> t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    >>> info, token = store.create("alice", ttl_seconds=3600, now=t0)
    >>> token.startswith("ucj_" + info.id), info.expires_at
    (True, datetime.datetime(2026, 1, 1, 1, 0, tzinfo=datetime.timezone.utc))
    >>> store.authenticate(token, now=t0 + timedelta(minutes=59))
    'alice'
    >>> store.authenticate(token, now=t0 + timedelta(hours=1))
    Traceback (most recent call last):
    uc_jupyter.catalog.Unauthenticated: token refused (unknown, malformed, expired or revoked); ...
"""

from __future__ import annotations

import builtins
import hashlib
import hmac
import math
import os
import re
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from uc_jupyter.catalog.model import NotFound, PermissionDenied, PrincipalInfo, Unauthenticated
from uc_jupyter.catalog.rules.privileges import validate_principal
from uc_jupyter.sqlite_store import SqliteStore

if TYPE_CHECKING:
    from uc_jupyter.catalog.embedded.local import LocalCatalog

__all__ = ["PREFIX", "TokenInfo", "TokenStore"]

PREFIX = "ucj_"
_ID = re.compile(r"[0-9a-f]{16}")
_TOKEN = re.compile(r"ucj_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_TOKEN_LENGTH = len(PREFIX) + 16 + 1 + 43
_NO_HASH = hashlib.sha256(b"").hexdigest()  # compared against when no row matches: the same work either way
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS tokens (id TEXT PRIMARY KEY, hash TEXT NOT NULL, principal TEXT NOT NULL,"
    " principal_created_at TEXT NOT NULL, created_at TEXT NOT NULL, expires_at TEXT)",
    "CREATE INDEX IF NOT EXISTS tokens_principal ON tokens(principal)",
)
_ADMIN = "METASTORE ADMIN"


@dataclass(frozen=True)
class TokenInfo:
    """A token as listings show it: never its secret or hash. ``expires_at`` None: it never expires."""

    id: str
    principal: str
    created_at: datetime
    expires_at: datetime | None = None

    def expired(self, now: datetime) -> bool:
        """Whether the token is refused at ``now`` for its age (it is valid strictly before ``expires_at``)."""
        return self.expires_at is not None and now >= self.expires_at


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class TokenStore:
    """The tokens of the catalog ``catalog`` (see the module docstring), in ``<catalog.root>/tokens.db``.

    ``clock`` gives the current time (timezone-aware) where a call is given no ``now``.
    """

    def __init__(
        self,
        catalog: LocalCatalog,
        *,
        clock: Callable[[], datetime] = _utc_now,
        busy_timeout: float = 60.0,
    ) -> None:
        self._catalog = catalog
        self._clock = clock
        self.path = Path(catalog.root) / "tokens.db"
        self._store = SqliteStore(
            self.path,
            schema=_SCHEMA,
            busy_timeout=busy_timeout,
            remedy="move it away: every token ends, and admins make new ones with uc-jupyter token create",
        )
        os.chmod(self.path, 0o600)  # also a file made under a wider umask

    def __repr__(self) -> str:
        return f"TokenStore({str(self.path)!r})"

    def create(
        self, principal: str, *, ttl_seconds: float | None = None, now: datetime | None = None
    ) -> tuple[TokenInfo, str]:
        """A new token for ``principal``, valid for ``ttl_seconds`` (None: until revoked); returns its
        info and the token itself, which nothing can show again. A token for another principal than
        the caller needs a metastore admin; the principal must be registered in the catalog."""
        validate_principal(principal)
        if ttl_seconds is not None and (
            isinstance(ttl_seconds, bool)
            or not isinstance(ttl_seconds, int | float)
            or not math.isfinite(ttl_seconds)
            or ttl_seconds <= 0
        ):
            raise ValueError(f"ttl_seconds must be a positive number of seconds, got {ttl_seconds!r}")
        created = self._now(now)
        caller = self._catalog.current_principal()
        if principal != caller:
            self._require_admin(caller, f"the tokens of {principal}")
        owner = self._principal(principal)
        if owner is None:
            raise NotFound(
                f"principal {principal} does not exist; a metastore admin registers it with "
                f"uc-jupyter catalog create principal {principal}"
            )
        token_id = secrets.token_hex(8)
        token = f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"
        expires = None if ttl_seconds is None else created + timedelta(seconds=ttl_seconds)
        with self._store.transaction() as conn:
            conn.execute(
                "INSERT INTO tokens VALUES (?, ?, ?, ?, ?, ?)",
                (
                    token_id,
                    _digest(token),
                    principal,
                    owner.created_at.isoformat(),
                    created.isoformat(),
                    None if expires is None else expires.isoformat(),
                ),
            )
        return TokenInfo(token_id, principal, created, expires), token

    def list(self, principal: str | None = None) -> builtins.list[TokenInfo]:
        """Tokens by creation time: the caller's own, or (metastore admins) those of ``principal``,
        or of everyone when ``principal`` is None. Expired tokens are listed until revoked."""
        caller = self._catalog.current_principal()
        if principal is None and not self._is_admin(caller):
            principal = caller
        elif principal is not None and principal != caller:
            self._require_admin(caller, f"the tokens of {principal}")
        query = "SELECT id, principal, created_at, expires_at FROM tokens"
        with self._store.transaction(write=False) as conn:
            if principal is None:
                rows = conn.execute(f"{query} ORDER BY created_at, id").fetchall()
            else:
                rows = conn.execute(f"{query} WHERE principal = ? ORDER BY created_at, id", (principal,)).fetchall()
        return [
            TokenInfo(r[0], r[1], datetime.fromisoformat(r[2]), None if r[3] is None else datetime.fromisoformat(r[3]))
            for r in rows
        ]

    def revoke(self, token_id: str) -> None:
        """End the token ``token_id`` (as listed) at once, for every process; the caller's own, or
        any for a metastore admin."""
        if not isinstance(token_id, str) or not _ID.fullmatch(token_id):
            hint = "give its id, not the token itself" if isinstance(token_id, str) and PREFIX in token_id else ""
            raise ValueError(  # never echoed: it may be a token pasted by mistake
                f"invalid token id: {hint or 'ids are 16 hex digits'} (uc-jupyter token list shows them)"
            )
        caller = self._catalog.current_principal()
        admin = self._is_admin(caller)
        with self._store.transaction() as conn:
            row = conn.execute("SELECT principal FROM tokens WHERE id = ?", (token_id,)).fetchone()
            if row is None:
                raise NotFound(f"token {token_id} does not exist (uc-jupyter token list shows the tokens)")
            if row[0] != caller and not admin:
                raise PermissionDenied(caller, _ADMIN, f"token {token_id}, which is not {caller}'s")
            conn.execute("DELETE FROM tokens WHERE id = ?", (token_id,))

    def authenticate(self, token: str, *, now: datetime | None = None) -> str:
        """The principal of ``token``; :class:`~uc_jupyter.catalog.Unauthenticated` (always the same
        message) when it is malformed, unknown, expired, revoked or its principal is gone."""
        at = self._now(now)
        match = _TOKEN.fullmatch(token) if isinstance(token, str) and len(token) == _TOKEN_LENGTH else None
        digest = _digest(token) if match else _NO_HASH
        with self._store.transaction(write=False) as conn:
            row = (
                conn.execute(
                    "SELECT hash, principal, principal_created_at, expires_at FROM tokens WHERE id = ?",
                    (match.group(1),),
                ).fetchone()
                if match
                else None
            )
        stored = row[0] if row is not None else _NO_HASH
        if not hmac.compare_digest(stored, digest) or row is None or match is None:
            raise Unauthenticated()
        if row[3] is not None and at >= datetime.fromisoformat(row[3]):
            raise Unauthenticated()
        owner = self._principal(row[1])
        if owner is None or owner.created_at.isoformat() != row[2]:
            raise Unauthenticated()
        principal: str = row[1]
        return principal

    # ----------------------------------------------------------------- helpers
    def _now(self, now: datetime | None) -> datetime:
        at = self._clock() if now is None else now
        if at.tzinfo is None:
            raise ValueError("now must be a timezone-aware datetime (e.g. datetime.now(timezone.utc))")
        return at.astimezone(timezone.utc)

    def _principal(self, name: str) -> PrincipalInfo | None:
        try:
            return self._catalog.get_principal(name)
        except NotFound:
            return None

    def _is_admin(self, name: str) -> bool:
        info = self._principal(name)
        return info is not None and info.admin

    def _require_admin(self, caller: str, what: str) -> None:
        if not self._is_admin(caller):
            raise PermissionDenied(caller, _ADMIN, what)


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()
