"""Checkpoints in volumes: ``torch.distributed.checkpoint`` storage into ``/Volumes`` folders.

- :class:`UCVolumeWriter` / :class:`UCVolumeReader`: a storage writer and reader over one checkpoint
  folder (WRITE VOLUME / READ VOLUME checked through the catalog; each rank writes its own files in
  parallel, staged on local disk and uploaded when the volume is remote; data files, then
  ``.metadata``, then the commit marker ``_COMMITTED``, so a reader never sees a partial checkpoint).
- :func:`latest`: the newest committed checkpoint of a run folder.

Example:
    >>> import torch.distributed.checkpoint as dcp
    >>> run = "/Volumes/main/ml/runs/resnet"
    >>> dcp.save({"model": model.state_dict()}, storage_writer=UCVolumeWriter(f"{run}/step-100", keep_last=3))
    ... # doctest: +SKIP
    >>> state = {"model": model.state_dict()}
    >>> dcp.load(state, storage_reader=UCVolumeReader(latest(run)))                       # doctest: +SKIP
"""

from uc_jupyter.checkpoint.commit import latest
from uc_jupyter.checkpoint.reader import UCVolumeReader
from uc_jupyter.checkpoint.rng import RandomState
from uc_jupyter.checkpoint.writer import UCVolumeWriter

__all__ = ["RandomState", "UCVolumeReader", "UCVolumeWriter", "latest"]
