"""The storage-model routes of the Unity Catalog API: ``/credentials`` and ``/external-locations``.

Every check is the embedded catalog's (:mod:`uc_jupyter.catalog.embedded.external`): creating a credential
needs CREATE STORAGE CREDENTIAL on the metastore, a location CREATE EXTERNAL LOCATION on the metastore
and on its credential; a principal sees only the credentials and locations it owns, holds a grant on,
or (admins) all, and one it may not see is NOT_FOUND, exactly like a missing one. These functions only
translate bodies (:mod:`uc_jupyter.catalog.wire.storage`): a credential's option *values* never leave
the server, except ``role_arn``, shown as UC's ``aws_iam_role.role_arn``.

Example:
    >>> import tempfile
    >>> from uc_jupyter.catalog.embedded.local import LocalCatalog
    >>> from uc_jupyter.ucserver.routes_data import Call
    >>> cat = LocalCatalog(tempfile.mkdtemp())
    >>> body = {"name": "lake", "uc_jupyter_storage_options": {"key": "AKIA"}}
    >>> made = create_credential(cat, Call(body=body, secure=True))
    >>> made["name"], made["uc_jupyter_option_names"], "AKIA" in str(made)
    ('lake', ['key'], False)
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from uc_jupyter.catalog import CredentialInfo, NotFound
from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.catalog.embedded.secrets import SecretStore
from uc_jupyter.catalog.wire.errors import WireError
from uc_jupyter.catalog.wire.shapes import dotted_name, page, parse_bool
from uc_jupyter.catalog.wire.storage import (
    CREATE_CREDENTIAL,
    CREATE_EXTERNAL_LOCATION,
    OPTIONS_FIELD,
    credential_json,
    credential_options,
    location_json,
)
from uc_jupyter.ucserver.routes_data import Call, Route
from uc_jupyter.ucserver.vendor import Vendor, check_vending_options

__all__ = ["routes", "secure_transport"]

log = logging.getLogger(__name__)

Json = dict[str, Any]


def secure_transport(scheme: str, client_host: str | None) -> bool:
    """May secrets travel in this request: https, or a client on this machine (a loopback address)?
    ``scheme`` and ``client_host`` are the ASGI scope's, after uvicorn applied the X-Forwarded-*
    headers of a proxy on this machine (the only one it trusts), so a TLS proxy in front is https.

    Example:
        >>> [secure_transport(*asked) for asked in (("http", "127.0.0.1"), ("http", "::1"), ("https", "192.0.2.9"))]
        [True, True, True]
        >>> secure_transport("http", "::ffff:127.0.0.1"), secure_transport("http", "::ffff:192.0.2.9")
        (True, False)
        >>> secure_transport("http", "192.0.2.9"), secure_transport("http", None), secure_transport("http", "name")
        (False, False, False)
    """
    if scheme == "https":
        return True
    if client_host is None:
        return False
    try:
        address = ipaddress.ip_address(client_host)
    except ValueError:  # not an address (a unix socket's peer, a test client's name): not known to be local
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped  # an IPv4 client of a dual-stack socket (serve --host ::)
    return address.is_loopback


def _flat(text: str, what: str) -> str:
    """A credential's or location's wire name as ours: one part (UC names hold no dots)."""
    if "." in text:
        raise WireError("INVALID_ARGUMENT", f"invalid {what} name {text[:300]!r}: one part, without dots")
    return dotted_name(text)


def _no_force(call: Call, what: str) -> None:
    # UC's force=true deletes what still depends on the object; here the dependents are dropped first.
    if parse_bool(call.query.get("force"), "force"):
        raise WireError("INVALID_ARGUMENT", f"force=true is not supported: drop what uses the {what} first")


def _listed(key: str, items: list[Json], call: Call, listing: str) -> Json:
    chosen = page(
        items, [i["name"] for i in items], listing, call.query.get("max_results"), call.query.get("page_token")
    )
    body: Json = {key: chosen.items}
    if chosen.next_page_token:
        body["next_page_token"] = chosen.next_page_token
    return body


# ----------------------------------------------------------------- credentials
def _credential_json(cat: LocalCatalog, info: CredentialInfo, store: SecretStore | None = None) -> Json:
    role_arn = None
    if "role_arn" in info.option_names:
        role_arn = (store or SecretStore(cat.root)).get("credential", info.name).get("role_arn")
    return credential_json(info, role_arn if isinstance(role_arn, str) else None)


def create_credential(cat: LocalCatalog, call: Call) -> Json:
    """POST /credentials: UC's fields, plus the write-only ``uc_jupyter_storage_options``."""
    body = call.body
    options = credential_options(body)
    if body.get(OPTIONS_FIELD) and not call.secure:
        raise WireError(
            "INVALID_ARGUMENT",
            f"{OPTIONS_FIELD} carries storage secrets and this request came over plain http from another machine: "
            "treat those keys as exposed, and send new ones over https or from the server's own machine, or "
            "create the credential there with `uc-jupyter catalog create credential`",
        )
    check_vending_options(options)  # a mode the vendor cannot use fails now, not at the first vend
    info = cat.create_storage_credential(_flat(body["name"], "credential"), options, comment=body.get("comment"))
    return _credential_json(cat, info)


def list_credentials(cat: LocalCatalog, call: Call) -> Json:
    purpose = call.query.get("purpose")
    if purpose not in (None, "STORAGE", "SERVICE"):
        raise WireError("INVALID_ARGUMENT", f"purpose must be STORAGE or SERVICE, got {purpose[:32]!r}")
    infos = [] if purpose == "SERVICE" else cat.list_storage_credentials()  # only storage credentials here
    store = SecretStore(cat.root) if infos else None  # one store for the whole page, not one per credential
    return _listed("credentials", [_credential_json(cat, i, store) for i in infos], call, "credentials")


def get_credential(cat: LocalCatalog, call: Call) -> Json:
    return _credential_json(cat, cat.get_storage_credential(_flat(call.path["name"], "credential")))


def delete_credential(vendor: Vendor, cat: LocalCatalog, call: Call) -> Json:
    """DELETE /credentials/{name}: the catalog's drop (its checks), then the vends made with it end at
    once: an admin dropping a credential means "nothing may use these keys any more", and waiting up
    to a vend lifetime would be a surprise; refusing the drop until the last vend expires would keep
    a credential the admin may be dropping because it leaked."""
    _no_force(call, "credential")
    name = _flat(call.path["name"], "credential")
    cat.drop_storage_credential(name)
    try:
        vendor.end_vends(name)
    except Exception:  # the drop is done and must say so; the reaper ends them at expiry with the kept keys
        log.exception("storage credential %s was dropped, but its live vends could not be ended now", name)
    return {}


# ----------------------------------------------------------------- external locations
def _location_json(cat: LocalCatalog, info: Any) -> Json:
    credential = None
    if info.credential_name is not None:
        try:
            credential = cat.get_storage_credential(info.credential_name)
        except NotFound:  # the caller may see the location but not its credential: no credential_id then
            credential = None
    return location_json(info, credential)


def create_external_location(cat: LocalCatalog, call: Call) -> Json:
    """POST /external-locations; ``credential_name`` may be left out (the server's own environment)."""
    body = call.body
    credential = body.get("credential_name")
    info = cat.create_external_location(
        _flat(body["name"], "external location"),
        body["url"],
        None if credential is None else _flat(credential, "credential"),
        comment=body.get("comment"),
    )
    return _location_json(cat, info)


def list_external_locations(cat: LocalCatalog, call: Call) -> Json:
    items = [_location_json(cat, i) for i in cat.list_external_locations()]
    return _listed("external_locations", items, call, "external_locations")


def get_external_location(cat: LocalCatalog, call: Call) -> Json:
    return _location_json(cat, cat.get_external_location(_flat(call.path["name"], "external location")))


def delete_external_location(cat: LocalCatalog, call: Call) -> Json:
    _no_force(call, "external location")
    cat.drop_external_location(_flat(call.path["name"], "external location"))
    return {}


def routes(vendor: Vendor) -> tuple[Route, ...]:
    """The credential and external-location routes; dropping a credential ends ``vendor``'s vends of it.

    Example:
        >>> import tempfile
        >>> len(routes(Vendor(tempfile.mkdtemp(), reaper=False)))
        8
    """
    return (
        Route("GET", "/credentials", list_credentials),
        Route("POST", "/credentials", create_credential, CREATE_CREDENTIAL),
        Route("GET", "/credentials/{name}", get_credential),
        Route("DELETE", "/credentials/{name}", lambda cat, call: delete_credential(vendor, cat, call)),
        Route("GET", "/external-locations", list_external_locations),
        Route("POST", "/external-locations", create_external_location, CREATE_EXTERNAL_LOCATION),
        Route("GET", "/external-locations/{name}", get_external_location),
        Route("DELETE", "/external-locations/{name}", delete_external_location),
    )
