"""The ``%uc_load`` line the sidebar's "Insert %uc_load" writes for a table, a volume, a folder or a file.

One place makes these lines (the sidebar asks the server for them), so they use the magic's own
option names and are tested by running them (``tests/server/test_load_lines.py``):

- a table: ``df = %uc_load main.ml.iris --to pandas``;
- a folder holding images (most of the files a short look finds have an image extension) in class
  sub-folders: a shuffled training loader with labels, ``loader = %uc_load /Volumes/c/s/v/folder
  --decode image --labels folder --shuffle`` (``--labels folder`` reads the sub-folders; unshuffled,
  batches would come sorted by class); images directly in it: ``loader = %uc_load
  /Volumes/c/s/v/folder --decode image --shuffle`` (``--recursive`` when there are sub-folders too, or
  when the images lie deeper, as in ``train/cat/1.png``);
- any other folder: ``ds = %uc_load /Volumes/c/s/v/folder --to dataset`` (local paths, fetched
  lazily; ``--recursive`` when it has sub-folders); an empty one gets the same line, which says
  "holds no files to read" until files arrive;
- a file: its folder, narrowed to it: ``paths = %uc_load /Volumes/c/s/v --to paths --include labels.csv``.

Image files are told by extension, as ``--decode image`` tells them
(:func:`uc_jupyter.data.volume.decode.is_image_file`). The look into a folder is bounded
(:data:`MAX_LISTINGS` folder listings, :data:`MAX_SAMPLE` files, breadth first), so a line for a
volume of millions of files costs a few listings.

Example:
    >>> table_line("main.ml.iris")
    'df = %uc_load main.ml.iris --to pandas'
    >>> folder_line("/Volumes/main/ml/images", Sample(files=("labels.csv", "circle/0.png", "square/1.png")))
    'loader = %uc_load /Volumes/main/ml/images --decode image --labels folder --shuffle'
    >>> folder_line("/Volumes/main/ml/raw", Sample(files=("a.parquet",)))
    'ds = %uc_load /Volumes/main/ml/raw --to dataset'
"""

from __future__ import annotations

import shlex
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog.rules.names import parse_name, parse_volume_path

if TYPE_CHECKING:
    from uc_jupyter.catalog import Catalog

__all__ = [
    "MAX_LISTINGS",
    "MAX_SAMPLE",
    "Sample",
    "file_line",
    "folder_line",
    "load_line",
    "sample_folder",
    "table_line",
]

MAX_LISTINGS = 8  # folder listings one look into a folder may make
MAX_SAMPLE = 64  # files it looks at


@dataclass(frozen=True)
class Sample:
    """What a short look into a folder found: paths of files relative to it (``"a.png"``,
    ``"circle/0.png"``), and whether it has sub-folders."""

    files: tuple[str, ...] = ()
    has_folders: bool = False

    @property
    def images(self) -> tuple[str, ...]:
        from uc_jupyter.data.volume.decode import is_image_file

        return tuple(f for f in self.files if is_image_file(f))


def table_line(full_name: str) -> str:
    """The line for a table: a pandas frame (the quickest to look at; ``--to`` offers the others)."""
    return f"df = %uc_load {_word(full_name)} --to pandas"


def folder_line(path: str, sample: Sample) -> str:
    """The line for the volume folder ``path``, given what :func:`sample_folder` found in it."""
    recursive = " --recursive" if sample.has_folders else ""
    images = sample.images
    if images and 2 * len(images) >= len(sample.files):
        if all(f.count("/") == 1 for f in images):
            # Class folders (circle/, square/): a labelled loader; files beside them are skipped. Images
            # deeper down (train/cat/1.png) are not labelled: the first-level folders are no classes.
            return f"loader = %uc_load {_word(path)} --decode image --labels folder --shuffle"
        return f"loader = %uc_load {_word(path)}{recursive} --decode image --shuffle"
    return f"ds = %uc_load {_word(path)}{recursive} --to dataset"


def file_line(path: str) -> str:
    """The line for one file: the local path of that file, as a list of one (its folder, narrowed to it)."""
    folder, _, name = path.rpartition("/")
    if "," in name:  # --include splits its value at commas: the line would read other files
        from uc_jupyter.server.listing import BadRequest

        raise BadRequest(f"no %uc_load line for {path!r}: --include would split its name at the comma; rename it")
    return f"paths = %uc_load {_word(folder)} --to paths --include {_word(_glob_escape(name))}"


def sample_folder(catalog: Catalog, path: str) -> Sample:
    """A bounded breadth-first look into the volume folder ``path``: at most :data:`MAX_LISTINGS`
    listings and :data:`MAX_SAMPLE` files, in listing order."""
    from uc_jupyter.server.listing import list_folder

    files: list[str] = []
    has_folders = False
    queue: deque[str] = deque([""])
    listings = 0
    while queue and listings < MAX_LISTINGS and len(files) < MAX_SAMPLE:
        relative = queue.popleft()
        folder = list_folder(catalog, f"{path}/{relative}".rstrip("/") if relative else path)
        listings += 1
        for entry in folder.entries:
            inner = f"{relative}{entry.name}"
            if entry.directory:
                has_folders = has_folders or not relative
                queue.append(f"{inner}/")
            elif len(files) < MAX_SAMPLE:
                files.append(inner)
    return Sample(tuple(files), has_folders)


def load_line(catalog: Catalog, source: str) -> dict[str, Any]:
    """``{"source": canonical name or path, "line": the %uc_load line}`` for a table name or a ``/Volumes``
    path (a volume, folder or file). The table must exist; the volume path must be readable.

    Example:
        >>> load_line(catalog, "Main.ML.Iris")                                          # doctest: +SKIP
        {'source': 'main.ml.iris', 'line': 'df = %uc_load main.ml.iris --to pandas'}
    """
    if source.startswith("/"):
        path = str(parse_volume_path(source))
        try:
            return {"source": path, "line": folder_line(path, sample_folder(catalog, path))}
        except NotADirectoryError:
            return {"source": path, "line": file_line(path)}
    full_name = catalog.get_table(str(parse_name(source, levels=(3,)))).full_name
    return {"source": full_name, "line": table_line(full_name)}


def _word(value: str) -> str:
    """``value`` as one word of the magic's shlex parser (quoted only when it must be).

    A name IPython would read before the parser does is refused (BadRequest, 400): the line is
    made from names anyone who may write into the volume chooses, and quotes do not stop IPython
    from evaluating ``{...}`` (and ``$name``) in a magic's line, nor a line break from ending the
    line (a file named ``{__import__("os").system(...)}.csv`` ran its code in the kernel that ran
    the line: tests/security/test_notebook_features.py).
    """
    bad = next((c for c in value if c in "{}$" or len(f"x{c}x".splitlines()) > 1), None)  # as IPython splits
    if bad is not None:
        from uc_jupyter.server.listing import BadRequest

        raise BadRequest(
            f"no %uc_load line for {value!r}: IPython reads {bad!r} in a magic's line (as code, a variable "
            "or a line break); rename it, or call uc_jupyter.load() with the path"
        )
    return shlex.quote(value)


def _glob_escape(name: str) -> str:
    """A file name as a glob that matches only it (``[`` ``*`` ``?`` put in brackets, and white space at
    either end: --include strips each pattern, and `` a.txt`` would have read ``a.txt``)."""
    lead, trail = len(name) - len(name.lstrip()), len(name.rstrip())
    return "".join(f"[{c}]" if c in "[]*?" or not lead <= i < trail else c for i, c in enumerate(name))
