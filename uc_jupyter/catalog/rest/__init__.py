"""The catalog as a client of a Unity Catalog server: :class:`~uc_jupyter.catalog.rest.client.RestCatalog`
over one HTTP client (``http``: retries, one-line errors), its governance and table calls, names as
the REST paths spell them, and the credentials the server vends (``vended``)."""
