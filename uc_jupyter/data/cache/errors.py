"""What the cache raises and warns about.

Example:
    >>> issubclass(CacheBudgetError, OSError), issubclass(NotACacheFolder, ValueError)
    (True, True)
"""

from __future__ import annotations

from uc_jupyter.errors import UcJupyterWarning

__all__ = ["CacheBudgetError", "CacheIntegrityWarning", "NotACacheFolder"]


class CacheBudgetError(OSError):
    """A file cannot be cached without crossing the byte budget or the free-disk floor."""


class NotACacheFolder(ValueError):
    """The cache folder given holds files that are not a cache's: the cache refuses it rather than
    empty it (the message names the folder and what to do)."""


class CacheIntegrityWarning(UcJupyterWarning):
    """A cached file did not match what was downloaded (it is removed and downloaded again), or the
    cache's index was lost and rebuilt from the cached files."""
