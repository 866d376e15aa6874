"""Drive ``uc-jupyter serve`` with the official Unity Catalog client (``unitycatalog-client`` 0.7.0).

Run by ``.venv-ucclient``'s Python (``make ucclient`` builds it), never by ``.venv``'s: the client's pins
would downgrade aiohttp, pydantic, typing_extensions and urllib3 there. So this script imports only the
official client and the standard library, nothing of ``uc_jupyter``. It runs one fixed scenario over
catalogs, schemas, volumes and tables (tables it reads, registers and deletes: the test writes the
Delta tables first, two in ``TABLE_CATALOG`` and one at ``UC_TABLE_URL`` to register; an external
volume goes to ``UC_VOLUME_URL``), comment updates, and a managed table made through a staging table, as a
Unity Catalog user would, and prints one JSON line per step on stdout, in order, after one naming the
client's version: what the client parsed (the model's class and ``to_dict()``), or the exception it
raised (its class, the HTTP status and the error body's ``error_code`` and ``message``). It asserts
nothing: the test (``test_official_client.py``) reads the lines and checks them, so a failure shows
every step.

Example (tokens as ``uc-jupyter token create PRINCIPAL | tail -1`` prints them)::

    $ export UC_TOKEN=ucj_... UC_OTHER_TOKEN=ucj_...  # an admin's, and one of a principal without grants
    $ export UC_TABLE_URL=file:///data/ext/c UC_VOLUME_URL=file:///data/ext/v  # inside an external location
    $ .venv-ucclient/bin/python tests/ucserver/official_client_driver.py http://127.0.0.1:8080
    {"step": "client", "ok": true, "type": "version", "value": "0.7.0"}
    {"step": "create_catalog", "ok": true, "type": "CatalogInfo", "value": {"name": "interop", ...}}
    ...
    {"step": "get_missing_catalog", "ok": false, "exception": "NotFoundException", "status": 404,
     "error_code": "CATALOG_NOT_FOUND", "message": "..."}
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import sys
import time
import urllib.parse
import uuid
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

# From the defining modules: the package's __init__ re-exports them without __all__, which strict
# type checkers refuse.
from unitycatalog.client.api.catalogs_api import CatalogsApi
from unitycatalog.client.api.credentials_api import CredentialsApi
from unitycatalog.client.api.external_locations_api import ExternalLocationsApi
from unitycatalog.client.api.grants_api import GrantsApi
from unitycatalog.client.api.schemas_api import SchemasApi
from unitycatalog.client.api.tables_api import TablesApi
from unitycatalog.client.api.temporary_credentials_api import TemporaryCredentialsApi
from unitycatalog.client.api.volumes_api import VolumesApi
from unitycatalog.client.api_client import ApiClient
from unitycatalog.client.configuration import Configuration
from unitycatalog.client.exceptions import ApiException
from unitycatalog.client.models.aws_iam_role_request import AwsIamRoleRequest
from unitycatalog.client.models.column_info import ColumnInfo
from unitycatalog.client.models.column_type_name import ColumnTypeName
from unitycatalog.client.models.create_catalog import CreateCatalog
from unitycatalog.client.models.create_credential_request import CreateCredentialRequest
from unitycatalog.client.models.create_external_location import CreateExternalLocation
from unitycatalog.client.models.create_schema import CreateSchema
from unitycatalog.client.models.create_staging_table import CreateStagingTable
from unitycatalog.client.models.create_table import CreateTable
from unitycatalog.client.models.create_volume_request_content import CreateVolumeRequestContent
from unitycatalog.client.models.credential_purpose import CredentialPurpose
from unitycatalog.client.models.data_source_format import DataSourceFormat
from unitycatalog.client.models.generate_temporary_path_credential import GenerateTemporaryPathCredential
from unitycatalog.client.models.generate_temporary_table_credential import GenerateTemporaryTableCredential
from unitycatalog.client.models.generate_temporary_volume_credential import GenerateTemporaryVolumeCredential
from unitycatalog.client.models.path_operation import PathOperation
from unitycatalog.client.models.permissions_change import PermissionsChange
from unitycatalog.client.models.privilege import Privilege
from unitycatalog.client.models.securable_type import SecurableType
from unitycatalog.client.models.table_operation import TableOperation
from unitycatalog.client.models.table_type import TableType
from unitycatalog.client.models.update_catalog import UpdateCatalog
from unitycatalog.client.models.update_permissions import UpdatePermissions
from unitycatalog.client.models.update_schema import UpdateSchema
from unitycatalog.client.models.update_volume_request_content import UpdateVolumeRequestContent
from unitycatalog.client.models.volume_operation import VolumeOperation
from unitycatalog.client.models.volume_type import VolumeType

API_PATH = "/api/2.1/unity-catalog"
DISTRIBUTION = "unitycatalog-client"
# The names the scenario creates; the test imports nothing from here (other venv), so it repeats them.
CATALOG = "interop"
COMMENT = "made by the official client"
SCHEMA_COMMENT = "features"
VOLUME_COMMENT = "images for training"
TABLE_CATALOG = "interop_tables"  # made by the test before the run, with tables "a" and "b" in schema "s"
OUTSIDER = "outsider"  # UC_OTHER_TOKEN's principal
MAX_PAGES = 50  # a server that always returns a next_page_token must not loop forever


def _client(url: str, token: str | None) -> ApiClient:
    """An ApiClient for ``url`` sending ``token``. The client sends no token by itself:
    ``Configuration(access_token=...)`` is ignored (no operation has auth settings), so the bearer
    token goes in as a default header."""
    config = Configuration(host=url.rstrip("/") + API_PATH)
    if token is None:
        return ApiClient(config)
    return ApiClient(config, header_name="Authorization", header_value=f"Bearer {token}")


def _emit(line: dict[str, Any]) -> None:
    print(json.dumps(line, default=str), flush=True)


async def _step(name: str, call: Callable[[], Awaitable[Any]]) -> None:
    """Run one call and print what came of it; every exception is a result, not the end of the run."""
    try:
        value = await call()
    except ApiException as e:
        _emit({"step": name, "ok": False, **_error(e)})
        return
    except Exception as e:  # e.g. pydantic's ValidationError: the response did not parse
        # pydantic's message spans lines (model, field, what was wrong): keep them all, on one line.
        text = " | ".join(part.strip() for part in str(e).splitlines() if part.strip())
        _emit({"step": name, "ok": False, "exception": type(e).__name__, "message": text[:500]})
        return
    _emit({"step": name, "ok": True, **_value(value)})


def _value(value: Any) -> dict[str, Any]:
    if hasattr(value, "to_dict"):  # a parsed model
        return {"type": type(value).__name__, "value": value.to_dict()}
    return {"type": type(value).__name__, "value": value}  # deletes: the body as the client decoded it


def _error(e: ApiException) -> dict[str, Any]:
    """The exception as a line; the client does not parse error bodies, so this does."""
    out: dict[str, Any] = {"exception": type(e).__name__, "status": e.status}
    try:
        body = json.loads(e.body) if e.body else None
    except ValueError:
        body = None
    if isinstance(body, dict):
        out["error_code"] = body.get("error_code")
        out["message"] = body.get("message")
    else:
        out["body"] = (e.body or "")[:200]
    return out


async def _pages(list_page: Callable[[str | None], Awaitable[Any]], items: str) -> dict[str, Any]:
    """Every page of a listing, following ``next_page_token`` until the server gives none."""
    pages: list[dict[str, Any]] = []
    token: str | None = None
    for _ in range(MAX_PAGES):
        page = await list_page(token)
        token = page.next_page_token
        pages.append({"names": [item.name for item in getattr(page, items) or []], "next_page_token": token})
        if not token:
            return {"pages": pages}
    raise RuntimeError(f"still a next_page_token after {MAX_PAGES} pages")


async def scenario(url: str, token: str, other_token: str, table_url: str, volume_url: str) -> None:
    """The steps, in order (see the module docstring), after a line naming the client's version."""
    _emit({"step": "client", "ok": True, "type": "version", "value": importlib.metadata.version(DISTRIBUTION)})
    async with _client(url, token) as client:
        catalogs, schemas = CatalogsApi(client), SchemasApi(client)
        # Catalogs: three, so that pages of one need two tokens.
        await _step("create_catalog", lambda: catalogs.create_catalog(CreateCatalog(name=CATALOG, comment=COMMENT)))
        for suffix in ("b", "c"):
            create = partial(catalogs.create_catalog, CreateCatalog(name=f"{CATALOG}_{suffix}"))
            await _step(f"create_catalog_{suffix}", create)
        await _step("get_catalog", lambda: catalogs.get_catalog(CATALOG))
        await _step("list_catalogs", lambda: catalogs.list_catalogs())
        # 0 asks for the server's own page size (the spec's rule), like giving none.
        await _step("list_catalogs_max_results_zero", lambda: catalogs.list_catalogs(max_results=0))
        await _step(
            "list_catalogs_paged",
            lambda: _pages(lambda t: catalogs.list_catalogs(page_token=t, max_results=1), "catalogs"),
        )
        # Schemas: two in the catalog.
        await _step(
            "create_schema",
            lambda: schemas.create_schema(CreateSchema(name="ml", catalog_name=CATALOG, comment=SCHEMA_COMMENT)),
        )
        await _step("create_schema_b", lambda: schemas.create_schema(CreateSchema(name="raw", catalog_name=CATALOG)))
        await _step("get_schema", lambda: schemas.get_schema(f"{CATALOG}.ml"))
        await _step("list_schemas", lambda: schemas.list_schemas(catalog_name=CATALOG))
        await _step(
            "list_schemas_paged",
            lambda: _pages(
                lambda t: schemas.list_schemas(catalog_name=CATALOG, page_token=t, max_results=1), "schemas"
            ),
        )
        await _volumes(VolumesApi(client), volume_url)
        await _tables(TablesApi(client), table_url)
        await _updates(catalogs, schemas, VolumesApi(client))
        await _managed_table(TablesApi(client), TemporaryCredentialsApi(client))
        await _storage(client, volume_url)
        # A principal with no grants: sees none of them, may do nothing to them.
        async with _client(url, other_token) as other_client:
            other = CatalogsApi(other_client)
            await _step("other_list_catalogs", lambda: other.list_catalogs())
            await _step("other_get_catalog", lambda: other.get_catalog(CATALOG))
            await _step("other_create_catalog", lambda: other.create_catalog(CreateCatalog(name="hers")))
            await _step("other_delete_catalog", lambda: other.delete_catalog(CATALOG, force=True))
            await _step("other_list_volumes", lambda: VolumesApi(other_client).list_volumes(CATALOG, "raw"))
            await _step("other_get_table", lambda: TablesApi(other_client).get_table(f"{TABLE_CATALOG}.s.a"))
            await _permissions(GrantsApi(client), GrantsApi(other_client))
        # Errors, as the client surfaces them.
        await _step("get_missing_catalog", lambda: catalogs.get_catalog("nope"))
        await _step("create_duplicate_catalog", lambda: catalogs.create_catalog(CreateCatalog(name=CATALOG)))
        await _step("get_missing_schema", lambda: schemas.get_schema(f"{CATALOG}.nope"))
        await _step(
            "create_duplicate_schema", lambda: schemas.create_schema(CreateSchema(name="ml", catalog_name=CATALOG))
        )
        await _step(
            "create_schema_in_missing_catalog",
            lambda: schemas.create_schema(CreateSchema(name="ml", catalog_name="nope")),
        )
        await _step("list_catalogs_negative_max_results", lambda: catalogs.list_catalogs(max_results=-1))
        await _step("delete_nonempty_catalog", lambda: catalogs.delete_catalog(CATALOG))
        # Deletes: a schema, then the catalog with the schema left in it (force), then the others.
        await _step("delete_schema", lambda: schemas.delete_schema(f"{CATALOG}.ml"))
        await _step("get_deleted_schema", lambda: schemas.get_schema(f"{CATALOG}.ml"))
        await _step("delete_catalog_force", lambda: catalogs.delete_catalog(CATALOG, force=True))
        await _step("get_deleted_catalog", lambda: catalogs.get_catalog(CATALOG))
        await _step("get_schema_of_deleted_catalog", lambda: schemas.get_schema(f"{CATALOG}.raw"))
        for suffix in ("b", "c"):
            await _step(f"delete_catalog_{suffix}", partial(catalogs.delete_catalog, f"{CATALOG}_{suffix}"))
        await _step("list_catalogs_after", lambda: catalogs.list_catalogs())
    # Authentication: a wrong token and none at all.
    for name, bad in (("wrong_token", "ucj_0000000000000000_" + "x" * 43), ("no_token", None)):
        async with _client(url, bad) as client:
            await _step(name, CatalogsApi(client).list_catalogs)


async def _volumes(volumes: VolumesApi, volume_url: str) -> None:
    """Two managed volumes in ``CATALOG.raw`` (one with a comment) and an external one at ``volume_url``,
    read, listed, paged, one deleted; the others stay for the catalog's forced delete to take with it."""

    def create(name: str, comment: str | None = None, location: str | None = None) -> Awaitable[Any]:
        kind = VolumeType.MANAGED if location is None else VolumeType.EXTERNAL
        body = CreateVolumeRequestContent(
            catalog_name=CATALOG,
            schema_name="raw",
            name=name,
            volume_type=kind,
            comment=comment,
            storage_location=location,
        )
        return volumes.create_volume(body)

    await _step("create_volume", lambda: create("images", VOLUME_COMMENT))
    await _step("create_volume_b", lambda: create("labels"))
    await _step("create_external_volume", lambda: create("shared", location=volume_url))
    await _step("get_volume", lambda: volumes.get_volume(f"{CATALOG}.raw.images"))
    await _step("list_volumes", lambda: volumes.list_volumes(CATALOG, "raw"))
    await _step(
        "list_volumes_paged",
        lambda: _pages(lambda t: volumes.list_volumes(CATALOG, "raw", page_token=t, max_results=1), "volumes"),
    )
    await _step("get_missing_volume", lambda: volumes.get_volume(f"{CATALOG}.raw.nope"))
    await _step("create_duplicate_volume", lambda: create("images"))
    await _step("delete_volume", lambda: volumes.delete_volume(f"{CATALOG}.raw.labels"))
    await _step("get_deleted_volume", lambda: volumes.get_volume(f"{CATALOG}.raw.labels"))


async def _tables(tables: TablesApi, table_url: str) -> None:
    """The test's two tables in ``TABLE_CATALOG.s``: read, listed, paged; a third, the Delta table at
    ``table_url``, registered as EXTERNAL; one deleted."""
    await _step("get_table", lambda: tables.get_table(f"{TABLE_CATALOG}.s.a"))
    await _step("list_tables", lambda: tables.list_tables(TABLE_CATALOG, "s"))
    await _step(
        "list_tables_paged",
        lambda: _pages(lambda t: tables.list_tables(TABLE_CATALOG, "s", page_token=t, max_results=1), "tables"),
    )
    await _step("get_missing_table", lambda: tables.get_table(f"{TABLE_CATALOG}.s.nope"))
    column = ColumnInfo(name="id", type_name=ColumnTypeName.LONG, type_text="bigint", position=0, nullable=True)
    create = CreateTable(
        name="c",
        catalog_name=TABLE_CATALOG,
        schema_name="s",
        table_type=TableType.EXTERNAL,
        data_source_format=DataSourceFormat.DELTA,
        columns=[column],
        storage_location=table_url,
        comment="registered by the official client",
    )
    await _step("create_table", lambda: tables.create_table(create))
    await _step("delete_table", lambda: tables.delete_table(f"{TABLE_CATALOG}.s.b"))
    await _step("get_deleted_table", lambda: tables.get_table(f"{TABLE_CATALOG}.s.b"))


async def _permissions(grants: GrantsApi, other: GrantsApi) -> None:
    """Privileges on ``CATALOG.raw.images`` granted to and revoked from the outsider by the admin (after
    the outsider's other steps, which need it without grants), read back whole and for one principal;
    the outsider's own attempt to grant is refused; and a table whose only grant the client cannot name."""
    volume, images = SecurableType.VOLUME, f"{CATALOG}.raw.images"

    def change(add: list[Privilege], remove: list[Privilege]) -> UpdatePermissions:
        return UpdatePermissions(changes=[PermissionsChange(principal=OUTSIDER, add=add, remove=remove)])

    await _step("grants_update_add", lambda: grants.update(volume, images, change([Privilege.READ_VOLUME], [])))
    await _step("grants_get", lambda: grants.get(volume, images))
    await _step("grants_get_principal", lambda: grants.get(volume, images, principal=OUTSIDER))
    await _step("grants_get_other_principal", lambda: grants.get(volume, images, principal="nobody"))
    add_catalog = UpdatePermissions(
        changes=[PermissionsChange(principal=OUTSIDER, add=[Privilege.USE_CATALOG], remove=[])]
    )
    await _step("other_grants_update", lambda: other.update(SecurableType.CATALOG, CATALOG, add_catalog))
    await _step("grants_update_remove", lambda: grants.update(volume, images, change([], [Privilege.READ_VOLUME])))
    await _step("grants_get_after_remove", lambda: grants.get(volume, images))
    # The test granted ALL PRIVILEGES, which the client's enum lacks, on this table before the run.
    await _step("grants_get_unrepresentable", lambda: grants.get(SecurableType.TABLE, f"{TABLE_CATALOG}.s.a"))


UPDATED_COMMENT = "updated by the official client"
MANAGED_TABLE = "m"  # made in TABLE_CATALOG.s through a staging table


async def _updates(catalogs: CatalogsApi, schemas: SchemasApi, volumes: VolumesApi) -> None:
    """PATCH of a catalog, a schema and a volume (comments; 0.7.0's update models have no owner), read
    back; and a rename, which this server refuses."""
    comment = UpdateCatalog(comment=UPDATED_COMMENT)
    await _step("update_catalog", lambda: catalogs.update_catalog(CATALOG, comment))
    await _step("get_updated_catalog", lambda: catalogs.get_catalog(CATALOG))
    schema_comment = UpdateSchema(comment=UPDATED_COMMENT)
    await _step("update_schema", lambda: schemas.update_schema(f"{CATALOG}.ml", schema_comment))
    volume_comment = UpdateVolumeRequestContent(comment=UPDATED_COMMENT)
    await _step("update_volume", lambda: volumes.update_volume(f"{CATALOG}.raw.images", volume_comment))
    rename = UpdateCatalog(new_name=f"{CATALOG}_renamed")
    await _step("rename_catalog", lambda: catalogs.update_catalog(CATALOG, rename))


async def _managed_table(tables: TablesApi, credentials: TemporaryCredentialsApi) -> None:
    """A managed table the UC OSS way: a staging table, READ_WRITE credentials for its id, a Delta log
    written at the vended ``file://`` url (a one-column, empty table: the JSON a Delta writer's first
    commit holds, written with the standard library), then POST /tables MANAGED naming the staging id."""
    made: dict[str, Any] = {}

    async def stage() -> Any:
        staging = CreateStagingTable(name=MANAGED_TABLE, catalog_name=TABLE_CATALOG, schema_name="s")
        made["staged"] = await tables.create_staging_table(staging)
        return made["staged"]

    async def vend() -> Any:
        ask = GenerateTemporaryTableCredential(table_id=made["staged"].id, operation=TableOperation.READ_WRITE)
        made["vended"] = await credentials.generate_temporary_table_credentials(ask)
        return made["vended"]

    async def write_and_register() -> Any:
        _write_empty_delta_table(made["vended"].url)
        column = ColumnInfo(name="id", type_name=ColumnTypeName.LONG, type_text="bigint", position=0, nullable=True)
        create = CreateTable(
            name=MANAGED_TABLE,
            catalog_name=TABLE_CATALOG,
            schema_name="s",
            table_type=TableType.MANAGED,
            data_source_format=DataSourceFormat.DELTA,
            columns=[column],
            storage_location=made["staged"].staging_location,
            properties={"io.unitycatalog.tableId": made["staged"].id},
        )
        return await tables.create_table(create)

    await _step("create_staging_table", stage)
    await _step("staging_table_credentials", vend)
    await _step("create_managed_table", write_and_register)
    await _step("get_managed_table", lambda: tables.get_table(f"{TABLE_CATALOG}.s.{MANAGED_TABLE}"))
    await _step("delete_managed_table", lambda: tables.delete_table(f"{TABLE_CATALOG}.s.{MANAGED_TABLE}"))


def _write_empty_delta_table(url: str) -> None:
    """The first commit of an empty Delta table with one nullable long column ``id``, at a file:// url."""
    log = Path(urllib.parse.unquote(urllib.parse.urlsplit(url).path)) / "_delta_log"
    log.mkdir(parents=True)
    schema = {"type": "struct", "fields": [{"name": "id", "type": "long", "nullable": True, "metadata": {}}]}
    actions = [
        {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}},
        {
            "metaData": {
                "id": str(uuid.uuid4()),
                "format": {"provider": "parquet", "options": {}},
                "schemaString": json.dumps(schema),
                "partitionColumns": [],
                "configuration": {},
                "createdTime": int(time.time() * 1000),
            }
        },
    ]
    (log / "00000000000000000000.json").write_text("".join(json.dumps(a) + "\n" for a in actions))


CREDENTIAL = "interop_cred"
LOCATION = "interop_loc"
ROLE_ARN = "arn:aws:iam::123456789012:role/interop"


async def _storage(client: ApiClient, volume_url: str) -> None:
    """A credential and an external location made, read, listed and deleted; temporary credentials for
    the external volume, table ``a`` and a path inside the new location (all ``file://`` here: a url
    and an expiry, no keys); a missing volume id and an UNKNOWN operation refused."""
    credentials, locations = CredentialsApi(client), ExternalLocationsApi(client)
    vending, volumes, tables = TemporaryCredentialsApi(client), VolumesApi(client), TablesApi(client)
    # A sibling of the test's external folder: outside every location the test made.
    location_url = volume_url.rsplit("/", 2)[0] + "/interop_location"
    role = AwsIamRoleRequest(role_arn=ROLE_ARN)
    purpose = CredentialPurpose.STORAGE
    create = CreateCredentialRequest(name=CREDENTIAL, comment=COMMENT, aws_iam_role=role, purpose=purpose)
    await _step("create_credential", lambda: credentials.create_credential(create))
    await _step("get_credential", lambda: credentials.get_credential(CREDENTIAL))
    await _step("list_credentials", lambda: credentials.list_credentials(purpose=CredentialPurpose.STORAGE))
    location = CreateExternalLocation(name=LOCATION, url=location_url, credential_name=CREDENTIAL, comment=COMMENT)
    await _step("create_external_location", lambda: locations.create_external_location(location))
    await _step("get_external_location", lambda: locations.get_external_location(LOCATION))
    await _step("list_external_locations", lambda: locations.list_external_locations())
    shared = await volumes.get_volume(f"{CATALOG}.raw.shared")
    table = await tables.get_table(f"{TABLE_CATALOG}.s.a")

    def volume_ask(volume_id: str, operation: VolumeOperation) -> Awaitable[Any]:
        ask = GenerateTemporaryVolumeCredential(volume_id=volume_id, operation=operation)
        return vending.generate_temporary_volume_credentials(ask)

    assert shared.volume_id is not None and table.table_id is not None
    volume_id, table_id = shared.volume_id, table.table_id
    await _step("volume_credentials", lambda: volume_ask(volume_id, VolumeOperation.READ_VOLUME))
    table_ask = GenerateTemporaryTableCredential(table_id=table_id, operation=TableOperation.READ)
    await _step("table_credentials", lambda: vending.generate_temporary_table_credentials(table_ask))
    path_ask = GenerateTemporaryPathCredential(url=f"{location_url}/raw", operation=PathOperation.PATH_READ)
    await _step("path_credentials", lambda: vending.generate_temporary_path_credentials(path_ask))
    missing = str(uuid.UUID(int=0))
    await _step("volume_credentials_missing_id", lambda: volume_ask(missing, VolumeOperation.READ_VOLUME))
    unknown = VolumeOperation.UNKNOWN_VOLUME_OPERATION
    await _step("volume_credentials_unknown_operation", lambda: volume_ask(volume_id, unknown))
    await _step("delete_credential_in_use", lambda: credentials.delete_credential(CREDENTIAL))
    await _step("delete_external_location", lambda: locations.delete_external_location(LOCATION))
    await _step("delete_credential", lambda: credentials.delete_credential(CREDENTIAL))
    await _step("get_deleted_credential", lambda: credentials.get_credential(CREDENTIAL))


def main(argv: list[str]) -> int:
    """``official_client_driver.py URL`` with the tokens in the environment (not on the command line,
    where every user of the machine can read them): ``UC_TOKEN``, a metastore admin's, and
    ``UC_OTHER_TOKEN``, a principal's that holds no grants; ``UC_TABLE_URL`` names the Delta table to
    register and ``UC_VOLUME_URL`` the folder of an external volume."""
    needed = {"UC_TOKEN", "UC_OTHER_TOKEN", "UC_TABLE_URL", "UC_VOLUME_URL"}
    if len(argv) != 2 or not needed <= os.environ.keys():
        usage = (
            "usage: UC_TOKEN=<admin's> UC_OTHER_TOKEN=<no grants> UC_TABLE_URL=<a Delta table's URL> "
            "UC_VOLUME_URL=<a folder's URL> official_client_driver.py http://127.0.0.1:PORT"
        )
        print(usage, file=sys.stderr)
        return 2
    env = os.environ
    asyncio.run(scenario(argv[1], env["UC_TOKEN"], env["UC_OTHER_TOKEN"], env["UC_TABLE_URL"], env["UC_VOLUME_URL"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
