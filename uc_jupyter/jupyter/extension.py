"""Registering and unregistering the extension in an IPython shell.

Example:
    >>> register(get_ipython())   # what %load_ext uc_jupyter does   # doctest: +SKIP
"""

from __future__ import annotations

from typing import Any

from uc_jupyter.catalog import get_catalog
from uc_jupyter.distributed.shared import shutdown_shared_pool
from uc_jupyter.jupyter.completer import complete_line
from uc_jupyter.jupyter.magics import LOAD_OPTIONS, UCMagics

__all__ = ["register", "unregister"]

# Values completed after an option: its choices (--to, --decode, --labels), as the parser checks them.
_VALUES = {option.name: tuple(option.choices) for option in LOAD_OPTIONS if option.choices}


def register(ipython: Any) -> UCMagics:
    from uc_jupyter.tables.spark import quiet_pandas_version_warning
    from uc_jupyter.telemetry.mlflow_sink import quiet_mlflow_logging

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

    options = [name for option in LOAD_OPTIONS for name in _names(option)]

    @context_matcher()  # type: ignore[untyped-decorator]
    def complete_uc_load(context: CompletionContext) -> dict[str, Any]:
        line = context.text_until_cursor.rsplit("\n", 1)[-1].lstrip()
        if not line.startswith("%uc_load "):
            return {"completions": [], "suppress": False}
        words = complete_line(
            line, get_catalog(), default_catalog=magics.default_catalog, options=options, values=_VALUES
        )
        return {
            "completions": [SimpleCompletion(word, type="uc_jupyter") for word in words],
            "suppress": True,
            "matched_fragment": line.split(" ")[-1],
        }

    complete_uc_load.uc_jupyter = True
    return complete_uc_load


def _names(option: Any) -> list[str]:
    names = [option.name, *option.aliases]
    if getattr(option, "negatable", False):
        names.append("--no-" + option.name.removeprefix("--"))
    return names
