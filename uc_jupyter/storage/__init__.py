"""The storage layer: every byte the project reads or writes, below the catalog and the data pipeline.

It imports nothing of uc_jupyter's above it (``make lint`` checks): the catalog asks it, never the
other way round. What it holds, by concept:

- URLs: :mod:`~uc_jupyter.storage.locations` (pure: the canonical form of a storage URL, containment)
  and :mod:`~uc_jupyter.storage.urls` (local paths, joins, fsspec filesystems, deltalake options).
- Options: :mod:`~uc_jupyter.storage.config` (fsspec-style options -> object_store's, for s3) and
  :mod:`~uc_jupyter.storage.cloud` (gs and Azure); :mod:`~uc_jupyter.storage.stores` says which
  object_store client serves a URL (one registration per scheme family);
  :mod:`~uc_jupyter.storage.credentials` and :mod:`~uc_jupyter.storage.regions` (s3).
- Reads: :mod:`~uc_jupyter.storage.reads` (``open_storage``: a volume folder's pages and downloads),
  :mod:`~uc_jupyter.storage.objects` (object_store; the fork rule), :mod:`~uc_jupyter.storage.tree`,
  :mod:`~uc_jupyter.storage.pages`, :mod:`~uc_jupyter.storage.transfers`,
  :mod:`~uc_jupyter.storage.filesystem` (fsspec), :mod:`~uc_jupyter.storage.downloads` (the
  ``Downloads`` interface and its jobs).
- Local folders, a backend like the others: :mod:`~uc_jupyter.storage.local_storage` (what
  ``open_storage`` gives for ``file://``), :mod:`~uc_jupyter.storage.nofollow` (the one walk that
  follows no symlink), :mod:`~uc_jupyter.storage.local_volume`,
  :mod:`~uc_jupyter.storage.local_downloads`, :mod:`~uc_jupyter.storage.local_writes`.
- Writes: :mod:`~uc_jupyter.storage.writes` (``open_writes``).
- Formats kept in storage: :mod:`~uc_jupyter.storage.delta_snapshot` (the one Delta opener) and
  :mod:`~uc_jupyter.storage.export_manifest` (a committed export's manifest).
- Failures: :mod:`~uc_jupyter.storage.errors` and :mod:`~uc_jupyter.storage.retry` (the one
  ``RetryPolicy``, which errors are transient).
"""

__all__: list[str] = []  # internal: no name of it is part of the public API (tests/test_public_api.py)
