"""Temporary credentials for one table, volume or path, made by the server that alone holds the keys.

What a vend gives, by storage (docs/design/unity-catalog-server.md section 6):

- ``file://``: the URL and an expiry only, no secret (as UC OSS: local files have no credentials to
  scope; the README's section on the catalog server, under "file:// storage", says what that does
  and does not enforce). The expiry makes a client ask again,
  so a revoked grant is noticed within one lifetime.
- ``s3://``, by the credential's option ``vending``:

  - ``iam-role-per-vend`` (for S3 servers that enforce role policies but not session policies, such
    as moto): the credential's keys are an IAM user allowed to manage roles; per vend the server
    creates role ``uc-vend-<hex>`` trusting that user, puts an inline policy scoped to the object's
    prefix and operation (:func:`s3_policy`), assumes it, and records ``(role, expires_at)`` in
    ``<home>/vends.db``. A reaper deletes the role's policy and the role at expiry, which ends the
    session at once (the role itself goes one session length later); records left by a stopped server
    are reaped when the next one starts. The keys each role was made with are kept with its record
    until the role is deleted, so a credential dropped (or dropped and made again with other keys)
    while its vends live cannot leave a role the reaper can no longer delete; and dropping a
    credential through the server ends its live vends at once (:meth:`Vendor.end_vends`).
  - ``sts-session-policy`` (real AWS, the default when the credential has ``role_arn``): one
    AssumeRole of ``role_arn`` with :func:`s3_policy` as the session policy; AWS enforces both the
    policy and the expiry (``DurationSeconds`` >= 900, AWS's minimum).
  - ``static``: the credential's own keys, unscoped. Only when the credential says so explicitly
    (the project's unauthenticated S3TestServer); without a ``vending`` option an s3 credential
    vends nothing.

The lifetime of a vend is ``UC_JUPYTER_VEND_SECONDS`` (default 3600) in the server's environment.

Example:
    >>> import tempfile
    >>> vendor = Vendor(tempfile.mkdtemp(), lifetime_s=60, clock=lambda: 1000.0)
    >>> vended = vendor.vend("file:///data/v", {}, write=False)
    >>> vended.url, vended.expires_at, vended.aws
    ('file:///data/v', 1060.0, None)
    >>> s3_policy("s3://lake/raw/v", write=False)["Statement"][0]["Resource"]
    ['arn:aws:s3:::lake/raw/v/*', 'arn:aws:s3:::lake/raw/v']
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from uc_jupyter.catalog import CatalogError
from uc_jupyter.catalog.embedded.secrets import SecretStore
from uc_jupyter.catalog.wire.storage import AwsSession, Vended
from uc_jupyter.sqlite_store import SqliteStore
from uc_jupyter.storage.locations import bucket_and_key, canonical_location, family_of

__all__ = [
    "DEFAULT_LIFETIME_S",
    "LIFETIME_ENV",
    "MODES",
    "VendingRefused",
    "Vendor",
    "check_vending_options",
    "end_vends_at_drop",
    "escape_iam",
    "lifetime_from_env",
    "s3_policy",
]

log = logging.getLogger(__name__)

LIFETIME_ENV = "UC_JUPYTER_VEND_SECONDS"
DEFAULT_LIFETIME_S = 3600.0
MODES = ("iam-role-per-vend", "sts-session-policy", "static")
ROLE_PREFIX = "uc-vend-"
_STS_MINIMUM_S = 900  # AssumeRole's least DurationSeconds (boto3 refuses less before sending)
_READ_ACTIONS = ["s3:GetO*"]  # UC OSS's AwsPolicyGenerator: GetObject, GetObjectVersion, ...
_WRITE_ACTIONS = ["s3:GetO*", "s3:PutO*", "s3:DeleteO*", "s3:*Multipart*"]
_REAPER_IDLE_S = 30.0  # the reaper looks again at least this often while records remain
_CLOSE_WAIT_S = 5.0  # how long close() waits for the reaper thread (a daemon: it cannot outlive the process)
# One row per vended role. ``due_at``: when the reaper acts next; ``ended``: 0 while the vend lives (at
# due_at its policy is deleted, which ends its session), 1 once it has ended (at due_at the role itself
# is deleted: only after the STS session would have lapsed, since moto answers a deleted role's session
# with HTTP 500 instead of AccessDenied, and a 500 is retried by clients as if it were a fault).
# ``reaper_keys``: the options (keys, endpoint) the role was made with, kept until the role is deleted,
# because the reaper must delete it even after its credential was dropped, or dropped and made again
# with other keys (vends.db is 0600 in the 0700 home, as secrets.db is).
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS vends (role TEXT PRIMARY KEY, credential TEXT, due_at REAL NOT NULL,"
    " ended INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS reaper_keys (role TEXT PRIMARY KEY, options TEXT NOT NULL)",
)
_REAPER_OPTIONS = ("key", "secret", "token", "endpoint_url", "region", "client_kwargs")


class VendingRefused(CatalogError, ValueError):
    """Storage this server cannot vend scoped credentials for (an s3 credential with no vending mode,
    an unsupported scheme); answered as a one-line 400."""


def lifetime_from_env(environ: dict[str, str] | None = None) -> float:
    """The vend lifetime in seconds from ``UC_JUPYTER_VEND_SECONDS`` (default 3600).

    Example:
        >>> lifetime_from_env({"UC_JUPYTER_VEND_SECONDS": "5"})
        5.0
    """
    text = (os.environ if environ is None else environ).get(LIFETIME_ENV, "").strip()
    if not text:
        return DEFAULT_LIFETIME_S
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 43200:
        raise ValueError(f"{LIFETIME_ENV}={text[:32]!r}: give seconds from 1 to 43200 (12 hours)")
    return value


def check_vending_options(options: dict[str, Any]) -> None:
    """Refuse (one line) a ``vending`` option this server does not know, and ``sts-session-policy``
    without ``role_arn``; called when a credential is created, so a bad one fails then, not at a vend.

    Example:
        >>> check_vending_options({"vending": "static"})
        >>> check_vending_options({"vending": "sts"})
        Traceback (most recent call last):
        uc_jupyter.ucserver.vendor.VendingRefused: unknown vending mode 'sts': use one of iam-role-per-vend, ...
    """
    mode = options.get("vending")
    if mode is not None and mode not in MODES:
        raise VendingRefused(f"unknown vending mode {str(mode)[:40]!r}: use one of {', '.join(MODES)}")
    if mode == "sts-session-policy" and not options.get("role_arn"):
        raise VendingRefused("vending mode sts-session-policy needs the option role_arn (the role to assume)")
    if mode == "iam-role-per-vend" and not (options.get("key") and options.get("secret")):
        # The reaper deletes the roles with these keys, read again from the credential: never the
        # server's environment, which may have changed by then.
        raise VendingRefused("vending mode iam-role-per-vend needs the options key and secret (an IAM user's keys)")


def end_vends_at_drop(catalog: object, credential: str) -> int:
    """After ``catalog`` dropped the storage credential ``credential`` itself (the CLI, embedded): end
    now the live vends a server over the same home made with it, as the server's own drop does;
    returns how many. Nothing to do for another kind of catalog (a remote server ends its own) or a
    home no server ever vended from. A failure is logged, not raised: the drop is done, and the
    reaper still ends those vends at their expiry with the keys kept for them.

    Example:
        >>> import tempfile
        >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
        >>> end_vends_at_drop(LocalCatalog(tempfile.mkdtemp()), "lake")
        0
    """
    from uc_jupyter.catalog.embedded.local import LocalCatalog

    if not isinstance(catalog, LocalCatalog) or not (catalog.root / "vends.db").exists():
        return 0
    try:
        return Vendor(catalog.root, reaper=False).end_vends(credential)
    except Exception:
        log.exception("storage credential %s was dropped, but its live vends could not be ended now", credential)
        return 0


def escape_iam(text: str) -> str:
    """``text`` as literal characters in an IAM ARN pattern: ``$``, ``*`` and ``?`` become ``${$}``,
    ``${*}`` and ``${?}`` (as UC OSS escapes them), so a key holding them widens nothing.

    Example:
        >>> escape_iam("a*b?c$d")
        'a${*}b${?}c${$}d'
    """
    return "".join("${" + ch + "}" if ch in "$*?" else ch for ch in text)


def _bucket_and_prefix(url: str) -> tuple[str, str]:
    canonical = canonical_location(url)
    if family_of(canonical) != "s3":
        raise VendingRefused(f"not an s3 URL: {canonical}")
    return bucket_and_key(canonical)


def s3_policy(url: str, *, write: bool) -> dict[str, Any]:
    """The IAM policy that allows reading (``write``: also writing) the objects under ``url``'s prefix
    and listing that prefix, nothing else: UC OSS's statements, with the prefix escaped (:func:`escape_iam`).

    Example:
        >>> policy = s3_policy("s3://lake/raw", write=True)
        >>> policy["Statement"][1]["Condition"]
        {'StringLike': {'s3:prefix': ['raw', 'raw/', 'raw/*']}}
    """
    bucket, prefix = _bucket_and_prefix(url)
    escaped = escape_iam(prefix)
    objects = (
        [f"arn:aws:s3:::{bucket}/{escaped}/*", f"arn:aws:s3:::{bucket}/{escaped}"]
        if prefix
        else [f"arn:aws:s3:::{bucket}/*"]
    )
    listed = [escaped, f"{escaped}/", f"{escaped}/*"] if prefix else ["*"]
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": list(_WRITE_ACTIONS if write else _READ_ACTIONS), "Resource": objects},
            {
                "Effect": "Allow",
                "Action": "s3:ListBucket",
                "Resource": f"arn:aws:s3:::{bucket}",
                "Condition": {"StringLike": {"s3:prefix": listed}},
            },
            {"Effect": "Allow", "Action": "s3:GetBucketLocation", "Resource": f"arn:aws:s3:::{bucket}"},
        ],
    }


def _public_options(options: dict[str, Any]) -> dict[str, str]:
    """What a client needs besides keys to reach the storage: the endpoint and the region."""
    given = options.get("client_kwargs")
    kwargs: dict[str, Any] = given if isinstance(given, dict) else {}
    out: dict[str, str] = {}
    endpoint = options.get("endpoint_url") or kwargs.get("endpoint_url")
    region = options.get("region") or kwargs.get("region_name")
    if endpoint:
        out["endpoint_url"] = str(endpoint)
    if region:
        out["region"] = str(region)
    return out


class Vendor:
    """Makes :class:`~uc_jupyter.catalog.wire.storage.Vended` credentials (see the module docstring).

    ``root`` is the catalog home (``vends.db`` lives there; the reaper reads credentials' keys from its
    secret store); ``clock`` gives epoch seconds (tests pass their own); ``reaper``: run the background
    reaper thread (tests call :meth:`reap` themselves instead).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        lifetime_s: float | None = None,
        clock: Callable[[], float] = time.time,
        reaper: bool = True,
    ) -> None:
        self.root = Path(root)
        self.lifetime_s = lifetime_from_env() if lifetime_s is None else float(lifetime_s)
        self.clock = clock
        self._records = SqliteStore(
            self.root / "vends.db", schema=_SCHEMA, remedy="move it away: roles it names may then outlive their vends"
        )
        os.chmod(self.root / "vends.db", 0o600)
        self._clients: dict[tuple[str, ...], Any] = {}
        self._lock = threading.Lock()
        self._reaper_on = reaper
        self._wake = threading.Event()
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        if reaper and self.pending(ended=True):
            self._start_reaper()  # roles a stopped server left: reap the stale ones now

    def __repr__(self) -> str:
        return f"Vendor({str(self.root)!r}, lifetime_s={self.lifetime_s})"

    # ----------------------------------------------------------------- vending
    def vend(self, url: str, options: dict[str, Any], *, write: bool, credential: str | None = None) -> Vended:
        """Credentials for ``url`` (read, or read and write) with the storage ``options`` of its
        location's credential; ``credential`` names it (the reaper finds its keys again by that name)."""
        canonical = canonical_location(url)
        expires_at = self.clock() + self.lifetime_s
        family = family_of(canonical)
        if family == "local":
            return Vended(canonical, expires_at)
        if family != "s3":
            scheme = canonical.partition("://")[0]
            raise VendingRefused(f"this server vends credentials for file:// and s3:// storage, not {scheme}://")
        check_vending_options(options)
        mode = options.get("vending") or ("sts-session-policy" if options.get("role_arn") else None)
        public = _public_options(options)
        if mode is None:
            raise VendingRefused(
                f"the storage credential of {canonical} has no vending mode, so no scoped credentials can be made: "
                "an admin sets its option vending to iam-role-per-vend, sts-session-policy (with role_arn), "
                "or static (its own keys, unscoped: test servers only)"
            )
        if mode == "static":
            if not options.get("key"):
                return Vended(canonical, expires_at, None, public)  # an anonymous store: nothing to hand out
            session = AwsSession(str(options["key"]), str(options.get("secret", "")), options.get("token"))
            return Vended(canonical, expires_at, session, public)
        policy = json.dumps(s3_policy(canonical, write=write), separators=(",", ":"))
        if mode == "sts-session-policy":
            # AWS enforces the session's own expiry (at least 900 s): that is the one to tell the client.
            session, sts_expiry = self._assume(options, str(options["role_arn"]), policy)
            return Vended(canonical, sts_expiry, session, public)
        return Vended(canonical, expires_at, self._role_per_vend(options, credential, policy, expires_at), public)

    def _role_per_vend(
        self, options: dict[str, Any], credential: str | None, policy: str, expires_at: float
    ) -> AwsSession:
        if credential is None:  # the reaper could not find the keys to delete the role with
            raise VendingRefused("iam-role-per-vend needs the storage credential's name to record the role by")
        iam = self._client("iam", options)
        caller = self._client("sts", options).get_caller_identity()["Arn"]
        role = ROLE_PREFIX + uuid.uuid4().hex
        trust = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Principal": {"AWS": caller}, "Action": "sts:AssumeRole"}],
        }
        # Recorded before the role exists: a crash after create_role leaves a record the reaper clears.
        keys = json.dumps({k: options[k] for k in _REAPER_OPTIONS if k in options}, sort_keys=True)
        with self._records.transaction() as conn:
            conn.execute("INSERT INTO vends VALUES (?, ?, ?, 0)", (role, credential, expires_at))
            conn.execute("INSERT INTO reaper_keys VALUES (?, ?)", (role, keys))
        try:
            most = min(43200, max(3600, self._duration_s()))  # a role's sessions may last at most this long
            made = iam.create_role(RoleName=role, AssumeRolePolicyDocument=json.dumps(trust), MaxSessionDuration=most)
            arn = made["Role"]["Arn"]
            iam.put_role_policy(RoleName=role, PolicyName="scope", PolicyDocument=policy)
            session, _ = self._assume(options, arn, None)
        except BaseException:
            self._remove_role(iam, role)  # nothing half-made: no role outlives a failed vend
            raise
        self._start_reaper()
        return session

    def _assume(self, options: dict[str, Any], role_arn: str, policy: str | None) -> tuple[AwsSession, float]:
        asked: dict[str, Any] = {
            "RoleArn": role_arn,
            "RoleSessionName": "uc-" + uuid.uuid4().hex[:16],
            "DurationSeconds": self._duration_s(),
        }
        if policy is not None:
            asked["Policy"] = policy
        if options.get("external_id"):
            asked["ExternalId"] = str(options["external_id"])
        got = self._client("sts", options).assume_role(**asked)["Credentials"]
        session = AwsSession(got["AccessKeyId"], got["SecretAccessKey"], got["SessionToken"])
        return session, got["Expiration"].timestamp()

    def _duration_s(self) -> int:
        return max(_STS_MINIMUM_S, int(self.lifetime_s))  # AWS's least; the reaper ends role vends sooner

    def _client(self, service: str, options: dict[str, Any]) -> Any:
        """A boto3 client for ``service`` with the credential's keys, made once per keys and endpoint
        (a client costs tens of milliseconds to build; boto3 clients are thread-safe)."""
        public = _public_options(options)
        key = (service, str(options.get("key", "")), str(options.get("secret", "")), public.get("endpoint_url", ""))
        with self._lock:
            if key not in self._clients:
                import boto3  # only a server that vends for s3 pays for it

                self._clients[key] = boto3.session.Session().client(
                    service,
                    aws_access_key_id=options.get("key") or None,
                    aws_secret_access_key=options.get("secret") or None,
                    aws_session_token=options.get("token") or None,
                    endpoint_url=public.get("endpoint_url"),
                    region_name=public.get("region", "us-east-1"),
                )
            return self._clients[key]

    # ----------------------------------------------------------------- reaping
    def pending(self, *, ended: bool = False) -> list[tuple[str, float]]:
        """The live vends' roles and expiry (epoch seconds), soonest first; ``ended``: also the roles
        of ended vends, with when they are deleted."""
        with self._records.transaction(write=False) as conn:
            rows = conn.execute(
                "SELECT role, due_at FROM vends WHERE ended = 0 OR ? ORDER BY due_at", (ended,)
            ).fetchall()
        return [(r[0], float(r[1])) for r in rows]

    def reap(self) -> int:
        """End every live vend that has expired by :attr:`clock` (delete its role's policy: its
        session is refused from then on) and delete the roles of vends ended a session ago; returns
        how many vends it ended. A role whose IAM call fails stays recorded for the next pass (and is
        logged): a role is forgotten only once it is deleted."""
        with self._records.transaction(write=False) as conn:
            due = conn.execute(
                "SELECT role, credential, ended FROM vends WHERE due_at <= ?", (self.clock(),)
            ).fetchall()
        return self._end(due)

    def end_vends(self, credential: str) -> int:
        """End now every live vend made with the storage credential ``credential`` (called when it is
        dropped: what it vended should not outlive it); returns how many it ended. One it cannot end
        now stays recorded, and the reaper ends it at its expiry with the keys it was made with.

        Example:
            >>> import tempfile
            >>> Vendor(tempfile.mkdtemp(), reaper=False).end_vends("lake")
            0
        """
        with self._records.transaction(write=False) as conn:
            live = conn.execute(
                "SELECT role, credential, ended FROM vends WHERE credential = ? AND ended = 0", (credential,)
            )
            due = live.fetchall()
        ended = self._end(due)
        if due:
            self._start_reaper()  # the ended roles are deleted one session later
        return ended

    def _keys(self, role: str, credential: str | None, secrets: SecretStore) -> dict[str, Any]:
        """The options to delete ``role`` with: those it was made with, else (a record written before
        they were kept) its credential's, while that credential exists."""
        with self._records.transaction(write=False) as conn:
            row = conn.execute("SELECT options FROM reaper_keys WHERE role = ?", (role,)).fetchone()
        if row is not None:
            return dict(json.loads(row[0]))
        return secrets.get("credential", credential) if credential else {}

    def _end(self, due: list[Any]) -> int:
        if not due:
            return 0
        ended = 0
        secrets = SecretStore(self.root)
        for role, credential, was_ended in due:
            options = self._keys(role, credential, secrets)
            if not options.get("key"):
                log.warning(
                    "cannot delete vended role %s: the keys of storage credential %s are gone", role, credential
                )
                continue
            iam = self._client("iam", options)
            try:
                if was_ended:
                    self._remove_role(iam, role, quiet=False)
                    continue
                with contextlib.suppress(iam.exceptions.NoSuchEntityException):
                    iam.delete_role_policy(RoleName=role, PolicyName="scope")
            except Exception as exc:  # the IAM endpoint is down: try again on the next pass
                log.warning("cannot end vended role %s yet: %s", role, exc)
                continue
            with self._records.transaction() as conn:
                later = self.clock() + self._duration_s()
                conn.execute("UPDATE vends SET ended = 1, due_at = ? WHERE role = ?", (later, role))
            ended += 1
        return ended

    def _remove_role(self, iam: Any, role: str, *, quiet: bool = True) -> None:
        """Delete ``role``'s policy and the role (absent ones are fine), then its record."""
        try:
            with contextlib.suppress(iam.exceptions.NoSuchEntityException):
                iam.delete_role_policy(RoleName=role, PolicyName="scope")
            with contextlib.suppress(iam.exceptions.NoSuchEntityException):
                iam.delete_role(RoleName=role)
        except Exception:
            if not quiet:
                raise
            log.exception("cannot delete role %s of a failed vend; the reaper tries again", role)
            return
        with self._records.transaction() as conn:
            conn.execute("DELETE FROM vends WHERE role = ?", (role,))
            conn.execute("DELETE FROM reaper_keys WHERE role = ?", (role,))

    def close(self) -> None:
        """Stop the reaper thread (a server stopping): what it has not reaped yet stays in ``vends.db``
        and the next vendor over this home reaps it. Vends made after this get no reaper."""
        self._closed.set()
        self._wake.set()
        with self._lock:
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=_CLOSE_WAIT_S)  # a reap under way may be waiting on storage

    def _start_reaper(self) -> None:
        if not self._reaper_on or self._closed.is_set():
            return
        with self._lock:
            if self._thread is not None and self._thread.is_alive():
                self._wake.set()  # a new, maybe sooner, expiry
                return
            self._thread = threading.Thread(target=self._reap_loop, name="uc-vend-reaper", daemon=True)
            self._thread.start()

    def _reap_loop(self) -> None:
        # A daemon thread: at process exit the records stay in vends.db and the next server reaps them.
        while not self._closed.is_set():
            try:
                self.reap()
                pending = self.pending(ended=True)
            except Exception:
                log.exception("the vend reaper failed; it tries again")
                pending = [("?", self.clock() + _REAPER_IDLE_S)]
            if not pending:
                with self._lock:  # checked again under the lock a new vend takes to find the thread
                    if not self.pending(ended=True):
                        self._thread = None
                        return
                continue
            wait = min(max(pending[0][1] - self.clock(), 0.05), _REAPER_IDLE_S)
            self._wake.wait(wait)
            self._wake.clear()
