"""``uc_jupyter.load``: a table or a volume folder as the object you train with, in one call.

``%uc_load SOURCE --option value`` is this function with ``option=value``: every magic option is one
of its keywords. SOURCE is ``catalog.schema.table``, ``schema.table`` (in ``default_catalog``) or a
``/Volumes/catalog/schema/volume/folder`` path.

Tables (``to=``): ``"spark"`` (a Spark Connect DataFrame, the default), ``"pandas"``, ``"numpy"``,
``"arrow"``, ``"hf"`` (a Hugging Face ``datasets.Dataset``) or ``"torch"`` (a ``UCTableDataset``
streaming the Delta files); ``columns``, ``where``, ``limit`` and ``version`` narrow what is read.

Volumes (``to=``): ``"loader"`` (a ``DataLoader``, the default), ``"dataset"`` (a ``UCVolumeDataset``)
or ``"paths"`` (the local paths of every file, cached); ``decode`` turns each file into a tensor,
text or bytes; ``labels="folder"`` pairs each item with its class folder's number (``dataset.classes``
names them, as :func:`~uc_jupyter.data.labelled_folder` does); ``batch_size``, ``num_workers``,
``prefetch_factor`` shape the loader; ``shuffle``, ``seed``, ``recursive``, ``include``, ``exclude``,
``cache_dir`` the dataset.

Which files a volume source reads: the folder's own files, or every file below it with ``recursive``
(``labels="folder"`` implies it). A folder whose files all lie in sub-folders, read without
``recursive``, is an error that says to add it, never a loader of nothing. ``decode="image"`` reads
image files only (by extension); ``include``/``exclude`` globs narrow the files further, and with
``include`` given exactly its matches are read (and decoded). What is left out is counted:
``dataset.skipped``, ``loader.stats().skipped``. The demo's images are all 32x32 RGB, so the default
collate stacks them; images of different sizes need a ``collate_fn`` of your own (or a resize in a
transform), as with any torch dataset.

A volume loader can continue a run (``resume="/Volumes/c/s/v/run"``): it starts where the data
position of the newest complete checkpoint in that folder says (one saved with
``dcp.save({"data": loader, ...}, storage_writer=UCVolumeWriter(...))``), on this grid or another:
the rest of the interrupted epoch, then whole epochs. A folder with no checkpoint yet is a first run:
one notice line, and the loader starts at the beginning, so the same notebook runs first and again.

Every option is checked as :mod:`uc_jupyter.options` says, before anything is read: flags are
``True``/``False``, counts whole numbers (``batch_size=0`` is refused, not replaced by a default),
``columns`` a list of names or one name as a str.

Example:
    >>> frame = load("main.ml.iris", to="pandas", columns=["species"], limit=5)            # doctest: +SKIP
    >>> loader = load("/Volumes/main/ml/images", decode="image", batch_size=64, shuffle=True)  # doctest: +SKIP
    >>> loader = load("/Volumes/main/ml/images", labels="folder", resume="/Volumes/main/ml/runs/r1")  # doctest: +SKIP
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from uc_jupyter import options as opt
from uc_jupyter.catalog import get_catalog
from uc_jupyter.catalog.rules.names import parse_name
from uc_jupyter.data.table.predicate import whole
from uc_jupyter.notices import notice

if TYPE_CHECKING:
    from uc_jupyter.catalog import Catalog

__all__ = ["DECODERS", "TABLE_ONLY", "TABLE_TARGETS", "VOLUME_ONLY", "VOLUME_TARGETS", "load", "source_kind"]

TABLE_TARGETS = ("spark", "pandas", "numpy", "arrow", "hf", "torch")
VOLUME_TARGETS = ("loader", "dataset", "paths")
DECODERS = ("image", "text", "bytes", "none")

# Which keywords make sense for which kind of source (the magic's options, by keyword): load()
# refuses the others, and %uc_load's completion does not offer them.
TABLE_ONLY = ("columns", "where", "limit", "version")
VOLUME_ONLY = (
    "decode",
    "num_workers",
    "prefetch_factor",
    "recursive",
    "include",
    "exclude",
    "labels",
    "cache_dir",
    "resume",
)
LABELS = ("folder",)
DEFAULT_BATCH_SIZE = 32
RESUME_KEY = "data"  # where a checkpoint holds the loader's data position: dcp.save({"data": loader, ...})


def source_kind(source: str) -> Literal["table", "volume"]:
    """``"volume"`` for a ``/Volumes/...`` path, ``"table"`` for a dotted name; a one-line error otherwise."""
    if not isinstance(source, str) or not source.strip():
        raise ValueError("give a table name (catalog.schema.table or schema.table) or a /Volumes/... path")
    if source.startswith("/"):
        if not source.startswith("/Volumes/"):
            raise ValueError(f"{source} is not a volume path: they start with /Volumes/<catalog>/<schema>/<volume>")
        return "volume"
    return "table"


def load(
    source: str | Sequence[str],
    *,
    to: str | None = None,
    columns: str | Sequence[str] | None = None,
    where: str | None = None,
    limit: int | None = None,
    version: int | None = None,
    decode: str | None = None,
    batch_size: int | None = None,
    num_workers: int | None = None,
    prefetch_factor: int | None = None,
    shuffle: bool = False,
    seed: int = 0,
    recursive: bool = False,
    include: str | Sequence[str] | None = None,
    exclude: str | Sequence[str] | None = None,
    labels: str | None = None,
    cache_dir: str | None = None,
    monitor: bool = False,
    resume: str | None = None,
    weights: Sequence[float] | None = None,
    until: str | None = None,
    steps: int | None = None,
    default_catalog: str = "main",
    catalog: Catalog | None = None,
) -> Any:
    """Load ``source`` as ``to``; see the module documentation for the choices.

    ``%uc_load``'s help is made from this docstring's sections (each option's line from "Args:",
    the examples from "Notebook:") and the signature's defaults.

    Args:
        source: a table (catalog.schema.table, or schema.table in the default catalog) or a
            /Volumes/catalog/schema/volume/folder path; several (a list, or several on the
            %uc_load line) with weights: one Mix of them (a loader or, --to dataset, the Mix).
        to: what to return: spark, pandas, numpy, arrow, hf or torch for tables; loader, dataset
            or paths for volumes (default: spark for tables, loader for volumes).
        columns: the table columns to read, by name (default: every column).
        where: a SQL filter on the table's rows, e.g. "label = 1" (default: every row).
        limit: read at most this many rows (default: no limit).
        version: the table version to read (default: the newest).
        decode: turn each volume file into an image tensor, text or bytes: image, text, bytes or
            none (default: none, the local path).
        batch_size: items per batch of a loader, rows per batch of --to torch (default: 32 for
            loaders, 1024 for --to torch).
        num_workers: DataLoader worker processes (default: 6, or the CPUs this process may use if
            fewer).
        prefetch_factor: batches each worker loads ahead (default: 4 with workers).
        shuffle: a new order every epoch, the same on every rank.
        seed: the seed of the shuffled order.
        recursive: read the files of sub-folders too; --labels folder implies it.
        include: read only files whose path below the folder matches these globs, e.g. "*.png"
            (comma-separated in %uc_load); with --decode image it replaces the image-file filter
            (default: every file; image files for --decode image).
        exclude: leave out files whose path below the folder matches these globs (default: none).
        labels: folder: yield (item, label) pairs numbering the class sub-folders in sorted order;
            dataset.classes names them (default: no labels).
        cache_dir: the shared local cache's folder (default: the cache under UC_JUPYTER_HOME).
        monitor: show the live dashboard while a loader's pass runs.
        resume: a /Volumes folder of checkpoints (UCVolumeWriter's): the loader continues from the
            data position ("data") of the newest complete one, on any number of ranks and workers
            (a complete checkpoint's own folder: that one); none there yet: one notice line and a
            fresh start (default: start at the beginning).
        weights: one number per source of several, their proportions in the mix, e.g. 3,1
            (see uc_jupyter.data.Mix; each option applies to every source of its kind)
            (default: none, one source).
        until: when a mix epoch ends: all_seen, first_exhausted or steps (default: all_seen).
        steps: the samples of a mix epoch with --until steps (default: none).
        default_catalog: the catalog of two-part names (schema.table).
        catalog: the catalog to read through (default: get_catalog()).

    Notebook:
        loader = %uc_load /Volumes/main/ml/images --labels folder --decode image --batch-size 64 --shuffle
        df = %uc_load main.ml.iris --to pandas --columns sepal_length,species --where "label = 1"
        ds = %uc_load /Volumes/main/ml/images/circle --to dataset --include "*.png" --exclude "*_0000*"

    Example:
        >>> load("main.ml.iris", to="numpy", columns=["sepal_length"], where="label = 1")  # doctest: +SKIP
        >>> x, y = next(iter(load("/Volumes/main/ml/images", decode="image", labels="folder")))  # doctest: +SKIP
        >>> mixed = load(["/Volumes/main/ml/curated", "/Volumes/main/ml/crawl"], weights=[3, 1])  # doctest: +SKIP
    """
    if not isinstance(source, str):
        return _load_mix(
            source,
            weights=weights,
            until=until,
            steps=steps,
            options={
                "to": to,
                "columns": columns,
                "where": where,
                "limit": limit,
                "version": version,
                "decode": decode,
                "batch_size": batch_size,
                "num_workers": num_workers,
                "prefetch_factor": prefetch_factor,
                "shuffle": shuffle,
                "seed": seed,
                "recursive": recursive,
                "include": include,
                "exclude": exclude,
                "labels": labels,
                "cache_dir": cache_dir,
                "monitor": monitor,
                "resume": resume,
            },
            default_catalog=default_catalog,
            catalog=catalog,
        )
    for keyword, value in (("weights", weights), ("until", until), ("steps", steps)):
        if value is not None:
            raise ValueError(f"{_option(keyword)} applies to several sources mixed, not to one ({source})")
    kind = source_kind(source)
    columns = opt.column_names("columns", columns)
    where = opt.text("where", where)
    if where:
        whole(where)  # a filter the engines would read only the start of is refused before anything is read
    limit = opt.maybe_whole_number("limit", limit)
    version = opt.maybe_whole_number("version", version)
    batch_size = opt.maybe_whole_number("batch_size", batch_size, minimum=1)
    num_workers = opt.maybe_whole_number("num_workers", num_workers)
    prefetch_factor = opt.maybe_whole_number("prefetch_factor", prefetch_factor, minimum=1)
    opt.check_prefetch_factor(num_workers, prefetch_factor)  # as the DataLoader would, before anything is listed
    shuffle = opt.flag("shuffle", shuffle)
    seed = opt.whole_number("seed", seed)
    recursive = opt.flag("recursive", recursive)
    includes = opt.globs("include", include, allow_empty=False) or None
    excludes = opt.globs("exclude", exclude) or None
    if labels is not None:
        labels = opt.choice("labels", labels, LABELS)
    monitor = opt.flag("monitor", monitor)
    if cache_dir is not None and not isinstance(cache_dir, str):
        raise TypeError(f"invalid cache_dir {cache_dir!r}: give a folder path (a str) or None")
    if resume is not None:
        resume = _checkpoint_folder(resume)
    given = {
        "columns": columns,
        "where": where,
        "limit": limit,
        "version": version,
        "decode": decode,
        "num_workers": num_workers,
        "prefetch_factor": prefetch_factor,
        "recursive": recursive or None,
        "include": includes,
        "exclude": excludes,
        "labels": labels,
        "cache_dir": cache_dir,
        "resume": resume,
    }
    wrong = TABLE_ONLY if kind == "volume" else VOLUME_ONLY
    for keyword in wrong:
        if given[keyword] is not None:
            what = "tables" if kind == "volume" else "/Volumes paths"
            raise ValueError(f"{_option(keyword)} applies to {what} only, not to {source}")
    cat = catalog or get_catalog()
    if kind == "table":
        from uc_jupyter.progress import waiting

        # Seconds on first use (a Spark server and its Python workers start): a progress line after 1 s.
        with waiting(f"loading {source}"):
            return _load_table(
                _table_name(source, default_catalog),
                to="spark" if to is None else to,
                columns=columns,
                where=where,
                limit=limit,
                version=version,
                batch_size=batch_size,
                shuffle=shuffle,
                seed=seed,
                monitor=monitor,
                catalog=cat,
            )
    return _load_volume(
        source,
        to="loader" if to is None else to,
        decode="none" if decode is None else decode,
        batch_size=batch_size,
        num_workers=num_workers,
        prefetch_factor=prefetch_factor,
        shuffle=shuffle,
        seed=seed,
        recursive=recursive,
        include=includes,
        exclude=excludes,
        labels=labels,
        cache_dir=cache_dir,
        monitor=monitor,
        resume=resume,
        catalog=cat,
    )


# What a mix's loader takes, not its sources; and the options of only one kind of source.
_MIX_LOADER = ("batch_size", "num_workers", "prefetch_factor", "monitor", "resume")
_MIX_TARGETS = ("loader", "dataset")


def _load_mix(
    sources: Sequence[str],
    *,
    weights: Sequence[float] | None,
    until: str | None,
    steps: int | None,
    options: dict[str, Any],
    default_catalog: str,
    catalog: Catalog | None,
) -> Any:
    """Several sources as one :class:`~uc_jupyter.data.Mix`: each made by :func:`load` as a dataset
    (``--to dataset`` for volumes, ``--to torch`` for tables) with the options of its kind, each
    checked against the catalog as it is made; then a loader of the mix unless ``to="dataset"``."""
    if not isinstance(sources, Sequence) or not sources or not all(isinstance(s, str) for s in sources):
        raise ValueError(f"give the sources to mix as a list of table names and /Volumes paths; got {sources!r}")
    if weights is None:
        raise ValueError(f"give weights= for the {len(sources)} sources, one number each (e.g. weights=[3, 1])")
    to = options.pop("to") or "loader"
    _choose(to, _MIX_TARGETS, "a mix")
    loader_options = {k: options.pop(k) for k in _MIX_LOADER}
    batch_size = opt.maybe_whole_number("batch_size", loader_options["batch_size"], minimum=1)
    if to == "dataset":
        for keyword, value in loader_options.items():
            if value not in (None, False):
                raise ValueError(f"{_option(keyword)} applies to a mix's loader, not to --to dataset")
    kinds = [source_kind(s) for s in sources]
    shared = {k: options.pop(k) for k in ("shuffle", "seed")}
    for keyword, value in options.items():  # each applies to the sources of its kind: some must be there
        kind = "table" if keyword in TABLE_ONLY else "volume"
        if value not in (None, False) and kind not in kinds:
            raise ValueError(f"{_option(keyword)} applies to {kind}s, and this mix has none")
    if options.get("limit") is not None:
        raise ValueError("--limit does not apply to a mix (each table is streamed whole)")
    cat = catalog or get_catalog()
    datasets = []
    for source, kind in zip(sources, kinds, strict=True):
        own = {k: v for k, v in options.items() if (k in TABLE_ONLY) == (kind == "table")}
        target = "torch" if kind == "table" else "dataset"
        datasets.append(load(source, to=target, default_catalog=default_catalog, catalog=cat, **shared, **own))
    from uc_jupyter.data import DataLoader, Mix

    mix = Mix(datasets, weights, until=until or "all_seen", steps=steps)
    if to == "dataset":
        return mix
    kwargs: dict[str, Any] = {"batch_size": DEFAULT_BATCH_SIZE if batch_size is None else batch_size}
    for keyword in ("num_workers", "prefetch_factor"):
        if loader_options[keyword] is not None:
            kwargs[keyword] = loader_options[keyword]
    loader = DataLoader(mix, monitor=opt.flag("monitor", loader_options["monitor"]), **kwargs)
    if loader_options["resume"] is not None:
        _resume(loader, _checkpoint_folder(loader_options["resume"]), cat)
    return loader


def _checkpoint_folder(resume: object) -> str:
    """``resume`` as a folder path; a one-line error for anything that is not a /Volumes folder."""
    if not isinstance(resume, str) or not resume.startswith("/Volumes/"):
        raise ValueError(
            f"invalid resume {resume!r}: give the /Volumes/<catalog>/<schema>/<volume>/... folder "
            "the checkpoints were saved under (UCVolumeWriter's run folder)"
        )
    return resume.rstrip("/")


def _table_name(source: str, default_catalog: str) -> str:
    name = parse_name(source, levels=(2, 3))
    if len(name.parts) == 2:
        name = parse_name(default_catalog, levels=(1,)).child(name.parts[0]).child(name.parts[1])
    return str(name)


def _load_table(
    name: str,
    *,
    to: str,
    columns: list[str] | None,
    where: str | None,
    limit: int | None,
    version: int | None,
    batch_size: int | None,
    shuffle: bool,
    seed: int,
    monitor: bool,
    catalog: Catalog,
) -> Any:
    _choose(to, TABLE_TARGETS, "tables")
    if to == "torch":
        for keyword, value in (("limit", limit), ("monitor", monitor or None)):
            if value is not None:
                raise ValueError(f"{_option(keyword)} does not apply to --to torch (a dataset streaming every row)")
        from uc_jupyter.data import UCTableDataset

        return UCTableDataset(
            name,
            columns=columns,
            filter=where,
            batch_size=1024 if batch_size is None else batch_size,
            version=version,
            shuffle=shuffle,
            seed=seed,
            catalog=catalog,
        )
    ignored = (
        ("batch_size", batch_size),
        ("shuffle", shuffle or None),
        ("seed", seed or None),
        ("monitor", monitor or None),
    )
    for keyword, value in ignored:
        if value is not None:
            raise ValueError(f"{_option(keyword)} applies to --to torch and to volumes, not to --to {to}")
    from uc_jupyter.tables import table

    frame = table(name, version=version, catalog=catalog)
    if columns:
        frame = frame.select(*columns)
    if where:
        frame = frame.where(whole(where))  # Spark must parse all of it
    if limit is not None:
        frame = frame.limit(limit)
    if to == "spark":
        return frame
    if to == "pandas":
        return frame.toPandas()
    if to == "numpy":
        return frame.toPandas().to_numpy()
    arrow = frame.toArrow()
    if to == "arrow":
        return arrow
    import datasets

    return datasets.Dataset(datasets.table.InMemoryTable(arrow))


def _load_volume(
    path: str,
    *,
    to: str,
    decode: str,
    batch_size: int | None,
    num_workers: int | None,
    prefetch_factor: int | None,
    shuffle: bool,
    seed: int,
    recursive: bool,
    include: tuple[str, ...] | None,
    exclude: tuple[str, ...] | None,
    labels: str | None,
    cache_dir: str | None,
    monitor: bool,
    resume: str | None,
    catalog: Catalog,
) -> Any:
    _choose(to, VOLUME_TARGETS, "volumes")
    _choose(decode, DECODERS, "--decode")
    loader_options = {"batch_size": batch_size, "num_workers": num_workers, "prefetch_factor": prefetch_factor}
    if to != "loader":
        for keyword, value in (*loader_options.items(), ("monitor", monitor or None)):
            if value is not None:
                raise ValueError(f"{_option(keyword)} applies to --to loader, not to --to {to}")
        if resume is not None:
            raise ValueError(
                f"--resume applies to --to loader, not to --to {to}: a dataset continues from a data "
                "position through its own load_state_dict()"
            )
    if to == "paths" and decode != "none":
        raise ValueError("--decode does not apply to --to paths (paths are what is not decoded)")
    from uc_jupyter.data import DataLoader, UCVolumeDataset, decode_bytes, decode_image, decode_text, labelled_folder

    decoder = {"image": decode_image, "text": decode_text, "bytes": decode_bytes, "none": None}[decode]
    # The decoder goes in with the listing: decode="image" lists image files only, and a folder of
    # class folders read without recursive says so there.
    common: dict[str, Any] = {"include": include, "exclude": exclude, "shuffle": shuffle, "seed": seed}
    common.update(cache_dir=cache_dir, catalog=catalog)
    if labels == "folder":  # one shape for labelled folders: labelled_folder's (it reads sub-folders)
        dataset = labelled_folder(path, decode=decoder, **common)
    else:
        dataset = UCVolumeDataset(path, recursive=recursive, transform=decoder, **common)
    if to == "paths":
        return list(dataset)
    if to == "dataset":
        return dataset
    kwargs: dict[str, Any] = {"batch_size": DEFAULT_BATCH_SIZE if batch_size is None else batch_size}
    if num_workers is not None:
        kwargs["num_workers"] = num_workers
    if prefetch_factor is not None:
        kwargs["prefetch_factor"] = prefetch_factor
    loader = DataLoader(dataset, monitor=monitor, **kwargs)
    if resume is not None:
        _resume(loader, resume, catalog)
    return loader


def _resume(loader: Any, run: str, catalog: Catalog) -> None:
    """Move ``loader`` to the data position of the newest complete checkpoint under ``run`` (or of
    ``run`` itself, when it is a complete checkpoint).

    Under torch.distributed every rank must resume from the same checkpoint, so rank 0 picks it and
    tells the others (a save committing meanwhile would otherwise split them between two); a refusal
    on rank 0 is raised on every rank, which would otherwise wait for rank 0 for ever.
    """
    import torch.distributed as dist
    from torch.distributed.checkpoint.api import CheckpointException
    from torch.distributed.checkpoint.state_dict_loader import load as checkpoint_load

    from uc_jupyter.checkpoint import UCVolumeReader

    together = dist.is_available() and dist.is_initialized()
    first = not together or dist.get_rank() == 0
    chosen: list[Any] = [_newest(run, catalog) if first else None]
    if together:
        dist.broadcast_object_list(chosen, src=0)
    newest, itself, refused = chosen[0]
    if refused is not None:
        raise refused
    if newest is None:
        if first:
            notice(f"no complete checkpoint under {run} yet: the loader starts at the beginning", key=("resume", run))
        return
    reader = UCVolumeReader(newest, catalog=catalog)
    saved = reader.read_metadata().state_dict_metadata
    if not any(key == RESUME_KEY or key.startswith(RESUME_KEY + ".") for key in saved):
        raise ValueError(
            f"checkpoint {newest} holds no data position: save the loader with it, "
            f'dcp.save({{"{RESUME_KEY}": loader, ...}}, storage_writer=UCVolumeWriter(...))'
        )
    try:
        with warnings.catch_warnings():  # torch warns that one process loads alone: that is what it is asked
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
            checkpoint_load({RESUME_KEY: loader}, storage_reader=reader, no_dist=not together)
    except CheckpointException as failed:  # a BaseException carrying each rank's error: raise the first
        errors = [error for error, _ in failed.failures.values() if isinstance(error, Exception)]
        if errors:
            raise errors[0] from None
        raise
    if first:
        given = " (the checkpoint given itself, not a run folder of them)" if itself else ""
        notice(f"the loader continues from {newest}{given}", key=("resumed", newest, itself))


def _newest(run: str, catalog: Catalog) -> tuple[str | None, bool, Exception | None]:
    """The checkpoint to resume from (``run`` itself when it is one, else the newest under it; None:
    none yet), whether it is ``run`` itself, or why it cannot be known."""
    from uc_jupyter.checkpoint.commit import resume_point

    try:
        return *resume_point(run, catalog=catalog), None
    except Exception as error:
        return None, False, error


def _choose(value: str, choices: Sequence[str], what: str) -> None:
    if value not in choices:
        label = "--to for " + what if what in ("tables", "volumes", "a mix") else what
        raise ValueError(f"{label} must be one of {', '.join(choices)}; got {value!r}")


def _option(keyword: str) -> str:
    return "--" + keyword.replace("_", "-")
