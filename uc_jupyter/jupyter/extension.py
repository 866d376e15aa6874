"""Registering and unregistering the extension in an IPython shell.

Example:
    >>> register(get_ipython())   # what %load_ext uc_jupyter does   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from uc_jupyter.catalog import get_catalog
from uc_jupyter.distributed.shared import shutdown_shared_pool
from uc_jupyter.jupyter.completer import complete_line, given_source, magic_part
from uc_jupyter.jupyter.magics import LOAD_OPTIONS, UCMagics
from uc_jupyter.loading import TABLE_ONLY, TABLE_TARGETS, VOLUME_ONLY, VOLUME_TARGETS, source_kind

__all__ = ["register", "unregister"]

# Values completed after an option: its choices (--to, --decode, --labels), as the parser checks them.
_VALUES = {option.name: tuple(option.choices) for option in LOAD_OPTIONS if option.choices}
# Once the line names its source, what load() accepts for that kind: its options and --to's targets.
_NOT_FOR = {"table": VOLUME_ONLY, "volume": TABLE_ONLY}
_TARGETS = {"table": TABLE_TARGETS, "volume": VOLUME_TARGETS}


def register(ipython: Any) -> UCMagics:
    from uc_jupyter.tables.spark import quiet_pandas_version_warning
    from uc_jupyter.telemetry.mlflow_runs import quiet_mlflow_logging

    quiet_mlflow_logging()  # MLflow's INFO lines are not for notebook cells
    quiet_pandas_version_warning()  # nor PySpark's note on pandas versions
    magics = UCMagics(shell=ipython)
    ipython.register_magics(magics)
    unregister_completer(ipython)
    ipython.Completer.custom_matchers.append(_matcher(magics))
    return magics


def unregister(ipython: Any) -> None:
    unregister_completer(ipython)
    shutdown_shared_pool()


def unregister_completer(ipython: Any) -> None:
    matchers = ipython.Completer.custom_matchers
    matchers[:] = [m for m in matchers if not getattr(m, "uc_jupyter", False)]


def _matcher(magics: UCMagics) -> Any:
    """An IPython matcher for ``%uc_load`` lines that hides Python's own suggestions there."""
    from IPython.core.completer import CompletionContext, SimpleCompletion, context_matcher

    @context_matcher()  # type: ignore[untyped-decorator]
    def complete_uc_load(context: CompletionContext) -> dict[str, Any]:
        line = magic_part(context.text_until_cursor.rsplit("\n", 1)[-1], "%uc_load")
        if line is None:
            return {"completions": [], "suppress": False}
        options, values = _offered(given_source(line))
        words = complete_line(
            line, get_catalog(), default_catalog=magics.default_catalog, options=options, values=values
        )
        return {
            "completions": [SimpleCompletion(word, type="uc_jupyter") for word in words],
            "suppress": True,
            "matched_fragment": line.split(" ")[-1],
        }

    complete_uc_load.uc_jupyter = True
    return complete_uc_load


def _offered(source: str | None) -> tuple[list[str], dict[str, tuple[str, ...]]]:
    """The option names and values to offer on a line whose source is ``source``: every one before
    it is named, then only what load() accepts for a table or a volume."""
    try:
        kind = source_kind(source) if source is not None else None
    except ValueError:
        kind = None
    if kind is None:
        return [name for option in LOAD_OPTIONS for name in _names(option)], _VALUES
    wrong = _NOT_FOR[kind]
    options = [name for option in LOAD_OPTIONS if option.keyword not in wrong for name in _names(option)]
    return options, _VALUES | {"--to": _TARGETS[kind]}


def _names(option: Any) -> list[str]:
    names = [option.name, *option.aliases]
    if getattr(option, "negatable", False):
        names.append("--no-" + option.name.removeprefix("--"))
    return names
