"""uc_jupyter: load training data through a Unity Catalog from any Jupyter notebook.

``uc_jupyter.load(source, **options)`` turns a table or a volume folder into a frame, dataset or
loader; ``%load_ext uc_jupyter`` adds the ``%uc_load`` and ``%%uc_distributed`` magics. Everything
heavy is imported on first use, so ``import uc_jupyter`` stays fast.

Example:
    >>> import uc_jupyter
    >>> frame = uc_jupyter.load("main.ml.iris", to="pandas")   # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uc_jupyter.lazy import lazy_attributes
from uc_jupyter.telemetry import watch
from uc_jupyter.version import __version__

if TYPE_CHECKING:
    from uc_jupyter.telemetry.model import Snapshot

__all__ = ["__version__", "load", "load_ipython_extension", "unload_ipython_extension"]

__getattr__ = lazy_attributes("uc_jupyter", {"load": "uc_jupyter.loading"})


def _loader_monitor(
    source: Callable[[], Snapshot], title: str, *, headroom: watch.Headroom | None = None
) -> watch.PassWatch:
    from uc_jupyter.widgets.monitor import LoaderMonitor

    return LoaderMonitor(source, title=title, headroom=headroom)


# The package is where the layers are put together: the loader and the rank pool (below the widgets)
# ask uc_jupyter.telemetry.watch for a live view, and this is the one they get.
watch.show_passes_with(_loader_monitor)


def _jupyter_labextension_paths() -> list[dict[str, str]]:
    """Where JupyterLab finds the built extension (``jupyter labextension develop``)."""
    return [{"src": "labextension", "dest": "uc-jupyter-labextension"}]


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext uc_jupyter``: register the magics and the ``%uc_load`` completer."""
    from uc_jupyter.jupyter.extension import register

    register(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    """``%unload_ext uc_jupyter``: stop the kernel's rank pool."""
    from uc_jupyter.jupyter.extension import unregister

    unregister(ipython)
