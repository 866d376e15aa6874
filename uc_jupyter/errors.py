"""The errors every layer may raise, and the one-line messages they carry.

They live at the bottom of the package, below storage and the catalog, because both raise them: a
volume folder that does not exist is :class:`NotFound` whether the catalog or the storage found out.
:mod:`uc_jupyter.catalog` exports them under the names users know, and they carry those names
(``uc_jupyter.catalog.NotFound`` in a traceback, and when pickled across processes).
"""

from __future__ import annotations

import os
from collections.abc import Callable

__all__ = [
    "CatalogError",
    "EscapesVolume",
    "NotFound",
    "OneLine",
    "UcJupyterWarning",
    "first_line",
    "set_verbose",
    "verbose",
]

_verbose: bool | None = None


def verbose() -> bool:
    """Whether errors show everything: uc_jupyter's internal frames in rank errors, and the client
    logs of the libraries underneath (pyspark's); :func:`set_verbose`, else ``UC_JUPYTER_VERBOSE``.

    Example:
        >>> set_verbose(True); verbose()
        True
        >>> set_verbose(None)   # back to the environment variable
    """
    if _verbose is not None:
        return _verbose
    return os.environ.get("UC_JUPYTER_VERBOSE", "").strip().lower() in ("1", "true", "yes", "on")


def set_verbose(on: bool | None) -> None:
    """Show (True) or hide (False) everything; None: follow ``UC_JUPYTER_VERBOSE``."""
    global _verbose
    _verbose = on


class OneLine:
    """A mistake of the caller's whose message says it all: IPython shows ``Type: message`` as the
    cell's error, without the traceback through uc_jupyter's modules (as ``%uc_load`` shows it);
    :func:`verbose` shows the traceback again. Outside IPython nothing changes.

    Example:
        >>> class Refused(OneLine, ValueError): ...
        >>> Refused("no column 'x'")._render_traceback_()
        ["Refused: no column 'x'"]
    """

    @property
    def _render_traceback_(self) -> Callable[[], list[str]]:
        """IPython's hook (the lines it shows for the exception); absent when verbose, so IPython
        shows its own traceback (raising from the hook itself prints IPython's own failure). Lines
        set on the instance win (a rank's report, :mod:`uc_jupyter.distributed.errors`)."""
        given = self.__dict__.get("_shown_lines")
        if given is not None:
            return given  # type: ignore[no-any-return]
        if verbose():
            raise AttributeError("_render_traceback_")
        line = (str(self).strip().splitlines() or [""])[0]
        return lambda: [f"{type(self).__name__}: {line}"]

    @_render_traceback_.setter
    def _render_traceback_(self, shown: Callable[[], list[str]]) -> None:
        self.__dict__["_shown_lines"] = shown


class CatalogError(OneLine, Exception):
    """Base of the catalog's errors; each message is one line naming the object."""

    __module__ = "uc_jupyter.catalog"


class NotFound(CatalogError, LookupError):
    """The named catalog, schema, table, volume, file or principal does not exist."""

    __module__ = "uc_jupyter.catalog"


class EscapesVolume(CatalogError, PermissionError):
    """A volume path that leads outside its volume (e.g. through a symlink) was refused."""

    __module__ = "uc_jupyter.catalog"


class UcJupyterWarning(UserWarning):
    """Base of every warning uc_jupyter gives (something worked, but not all of it): one class, so
    callers (and the test suite) may filter them together.

    Example:
        >>> import warnings
        >>> with warnings.catch_warnings(record=True) as seen:
        ...     warnings.simplefilter("always")
        ...     warnings.warn("kept the old files", UcJupyterWarning)
        >>> issubclass(seen[0].category, UserWarning)
        True
    """


def first_line(exc: BaseException) -> str:
    """The first line of ``exc``'s message (deltalake's carry Rust backtraces), or its type's name.

    Example:
        >>> first_line(ValueError("bad input\\n   0: <unknown>"))
        'bad input'
    """
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
