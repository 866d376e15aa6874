"""The embedded catalog: :class:`~uc_jupyter.catalog.embedded.local.LocalCatalog`, a metastore in
SQLite under ``$UC_JUPYTER_HOME`` (``metastore``, ``rows``, ``migrations``, ``entry_locks``), the storage
model (``external``: credentials and external locations; ``secrets``), grants, tokens, table writes
and staging, and the listings a caller may see."""
