"""``%uc_load`` and ``%%uc_distributed``: adapters that parse a line and call a library function.

``%uc_load SOURCE [options]`` is :func:`uc_jupyter.load` (``x = %uc_load main.ml.iris --to pandas``);
``%%uc_distributed [options]`` is :func:`uc_jupyter.distributed.cell.run_cell` on the kernel's rank
pool, and ``%uc_distributed --status|--restart|--shutdown`` manages that pool. Mistakes in a line
raise IPython's ``UsageError``: one line, no traceback. Defaults are configurable::

    %config UCMagics.nprocs = 4                       # ranks when a cell gives neither -n nor --gpus
    %config UCMagics.default_to = {"table": "pandas"} # what %uc_load returns, per kind of source
    %config UCMagics.default_catalog = "dev"          # for schema.table names
    %config UCMagics.monitor = False                  # live dashboard for %uc_load loaders
    %config UCMagics.verbose = True                   # rank errors with our frames, pyspark's client logs
    %config UCMagics.cluster = "ray"                  # %%uc_distributed ranks on the Ray cluster (None: here)

Example:
    >>> ip = get_ipython()                                    # doctest: +SKIP
    >>> ip.run_line_magic("load_ext", "uc_jupyter")           # doctest: +SKIP
    >>> frame = ip.run_line_magic("uc_load", "main.ml.iris --to pandas --limit 5")  # doctest: +SKIP
"""

from __future__ import annotations

import textwrap
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class
from traitlets import Bool, Dict, Integer, TraitError, Unicode, observe, validate

from uc_jupyter.catalog import CatalogError
from uc_jupyter.data.mix.schedule import UNTIL
from uc_jupyter.distributed.cell import CellUsageError, manage_pool, run_cell
from uc_jupyter.distributed.checks import check_cluster
from uc_jupyter.distributed.errors import ClusterError, set_verbose
from uc_jupyter.errors import first_line
from uc_jupyter.jupyter.args import ArgumentError, Flag, HelpRequested, Option, names_list, parse
from uc_jupyter.jupyter.help import Docs, docs_of, magic_help
from uc_jupyter.loading import DECODERS, TABLE_TARGETS, VOLUME_TARGETS, load, source_kind

__all__ = ["DISTRIBUTED_HELP", "DISTRIBUTED_OPTIONS", "LOAD_HELP", "LOAD_OPTIONS", "UCMagics"]


def _ranks(raw: str) -> Any:
    if raw == "all":
        return "all"
    try:
        return [int(part) for part in names_list(raw)]
    except ValueError:
        raise ValueError("give 'all' or rank numbers separated by commas, e.g. 0,2") from None


def _numbers(raw: str) -> list[float]:
    """``"3,1"`` -> ``[3, 1]``: whole numbers stay whole (the schedule is exact), others are floats."""
    try:
        return [int(part) if part.lstrip("-").isdigit() else float(part) for part in names_list(raw)]
    except ValueError:
        raise ValueError("give numbers separated by commas, e.g. 3,1") from None


LOAD_OPTIONS: tuple[Option, ...] = (
    Option("--to", choices=tuple(dict.fromkeys((*TABLE_TARGETS, *VOLUME_TARGETS)))),
    Option("--columns", type=names_list, metavar="NAME,..."),
    Option("--where", metavar="SQL"),
    Option("--limit", type=int),
    Option("--version", type=int),
    Option("--decode", choices=DECODERS),
    Option("--batch-size", type=int),
    Option("--num-workers", type=int),
    Option("--prefetch-factor", type=int),
    Flag("--shuffle"),
    Option("--seed", type=int),
    Flag("--recursive"),
    Option("--include", type=names_list, metavar="GLOB,..."),
    Option("--exclude", type=names_list, metavar="GLOB,..."),
    Option("--labels", choices=("folder",)),
    Option("--cache-dir", metavar="FOLDER"),
    Flag("--monitor", negatable=True),
    Option("--resume", metavar="/Volumes/.../RUN"),
    Option("--weights", type=_numbers, metavar="W,..."),
    Option("--until", choices=UNTIL),
    Option("--steps", type=int),
)

DISTRIBUTED_OPTIONS: tuple[Option, ...] = (
    Option("-n", type=int),
    Option("--gpus", type=int),
    Option("--gpu-type", metavar="MODEL"),
    Option("--devices", choices=("auto", "cpu", "cuda")),
    Option("--push", type=names_list, metavar="NAME,..."),
    Option("--pull", type=names_list, metavar="NAME,..."),
    Option("--show", type=_ranks, metavar="all|RANK,..."),
    Option("--timeout", type=float, metavar="SECONDS"),
    Flag("--monitor", negatable=True),
    Option("--cluster", metavar="ray|ray://HOST:PORT"),
    Flag("--status"),
    Flag("--restart"),
    Flag("--shutdown"),
)
_POOL_ACTIONS = ("status", "restart", "shutdown")


def _user_mistake(exc: BaseException) -> bool:
    """Errors that mean the line is wrong (and deserve one line), not that the work failed."""
    if isinstance(exc, (ArgumentError, CatalogError, CellUsageError, ValueError, LookupError, PermissionError)):
        return True
    return type(exc).__name__ == "AnalysisException"  # Spark naming a missing column


@magics_class
class UCMagics(Magics):
    """The uc_jupyter magics; ``%load_ext uc_jupyter`` registers them."""

    nprocs = Integer(2, help="Ranks for %%uc_distributed when a cell gives neither -n nor --gpus.").tag(config=True)
    default_to = Dict(
        default_value={"table": "spark", "volume": "loader"},
        help="What %uc_load returns when --to is not given, per kind of source ('table', 'volume').",
    ).tag(config=True)
    default_catalog = Unicode("main", help="The catalog of two-part names (schema.table) in %uc_load.").tag(config=True)
    monitor = Bool(True, help="Show the live dashboard for loaders made by %uc_load (--no-monitor to skip).").tag(
        config=True
    )
    verbose = Bool(
        False,
        help="Show everything: uc_jupyter's internal frames in rank errors (by default a failing rank "
        "shows '[rank N] Type: message' and its own frames only) and pyspark's client-side logs.",
    ).tag(config=True)

    cluster = Unicode(
        None,
        allow_none=True,
        help="Where %%uc_distributed runs its ranks when a cell gives no --cluster: None (this machine), "
        "'ray' (the Ray cluster at UC_JUPYTER_RAY_ADDRESS, else RAY_ADDRESS) or 'ray://host:port' (Ray Client).",
    ).tag(config=True)

    @validate("cluster")
    def _valid_cluster(self, proposal: dict[str, Any]) -> str | None:
        try:  # refused when set, not when a cell first runs
            return check_cluster(proposal["value"])
        except ValueError as exc:
            raise TraitError(f"UCMagics.{exc}") from None

    @observe("verbose")
    def _verbose_changed(self, change: dict[str, Any]) -> None:
        set_verbose(bool(change["new"]))  # the errors module decides; plain Python reads UC_JUPYTER_VERBOSE

    @line_magic
    def uc_load(self, line: str) -> Any:
        """``%uc_load SOURCE [--to ...] [options]``: a table or volume as a frame, dataset or loader."""
        try:
            positional, options = parse(line, LOAD_OPTIONS)
            if not positional:
                raise ArgumentError("give a table name (catalog.schema.table or schema.table) or a /Volumes/... path")
            if len(positional) > 1:  # several sources: one Mix of them (weights= says how)
                if options.setdefault("to", "loader") == "loader":
                    options.setdefault("monitor", self.monitor)
                return load(positional, default_catalog=self.default_catalog, **options)
            source = positional[0]
            kind = source_kind(source)
            to = options.setdefault("to", self._default_to(kind))
            if kind == "volume" and to == "loader":
                options.setdefault("monitor", self.monitor)
            return load(source, default_catalog=self.default_catalog, **options)
        except HelpRequested:
            print(LOAD_HELP)
            return None
        except Exception as exc:
            if _user_mistake(exc):
                raise UsageError(first_line(exc)) from None
            raise

    @line_cell_magic
    def uc_distributed(self, line: str, cell: str | None = None) -> Any:
        """``%%uc_distributed [-n N | --gpus N] [options]``: run the cell on every rank."""
        try:
            positional, options = parse(line, DISTRIBUTED_OPTIONS)
            if positional:
                raise ArgumentError(f"unexpected argument {positional[0]!r}: options only (e.g. -n 2)")
            actions = [a for a in _POOL_ACTIONS if options.pop(a, False)]
            if cell is None:
                if len(actions) != 1:
                    raise ArgumentError(
                        "%uc_distributed manages the pool with one of --status, --restart, --shutdown; "
                        "run code with %%uc_distributed (two %) at the top of a cell"
                    )
                return manage_pool(actions[0])  # type: ignore[arg-type]
            if actions:
                raise ArgumentError(f"--{actions[0]} is for the line magic %uc_distributed, not for a cell")
            if "n" not in options and "gpus" not in options:
                options["n"] = self.nprocs
            options.setdefault("cluster", self.cluster)  # the cell's --cluster wins
            return run_cell(cell, namespace=self.shell.user_ns if self.shell else {}, **options)
        except HelpRequested:
            print(DISTRIBUTED_HELP)
            return None
        except (ArgumentError, CellUsageError, ClusterError) as exc:  # ClusterError: the address, not the cell
            raise UsageError(first_line(exc)) from None

    def _default_to(self, kind: str) -> str:
        defaults = {"table": "spark", "volume": "loader", **self.default_to}
        return str(defaults[kind])


def _trait_default(name: str) -> str:
    value = UCMagics.class_traits()[name].default_value
    return ("on" if value else "off") if isinstance(value, bool) else str(value)


# The help of each magic is made from the function it calls (its docstring and signature), so an
# option cannot be added, renamed or given another default without the help saying so.
_LOAD_DOCS = docs_of(load)
LOAD_HELP = magic_help(
    "%uc_load SOURCE [options]: a table or a volume folder as a frame, dataset or loader",
    LOAD_OPTIONS,
    _LOAD_DOCS
    | Docs(defaults={"monitor": f"{_trait_default('monitor')} for volume loaders, %config UCMagics.monitor"}),
    intro=(
        *textwrap.wrap(f"SOURCE: {_LOAD_DOCS.meanings['source']}", 98, initial_indent="  ", subsequent_indent="  "),
        "  Each option is a keyword of uc_jupyter.load (--batch-size 64 is batch_size=64); two-part",
        "  names use %config UCMagics.default_catalog.",
    ),
)
DISTRIBUTED_HELP = magic_help(
    "%%uc_distributed [-n N | --gpus N] [options]: run the cell on every rank\n"
    "%uc_distributed --status | --restart | --shutdown: manage the rank pool",
    DISTRIBUTED_OPTIONS,
    docs_of(run_cell)
    | docs_of(manage_pool, "Actions")
    | Docs(defaults={"n": f"{_trait_default('nprocs')}, %config UCMagics.nprocs"}),
    intro=("  Each option is a keyword of uc_jupyter.distributed.cell.run_cell (--gpu-type is gpu_type).",),
)

# What %uc_load? and %uc_distributed? show: the same help as --help.
UCMagics.uc_load.__doc__ = LOAD_HELP
UCMagics.uc_distributed.__doc__ = DISTRIBUTED_HELP
