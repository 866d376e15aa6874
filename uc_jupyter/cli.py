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
``gc`` prints one line per leftover it removed (its path and bytes), then the totals.
"""

from __future__ import annotations

import argparse
import contextlib
import enum
import json
import os
import sys
from datetime import datetime
from typing import Any

from uc_jupyter.catalog import Catalog, CatalogError, get_catalog
from uc_jupyter.cli_catalog import Handler, Printed
from uc_jupyter.cli_catalog import add_commands as add_catalog_commands
from uc_jupyter.cli_tokens import COMMANDS as TOKEN_COMMANDS
from uc_jupyter.cli_tokens import run as run_token_command
from uc_jupyter.ucserver import serve as ucserve

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
  uc-jupyter gc
"""

_ERRORS = (CatalogError, ValueError, TypeError, OSError)


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
            lines, document = handler(cat, args)
    except _ERRORS as exc:
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    text = json.dumps(document, indent=2, default=_json_default) if args.json else "\n".join(lines)
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

    add_catalog_commands(catalog, common, group, leaf)

    token = group(commands, "token", "create, list and revoke the bearer tokens of uc-jupyter serve", "action")
    for name, help_text, add_arguments in TOKEN_COMMANDS:
        add_arguments(leaf(token, name, help_text, run_token_command))

    ucserve.add_arguments(leaf(commands, "serve", ucserve.HELP, ucserve.run))
    leaf(
        commands, "gc", "remove what killed writes, exports and saves left: staged files, uncommitted table files", _gc
    )

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


# ----------------------------------------------------------------------------- command families
def _spark(cat: Catalog, args: argparse.Namespace) -> Printed:
    from uc_jupyter.progress import auto_output
    from uc_jupyter.tables.spark import local_server, server_status, stop_local_server

    if args.action == "stop":
        stopped = stop_local_server()
        return [f"{'stopped' if stopped else 'no'} local Spark Connect server"], {"stopped": stopped}
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
        return ["no local Spark Connect server"], {"running": False}
    return status.lines(), status.document()


def _gc(cat: Catalog, args: argparse.Namespace) -> Printed:
    """What dead processes left: this machine's staged files (:mod:`uc_jupyter.storage.staged`), and in
    the embedded catalog the files of killed table writes and unowned managed storage. An export's or a
    checkpoint's leftovers in a volume are removed by the next export of that folder or save of that run."""
    from uc_jupyter.catalog.embedded.local import LocalCatalog
    from uc_jupyter.storage import staged
    from uc_jupyter.storage.writes import staging_folder

    removed: list[dict[str, Any]] = [{"path": path, "bytes": size} for path, size in staged.sweep(staging_folder())]
    folders: list[str] = []
    if isinstance(cat, LocalCatalog):
        removed += [{"path": f"{key}: {name}", "bytes": size} for key, name, size in cat.remove_killed_writes()]
        folders = cat.sweep()
    total = sum(int(entry["bytes"]) for entry in removed)
    lines = [f"removed {entry['path']} ({entry['bytes']} bytes)" for entry in removed]
    lines += [f"removed unowned managed storage {location}" for location in folders]
    lines.append(
        f"removed {len(removed)} leftover(s), {total} bytes" + (f", {len(folders)} folder(s)" if folders else "")
    )
    return lines, {"removed": removed, "folders": folders, "bytes": total}


def _demo_init(cat: Catalog, args: argparse.Namespace) -> Printed:
    from uc_jupyter.demo import init_demo

    summary = init_demo(cat, force=args.force)
    return summary.lines(), summary.as_dict()


# ----------------------------------------------------------------------------- helpers
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
