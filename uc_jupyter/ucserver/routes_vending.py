"""The temporary-credential routes: ``POST /temporary-{table,volume,path}-credentials``.

Each one checks through the embedded catalog, as the request's principal, then asks the
:class:`~uc_jupyter.ucserver.vendor.Vendor` for credentials scoped to that one object:

- table ``{table_id, operation: READ | READ_WRITE}``: SELECT (READ_WRITE: MODIFY) through
  :meth:`LocalCatalog.resolve_table`, with USE CATALOG and USE SCHEMA;
- volume ``{volume_id, operation: READ_VOLUME | WRITE_VOLUME}``: READ VOLUME (WRITE VOLUME) through
  :meth:`LocalCatalog.resolve_volume_path`;
- path ``{url, operation: PATH_READ | PATH_READ_WRITE | PATH_CREATE_TABLE}``: READ FILES (and WRITE
  FILES) on the external location holding it, never inside a registered table or volume (those go
  through their own privileges); PATH_CREATE_TABLE: CREATE EXTERNAL TABLE on the location and storage
  that overlaps no table or volume, for a client about to write a new external table there.

A write vend for s3 storage also needs the read privilege (SELECT, READ VOLUME, READ FILES): its keys
read too (a Delta writer reads the log; the write policy holds ``s3:GetO*``), and write keys must not
be a way to read what the caller may not. Local storage vends no key: there, as in the embedded
catalog, the write privilege alone is checked.

Ids are UC's: the caller first GETs the table or volume. An id that names nothing and an id of an
object the caller may neither see nor use as asked answer the same 403 ``PERMISSION_DENIED``, as Unity
Catalog answers (``no credentials for volume id 'X': ...``), so ids are no oracle and clients written
for UC get its status; a caller who sees the object but lacks the privilege gets the 403 that names it,
and one who holds the privilege gets credentials even where it does not make the object visible
(WRITE VOLUME alone), as the embedded catalog's resolve_* allow. A malformed id,
operation or URL is a one-line 400.

What is vended is made with the options of the storage credential of the external location holding
the storage, never with a table's or volume's own storage options (its creator's choice: merged in,
a ``vending`` option there would turn a credential that vends nothing into one that hands out its
own keys).

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> from uc_jupyter.ucserver.vendor import Vendor
    >>> home = tempfile.mkdtemp()
    >>> [r.path for r in routes(Vendor(home, reaper=False))]
    ['/temporary-table-credentials', '/temporary-volume-credentials', '/temporary-path-credentials']
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from uc_jupyter.catalog import NotFound, PermissionDenied, ResolvedVolumePath
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.rules.names import VolumePath, parse_name
from uc_jupyter.catalog.rules.privileges import SecurableKind
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.storage import (
    PATH_OPERATIONS,
    TABLE_OPERATIONS,
    TEMPORARY_PATH,
    TEMPORARY_TABLE,
    TEMPORARY_VOLUME,
    VOLUME_OPERATIONS,
    operation,
    temporary_credentials_json,
)
from uc_jupyter.storage.locations import bucket_and_key, canonical_location, family_of
from uc_jupyter.ucserver.routes_data import Call, Route
from uc_jupyter.ucserver.vendor import Vendor

__all__ = ["routes"]

Json = dict[str, Any]
T = TypeVar("T")


def _checked_id(text: str, field: str) -> str:
    try:
        return str(uuid.UUID(text))
    except ValueError:
        raise WireError(
            "INVALID_ARGUMENT", f"{field} must be an id as GET gives it (a UUID), got {text[:64]!r}"
        ) from None


def _refused(kind: SecurableKind, object_id: str) -> WireError:
    """The one answer for an id that names nothing and for one the caller may neither see nor use."""
    return WireError(
        "PERMISSION_DENIED",
        f"no credentials for {kind.label} id {object_id[:64]!r}: it is not one you may use, or there is none",
    )


def _resolved_by_id(
    cat: LocalCatalog, kind: SecurableKind, object_id: str, get: Callable[[str], Any], resolve: Callable[[str], T]
) -> T | None:
    """``resolve(name)`` (the privilege check and where the storage is) for the ``kind`` object with
    ``object_id``; None when the id names nothing in the tree (e.g. a staging table's).

    :meth:`LocalCatalog.securable_by_id` checks no privilege, so: an id of another kind, and an object
    the caller may neither see (``get``) nor use as asked (``resolve``), are the same 403 as a
    missing id; a caller who sees it but lacks the privilege gets the 403 naming it; one who holds the
    privilege without seeing the object (WRITE VOLUME alone, say) gets credentials, as embedded."""
    try:
        found_kind, name = cat.securable_by_id(object_id)
    except NotFound:
        return None
    if found_kind is not kind:
        raise _refused(kind, object_id)
    try:
        get(name)
        seen = True
    except (NotFound, PermissionDenied):
        seen = False
    try:
        return resolve(name)
    except (NotFound, PermissionDenied):
        if seen:
            raise
        raise _refused(kind, object_id) from None


def _vend_object(vendor: Vendor, cat: LocalCatalog, url: str, *, write: bool) -> Json:
    """Credentials for a table's or volume's storage ``url``, made with the options of the storage
    credential of the external location holding it and nothing else: an object's own storage options
    (which its creator chose) are merged over those when the catalog opens it, but here they could
    name a vending mode (``static``: the credential's own keys), a role or an endpoint the admin never
    chose. Storage in no location with a credential (managed, or the server's own environment)
    vends with no options: file:// its URL, s3 a one-line refusal."""
    # The caller may not see the location: its privilege was checked on the object. Local storage
    # vends no secret, whatever holds it.
    credential = None if family_of(url) == "local" else cat.credential_of_storage(url)
    return temporary_credentials_json(
        vendor.vend(url, _credential_options(cat, credential), write=write, credential=credential)
    )


def _credential_options(cat: LocalCatalog, credential: str | None) -> dict[str, Any]:
    """The stored options of ``credential`` as given, the vendor's own (``vending``, ``role_arn``...)
    included, which the catalog leaves out of what it opens storage with; read as a metastore admin
    (only metastore admins may read them), after the caller passed the object's own check. {} for no
    credential, or one dropped meanwhile (its name is not for the caller: s3 is then refused)."""
    admin = _admin_of(cat) if credential is not None else None
    if credential is None or admin is None:
        return {}
    with cat.as_principal(admin):
        try:
            return cat.storage_credential_options(credential)
        except NotFound:
            return {}


def _admin_of(cat: LocalCatalog) -> str | None:
    return next((p.name for p in cat.list_principals() if p.admin), None)


def _keys_read_too(url: str) -> bool:
    """Do write credentials for ``url`` read as well? For s3, yes: a Delta writer must read the log,
    so the write policy holds ``s3:GetO*`` (as UC's does), and keys that read need the read privilege
    (SELECT, READ VOLUME, READ FILES) besides the write one, as UC asks SELECT + MODIFY. Local
    storage vends no key, so its writes keep the embedded catalog's rule (the write privilege)."""
    return family_of(url) != "local"


def table_credentials(vendor: Vendor, cat: LocalCatalog, call: Call) -> Json:
    write = TABLE_OPERATIONS[operation(call.body, TABLE_OPERATIONS, TEMPORARY_TABLE)]
    table_id = _checked_id(call.body["table_id"], "table_id")
    resolved = _resolved_by_id(
        cat, SecurableKind.TABLE, table_id, cat.get_table, lambda name: cat.resolve_table(name, write=write)
    )
    if resolved is None:
        try:
            resolved = cat.resolve_table_id(table_id, write=write)  # a staging table's id: for its creator only
        except NotFound:
            raise _refused(SecurableKind.TABLE, table_id) from None
    elif write and _keys_read_too(resolved.storage_location):
        _resolved_by_id(cat, SecurableKind.TABLE, table_id, cat.get_table, lambda name: cat.resolve_table(name))
    return _vend_object(vendor, cat, resolved.storage_location, write=write)


def volume_credentials(vendor: Vendor, cat: LocalCatalog, call: Call) -> Json:
    write = VOLUME_OPERATIONS[operation(call.body, VOLUME_OPERATIONS, TEMPORARY_VOLUME)]
    volume_id = _checked_id(call.body["volume_id"], "volume_id")

    def resolve(name: str, write: bool) -> ResolvedVolumePath:
        return cat.resolve_volume_path(str(VolumePath(parse_name(name, levels=(3,)))), write=write)

    resolved = _resolved_by_id(cat, SecurableKind.VOLUME, volume_id, cat.get_volume, lambda n: resolve(n, write))
    if resolved is None:
        raise _refused(SecurableKind.VOLUME, volume_id)
    if write and _keys_read_too(resolved.url):
        _resolved_by_id(cat, SecurableKind.VOLUME, volume_id, cat.get_volume, lambda n: resolve(n, False))
    return _vend_object(vendor, cat, resolved.url, write=write)


def path_credentials(vendor: Vendor, cat: LocalCatalog, call: Call) -> Json:
    asked = operation(call.body, PATH_OPERATIONS, TEMPORARY_PATH)
    url = canonical_location(call.body["url"])  # InvalidLocation: a one-line 400
    if family_of(url) == "s3" and not bucket_and_key(url)[1]:
        raise WireError("INVALID_ARGUMENT", f"{url} is a bucket root: ask for a path inside an external location")
    if asked == "PATH_CREATE_TABLE":  # the checks create_table makes at registration, made before the write
        new = cat.external_table_storage(url)
        resolved_url, credential = new.url, new.location.credential_name
    else:
        resolved = cat.resolve_storage_path(url, write=PATH_OPERATIONS[asked])
        if PATH_OPERATIONS[asked] and _keys_read_too(resolved.url):
            cat.resolve_storage_path(url)  # READ FILES as well
        resolved_url, credential = resolved.url, resolved.location.credential_name
    options = _credential_options(cat, credential)
    return temporary_credentials_json(
        vendor.vend(resolved_url, options, write=PATH_OPERATIONS[asked], credential=credential)
    )


def routes(vendor: Vendor) -> tuple[Route, ...]:
    """The three routes, vending with ``vendor``."""

    def bind(handler: Callable[[Vendor, LocalCatalog, Call], Json]) -> Callable[[LocalCatalog, Call], Json]:
        return lambda cat, call: handler(vendor, cat, call)

    return (
        Route("POST", "/temporary-table-credentials", bind(table_credentials), TEMPORARY_TABLE),
        Route("POST", "/temporary-volume-credentials", bind(volume_credentials), TEMPORARY_VOLUME),
        Route("POST", "/temporary-path-credentials", bind(path_credentials), TEMPORARY_PATH),
    )
