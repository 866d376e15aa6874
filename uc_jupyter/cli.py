"""The ``uc-jupyter`` command: manage the catalog (embedded, or a server with ``--url``) and the demo data.

Output is plain and scriptable: lists print one object per line with tab-separated columns, changes
print one confirmation line, and ``--json`` prints a single JSON document instead. Errors print one
line, ``uc-jupyter: error: <message>``, to stderr and exit with status 1 (usage errors exit 2).

List columns:
    catalogs    name, owner, comment
    schemas     full name, owner, comment
    tables      full name, MANAGED|EXTERNAL, owner, storage location, number of columns
    volumes     full name, MANAGED|EXTERNAL, owner, storage location, /Volumes path
    principals  name, user|service_principal, admin (or empty)
    credentials name, owner, option names (never their values), comment
    locations   name, URL, credential (or empty), owner, comment
    show-grants principal, privilege, securable kind, securable
    token list  id, principal, created, expires (or never), expired (or empty)

``serve`` prints the server's URL alone on a line and runs until SIGTERM or Ctrl-C (exit 0).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import enum
import json
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog import (
    Catalog,
    CatalogError,
    CatalogInfo,
    CredentialInfo,
    ExternalLocationInfo,
    GrantInfo,
    PrincipalInfo,
    Privilege,
    SchemaInfo,
    TableInfo,
    VolumeInfo,
    get_catalog,
)
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.cli_tokens import COMMANDS as TOKEN_COMMANDS
from uc_jupyter.cli_tokens import run as run_token_command
from uc_jupyter.ucserver import serve as ucserve
from uc_jupyter.ucserver.vendor import end_vends_at_drop

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["build_parser", "main"]

PROG = "uc-jupyter"
EXAMPLES = """\
examples:
  uc-jupyter demo init
  uc-jupyter catalog list tables main.ml
  uc-jupyter catalog create table main.ml.iris --from iris.parquet
  uc-jupyter catalog grant "USE CATALOG" main alice
  uc-jupyter catalog create credential lake --options-file keys.json
  uc-jupyter catalog create location raw --url s3://lake/raw --credential lake
  uc-jupyter catalog grant "CREATE EXTERNAL VOLUME" raw alice --on location
  uc-jupyter --as alice --json catalog list schemas main
  uc-jupyter token create alice --ttl 86400
  uc-jupyter serve --port 8080
"""

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

_ERRORS = (CatalogError, ValueError, TypeError, OSError)


@dataclasses.dataclass(frozen=True)
class Report:
    """What a command prints: ``lines`` as text, or ``document`` with ``--json``."""

    lines: list[str]
    document: Any


Handler = Callable[[Catalog, argparse.Namespace], Report]


def main(argv: list[str] | None = None) -> int:
    """Run the ``uc-jupyter`` command line and return its exit status (0, 1 on errors, 2 on usage).

    Example:
        >>> main(["catalog", "create", "catalog", "main"])  # doctest: +SKIP
        created catalog main
        0
        >>> main(["--as", "alice", "catalog", "list", "schemas", "main"])  # doctest: +SKIP
        uc-jupyter: error: alice lacks USE CATALOG on main
        1
    """
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # usage errors and --help: argparse has printed its message
        return exc.code if isinstance(exc.code, int) else 0
    try:
        cat = get_catalog(url=args.catalog_url, token=args.catalog_token)
        principal = args.as_principal
        with contextlib.nullcontext() if principal is None else cat.as_principal(principal):
            handler: Handler = args.handler
            report = handler(cat, args)
    except _ERRORS as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    text = json.dumps(report.document, indent=2, default=_json_default) if args.json else "\n".join(report.lines)
    try:
        if text:
            print(text, flush=True)
    except BrokenPipeError:  # e.g. `uc-jupyter catalog list tables main.ml | head -1`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser; ``--json`` and ``--as`` work before or after the subcommand."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Manage the embedded Unity Catalog under $UC_JUPYTER_HOME, or a Unity Catalog server (--url).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_global_options(parser, json_default=False, as_default=None)
    # Before the command only: `catalog create location --url` is the location's own URL.
    parser.add_argument(
        "--url",
        dest="catalog_url",
        metavar="URL",
        help="a Unity Catalog server to use instead of the embedded catalog (default: $UC_JUPYTER_CATALOG_URL)",
    )
    parser.add_argument(
        "--token",
        dest="catalog_token",
        metavar="TOKEN",
        help="the server's bearer token (default: $UC_JUPYTER_TOKEN, which other users cannot see in ps)",
    )
    common = argparse.ArgumentParser(add_help=False)
    _add_global_options(common, json_default=argparse.SUPPRESS, as_default=argparse.SUPPRESS)

    def group(parent: Any, name: str, help_text: str, dest: str) -> Any:
        sub = parent.add_parser(name, help=help_text, description=help_text, parents=[common])
        return sub.add_subparsers(dest=dest, required=True, metavar=dest.upper())

    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    catalog = group(commands, "catalog", "list, create, drop and grant on catalog objects", "action")
    demo = group(commands, "demo", "the demo catalog objects", "action")

    def leaf(parent: Any, name: str, help_text: str, handler: Handler) -> argparse.ArgumentParser:
        sub: argparse.ArgumentParser = parent.add_parser(name, help=help_text, description=help_text, parents=[common])
        sub.set_defaults(handler=handler)
        return sub

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

    token = group(commands, "token", "create, list and revoke the bearer tokens of uc-jupyter serve", "action")
    for name, help_text, add_arguments in TOKEN_COMMANDS:
        add_arguments(leaf(token, name, help_text, _token))

    ucserve.add_arguments(leaf(commands, "serve", ucserve.HELP, lambda cat, args: Report(*ucserve.run(cat, args))))

    init = leaf(demo, "init", "build the demo table, volume and principal (kept when complete)", _demo_init)
    init.add_argument("--force", action="store_true", help="rebuild even when the demo is complete")
    spark = group(commands, "spark", "the local Spark Connect server", "action")
    for action, text in (
        ("start", "start the local server (or show the running one)"),
        ("status", "show the local server, if one runs: pid, port, clients, idle time, when it stops"),
        ("stop", "stop the local server"),
    ):
        sub = leaf(spark, action, text, _spark)
        if action == "start":
            sub.add_argument(
                "--idle-timeout",
                type=_duration,
                default=argparse.SUPPRESS,
                metavar="DURATION",
                help="stop the server after this long without clients: 90s, 30m, 2h or never "
                "(default: $UC_JUPYTER_SPARK_IDLE_TIMEOUT, else 30m)",
            )
    return parser


def _duration(text: str) -> float | None:
    from uc_jupyter.tables.spark_server import parse_duration

    try:
        return parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("invalid idle timeout ")) from None


def _add_global_options(parser: argparse.ArgumentParser, *, json_default: Any, as_default: Any) -> None:
    parser.add_argument("--json", action="store_true", default=json_default, help="print one JSON document")
    parser.add_argument(
        "--as",
        dest="as_principal",
        metavar="PRINCIPAL",
        default=as_default,
        help="run the command as this principal",
    )


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


# ----------------------------------------------------------------------------- command families
def _catalog_list(cat: Catalog, args: argparse.Namespace) -> Report:
    lister = getattr(cat, _LISTER.get(args.kind, f"list_{args.kind}"))
    items = lister(args.parent) if _LIST_ARGUMENT[args.kind] else lister()
    return _listing(items)


def _catalog_show_grants(cat: Catalog, args: argparse.Namespace) -> Report:
    return _listing(cat.show_grants(args.securable, kind=args.on))


def _catalog_create_storage(cat: Catalog, args: argparse.Namespace) -> Report:
    if args.kind == "location":
        location = cat.create_external_location(args.name, args.url, args.credential, comment=args.comment)
        return _change("created", "external location", location.name, location=_plain(location))
    options = _storage_options(args.options, args.options_file)
    credential = cat.create_storage_credential(args.name, options, comment=args.comment)
    return _change("created", "storage credential", credential.name, credential=_plain(credential))


def _catalog_create(cat: Catalog, args: argparse.Namespace) -> Report:
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
        return Report([line], document)
    if kind == "volume":
        info = cat.create_volume(args.name, args.location, comment=args.comment)
    elif kind == "schema":
        info = cat.create_schema(args.name, comment=args.comment)
    else:
        info = cat.create_catalog(args.name, comment=args.comment)
    return _change("created", kind, info.full_name, **{kind: _plain(info)})


def _catalog_drop(cat: Catalog, args: argparse.Namespace) -> Report:
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


def _catalog_grant(cat: Catalog, args: argparse.Namespace) -> Report:
    privilege = Privilege.parse(args.privilege)
    change = cat.grant if args.action == "grant" else cat.revoke
    change(args.securable, privilege, args.principal, kind=args.on)
    securable = str(parse_name(args.securable)) if args.on is None else f"{args.on} {args.securable}"
    verb, to = ("granted", "to") if args.action == "grant" else ("revoked", "from")
    return Report(
        [f"{verb} {privilege} on {securable} {to} {args.principal}"],
        {"action": verb, "privilege": privilege.value, "securable": securable, "principal": args.principal},
    )


def _spark(cat: Catalog, args: argparse.Namespace) -> Report:
    from uc_jupyter.progress import auto_output
    from uc_jupyter.tables.spark import local_server, server_status, stop_local_server

    if args.action == "stop":
        stopped = stop_local_server()
        return Report([f"{'stopped' if stopped else 'no'} local Spark Connect server"], {"stopped": stopped})
    if args.action == "start":
        asked = getattr(args, "idle_timeout", "env")
        server = local_server(progress=auto_output(sys.stderr), idle_timeout_s=asked)
        if asked != "env" and server.idle_timeout_s != asked:
            print(
                f"{PROG}: the server was already running and keeps its idle timeout; "
                "run uc-jupyter spark stop first to start it with another",
                file=sys.stderr,
            )
    status = server_status()
    if status is None:
        return Report(["no local Spark Connect server"], {"running": False})
    return Report(status.lines(), status.document())


def _token(cat: Catalog, args: argparse.Namespace) -> Report:
    return Report(*run_token_command(cat, args))


def _demo_init(cat: Catalog, args: argparse.Namespace) -> Report:
    from uc_jupyter.demo import init_demo

    summary = init_demo(cat, force=args.force)
    return Report(summary.lines(), summary.as_dict())


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


def _listing(items: Sequence[object]) -> Report:
    lines = ["\t".join(_cell(value) for value in _ROWS[type(item)](item)) for item in items]
    return Report(lines, [_plain(item) for item in items])


def _change(verb: str, kind: str, name: str, **details: Any) -> Report:
    return Report([f"{verb} {kind} {name}"], {"action": verb, "kind": kind, "name": name, **details})


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


def _json_default(value: object) -> object:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    raise TypeError(f"cannot write {type(value).__name__} as JSON")


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return " ".join(lines) or type(exc).__name__


if __name__ == "__main__":
    sys.exit(main())
