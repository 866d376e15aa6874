"""The ``uc-jupyter catalog ...`` commands: list, create, drop, grant, revoke and show-grants.

:func:`add_commands` adds them to the ``catalog`` group of :mod:`uc_jupyter.cli`'s parser; each
command's handler does it and returns what it prints, ``(lines, document)``: the lines as text, the
document with ``--json`` (the list columns are in :mod:`uc_jupyter.cli`'s docstring).

Example:
    >>> from uc_jupyter.catalog import get_catalog
    >>> from uc_jupyter.cli import build_parser
    >>> args = build_parser().parse_args(["catalog", "create", "catalog", "main"])
    >>> args.handler(get_catalog(), args)[0]  # doctest: +SKIP
    ['created catalog main']
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog import (
    Catalog,
    CatalogInfo,
    CredentialInfo,
    ExternalLocationInfo,
    GrantInfo,
    PrincipalInfo,
    Privilege,
    SchemaInfo,
    TableInfo,
    VolumeInfo,
)
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.ucserver.vendor import end_vends_at_drop

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["Handler", "Printed", "add_commands"]

# What a command prints: its lines as text, and the document --json prints instead.
Printed = tuple[list[str], Any]
Handler = Callable[[Catalog, argparse.Namespace], Printed]

# What `catalog list KIND` takes as its argument (None: nothing).
_LIST_ARGUMENT = {
    "catalogs": None,
    "principals": None,
    "schemas": "CATALOG",
    "tables": "CATALOG.SCHEMA",
    "volumes": "CATALOG.SCHEMA",
    "credentials": None,
    "locations": None,
}
# The catalog method behind `catalog list KIND`, where it is not list_<KIND>.
_LISTER = {"credentials": "list_storage_credentials", "locations": "list_external_locations"}

# The tab-separated columns printed for each kind of object in a list.
_ROWS: dict[type, Callable[[Any], tuple[object, ...]]] = {
    CatalogInfo: lambda c: (c.name, c.owner, c.comment),
    SchemaInfo: lambda s: (s.full_name, s.owner, s.comment),
    TableInfo: lambda t: (t.full_name, t.table_type, t.owner, t.storage_location, len(t.columns)),
    VolumeInfo: lambda v: (v.full_name, v.volume_type, v.owner, v.storage_location, v.path),
    PrincipalInfo: lambda p: (p.name, p.kind, "admin" if p.admin else ""),
    GrantInfo: lambda g: (g.principal, g.privilege, g.securable_kind, g.securable),
    CredentialInfo: lambda c: (c.name, c.owner, ",".join(c.option_names), c.comment),
    ExternalLocationInfo: lambda loc: (loc.name, loc.url, loc.credential_name, loc.owner, loc.comment),
}


def add_commands(
    catalog: Any,
    common: argparse.ArgumentParser,
    group: Callable[[Any, str, str, str], Any],
    leaf: Callable[[Any, str, str, Handler], argparse.ArgumentParser],
) -> None:
    """Add the commands to ``catalog`` (the group's subparsers), with ``common``'s options, made
    with the parser's own ``group`` and ``leaf`` (a subcommand whose handler is given)."""
    # `catalog list` alone lists the catalogs, the first thing people look for.
    list_help = "list catalog objects, one per line (the catalogs when no KIND is given)"
    list_parser = catalog.add_parser("list", help=list_help, description=list_help, parents=[common])
    listing = list_parser.add_subparsers(dest="kind", required=False, metavar="KIND")
    list_parser.set_defaults(handler=_catalog_list, kind="catalogs")  # after the subparsers: it sets their default
    for kind, metavar in _LIST_ARGUMENT.items():
        sub = leaf(listing, kind, f"list {kind}", _catalog_list)
        if metavar:
            sub.add_argument("parent", metavar=metavar)

    create = group(catalog, "create", "create a catalog object", "kind")
    for kind in ("catalog", "schema", "volume", "table"):
        sub = leaf(create, kind, f"create a {kind}", _catalog_create)
        sub.add_argument("name", metavar=_name_metavar(kind))
        sub.add_argument("--comment", help="a description stored with the object")
        if kind == "table":
            sub.add_argument("--from", dest="source", required=True, metavar="FILE", help="a .parquet or .csv file")
            sub.add_argument(
                "--mode",
                choices=("error", "overwrite", "append"),
                default="error",
                help="what to do when the table exists (default: error)",
            )
        if kind in ("volume", "table"):
            sub.add_argument("--location", metavar="URL", help="external storage (default: managed)")
    principal = leaf(create, "principal", "register a principal", _catalog_create)
    principal.add_argument("name", metavar="NAME")
    principal.add_argument("--service-principal", action="store_true", help="a service principal, not a user")
    credential = leaf(create, "credential", "create a storage credential (admins)", _catalog_create_storage)
    credential.add_argument("name", metavar="NAME")
    credential.add_argument(
        "--option",
        dest="options",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a storage option (repeatable); a value on the command line is seen by ps and shell history: "
        "prefer --options-file",
    )
    credential.add_argument(
        "--options-file", metavar="FILE", help="a JSON object of storage options; '-' reads standard input"
    )
    credential.add_argument("--comment", help="a description stored with the credential")
    location = leaf(create, "location", "create an external location", _catalog_create_storage)
    location.add_argument("name", metavar="NAME")
    location.add_argument("--url", required=True, metavar="URL", help="the storage URL prefix, e.g. s3://bucket/raw")
    location.add_argument("--credential", metavar="NAME", help="the storage credential it uses (default: none)")
    location.add_argument("--comment", help="a description stored with the location")

    drop = group(catalog, "drop", "drop a catalog object", "kind")
    for kind in ("credential", "location"):
        leaf(
            drop, kind, f"drop a {'storage credential' if kind == 'credential' else 'external location'}", _catalog_drop
        ).add_argument("name", metavar="NAME")
    for kind in ("catalog", "schema", "table", "volume", "principal"):
        sub = leaf(drop, kind, f"drop a {kind}", _catalog_drop)
        sub.add_argument("name", metavar=_name_metavar(kind))
        if kind in ("catalog", "schema"):
            sub.add_argument("--cascade", action="store_true", help="also drop everything inside it")

    for verb, help_text in (("grant", "grant a privilege"), ("revoke", "revoke a privilege")):
        sub = leaf(catalog, verb, help_text, _catalog_grant)
        sub.add_argument("privilege", metavar="PRIVILEGE", help='e.g. "USE CATALOG" or use_catalog')
        sub.add_argument(
            "securable", metavar="SECURABLE", help="a catalog, schema, table or volume; with --on, its name"
        )
        sub.add_argument("principal", metavar="PRINCIPAL")
        _add_on_option(sub)
    show = leaf(catalog, "show-grants", "list the privileges granted on a securable", _catalog_show_grants)
    show.add_argument("securable", metavar="SECURABLE")
    _add_on_option(show)


def _add_on_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--on",
        choices=("location", "credential", "metastore"),
        help="the securable is an external location, a storage credential or the metastore (SECURABLE: metastore)",
    )


def _name_metavar(kind: str) -> str:
    if kind in ("catalog", "principal"):
        return "NAME"
    return "CATALOG.SCHEMA" if kind == "schema" else f"CATALOG.SCHEMA.{kind.upper()}"


# ----------------------------------------------------------------------------- the commands
def _catalog_list(cat: Catalog, args: argparse.Namespace) -> Printed:
    lister = getattr(cat, _LISTER.get(args.kind, f"list_{args.kind}"))
    items = lister(args.parent) if _LIST_ARGUMENT[args.kind] else lister()
    return _listing(items)


def _catalog_show_grants(cat: Catalog, args: argparse.Namespace) -> Printed:
    return _listing(cat.show_grants(args.securable, kind=args.on))


def _catalog_create_storage(cat: Catalog, args: argparse.Namespace) -> Printed:
    if args.kind == "location":
        location = cat.create_external_location(args.name, args.url, args.credential, comment=args.comment)
        return _change("created", "external location", location.name, location=_plain(location))
    options = _storage_options(args.options, args.options_file)
    credential = cat.create_storage_credential(args.name, options, comment=args.comment)
    return _change("created", "storage credential", credential.name, credential=_plain(credential))


def _catalog_create(cat: Catalog, args: argparse.Namespace) -> Printed:
    kind: str = args.kind
    if kind == "principal":
        info: Any = cat.create_principal(args.name, "service_principal" if args.service_principal else "user")
        return _change("created", kind, info.name, **{kind: _plain(info)})
    if kind == "table":
        data = _read_table_file(args.source)
        info = cat.create_table(args.name, data, args.mode, storage_location=args.location, comment=args.comment)
        name, rows = info.full_name, data.num_rows
        line, action = {
            "error": (f"created table {name} ({rows} rows)", "created"),
            "overwrite": (f"overwrote table {name} ({rows} rows)", "overwritten"),
            "append": (f"appended {rows} rows to table {name}", "appended"),
        }[args.mode]
        document = {"action": action, "kind": kind, "name": name, "rows": rows, kind: _plain(info)}
        return [line], document
    if kind == "volume":
        info = cat.create_volume(args.name, args.location, comment=args.comment)
    elif kind == "schema":
        info = cat.create_schema(args.name, comment=args.comment)
    else:
        info = cat.create_catalog(args.name, comment=args.comment)
    return _change("created", kind, info.full_name, **{kind: _plain(info)})


def _catalog_drop(cat: Catalog, args: argparse.Namespace) -> Printed:
    kind: str = args.kind
    if kind == "credential":
        cat.drop_storage_credential(args.name)
        end_vends_at_drop(cat, args.name)  # keys a server over this home vended with it end now, not at expiry
        return _change("dropped", "storage credential", args.name)
    if kind == "location":
        cat.drop_external_location(args.name)
        return _change("dropped", "external location", args.name)
    if kind in ("catalog", "schema"):
        getattr(cat, f"drop_{kind}")(args.name, cascade=args.cascade)
    else:
        getattr(cat, f"drop_{kind}")(args.name)
    name = args.name if kind == "principal" else str(parse_name(args.name))
    return _change("dropped", kind, name)


def _catalog_grant(cat: Catalog, args: argparse.Namespace) -> Printed:
    privilege = Privilege.parse(args.privilege)
    change = cat.grant if args.action == "grant" else cat.revoke
    change(args.securable, privilege, args.principal, kind=args.on)
    securable = str(parse_name(args.securable)) if args.on is None else f"{args.on} {args.securable}"
    verb, to = ("granted", "to") if args.action == "grant" else ("revoked", "from")
    return (
        [f"{verb} {privilege} on {securable} {to} {args.principal}"],
        {"action": verb, "privilege": privilege.value, "securable": securable, "principal": args.principal},
    )


# ----------------------------------------------------------------------------- helpers
def _storage_options(pairs: list[str], options_file: str | None) -> dict[str, Any]:
    """Storage options from ``--options-file`` (a JSON object) and ``--option KEY=VALUE`` pairs."""
    options: dict[str, Any] = {}
    if options_file is not None:
        text = sys.stdin.read() if options_file == "-" else Path(options_file).read_text()
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"--options-file {options_file}: not JSON ({exc.msg} at line {exc.lineno})") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"--options-file {options_file}: give a JSON object of option names to values")
        options.update(loaded)
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:  # never echo the text: it may be a secret typed without its key
            raise ValueError("--option: give KEY=VALUE (one option has no '=' or no key)")
        options[name] = value
    return options


def _read_table_file(source: str) -> pa.Table:
    """Read a .parquet or .csv file into a pyarrow Table."""
    path = Path(source)
    suffix = path.suffix.lower()
    if suffix not in (".parquet", ".csv"):
        raise ValueError(f"cannot read {source}: use a .parquet or .csv file")
    if not path.is_file():
        raise FileNotFoundError(f"no such file: {source}")
    if suffix == ".csv":
        import pyarrow.csv

        return pyarrow.csv.read_csv(path)
    import pyarrow.parquet

    return pyarrow.parquet.read_table(path)


def _listing(items: Sequence[object]) -> Printed:
    lines = ["\t".join(_cell(value) for value in _ROWS[type(item)](item)) for item in items]
    return lines, [_plain(item) for item in items]


def _change(verb: str, kind: str, name: str, **details: Any) -> Printed:
    return [f"{verb} {kind} {name}"], {"action": verb, "kind": kind, "name": name, **details}


def _plain(obj: Any) -> dict[str, Any]:
    """A dataclass as a dict, with its ``full_name`` and ``path`` properties when it has them."""
    record = dataclasses.asdict(obj)
    for extra in ("full_name", "path"):
        if hasattr(obj, extra):
            record[extra] = getattr(obj, extra)
    return record


def _cell(value: object) -> str:
    """One tab-separated column: None is empty, tabs and newlines become spaces."""
    if value is None:
        return ""
    text = value.value if isinstance(value, enum.Enum) else value
    return str(text).translate(str.maketrans("\t\r\n", "   "))
