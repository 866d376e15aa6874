"""Ray Data through the catalog (the ``[ray]`` extra): Ray's readers and writers reach catalog tables by
name, with the catalog's privilege checks and, over a server, credentials vended for the one table.

- :func:`catalog`: a ``ray.data.Catalog`` for ``ray.data.read_delta(name, catalog=...)`` and
  ``Dataset.write_delta(name, catalog=..., mode=...)`` of an existing table (:mod:`.resolver`);
- :func:`read_table`: any catalog table as a Dataset, deletion vectors honoured (:mod:`.read`);
- :func:`read_volume`: a volume folder's files (images, bytes, text lines, Parquet rows), READ VOLUME
  checked, each task with the volume's own credentials; :func:`write_volume`: a Dataset as Parquet files
  in a volume folder, WRITE VOLUME checked, visible by one commit (:mod:`.volumes`);
- :func:`write_delta`: a Dataset into a table in one commit, creating and registering a new table only
  when that commit is made; a failed write leaves neither a table nor files (:mod:`.write`).

Example:
    >>> import ray, uc_jupyter.ray                                                    # doctest: +SKIP
    >>> ds = ray.data.read_delta("main.ml.t", catalog=uc_jupyter.ray.catalog())        # doctest: +SKIP
    >>> uc_jupyter.ray.write_delta(ds.map(double), "main.ml.doubled")                  # doctest: +SKIP
"""

from uc_jupyter.ray.read import read_table
from uc_jupyter.ray.resolver import UCCatalog, catalog
from uc_jupyter.ray.volumes import read_volume, write_volume
from uc_jupyter.ray.write import write_delta

__all__ = ["UCCatalog", "catalog", "read_table", "read_volume", "write_delta", "write_volume"]
