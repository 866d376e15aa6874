"""Package attributes imported on first use, so importing a package stays cheap (no torch, pyspark).

Example:
    >>> __getattr__ = lazy_attributes("uc_jupyter.data", {"FileCache": "uc_jupyter.data.cache"})
    >>> __getattr__("FileCache").__name__
    'FileCache'
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` that imports ``homes[name]`` and returns its ``name``."""

    def __getattr__(name: str) -> Any:
        if name in homes:
            return getattr(importlib.import_module(homes[name]), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
