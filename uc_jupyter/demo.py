"""Demo data for the embedded catalog, and the end-to-end job behind ``make demo``.

``init_demo()`` builds, without downloading anything: catalog ``main``, schema ``main.ml``, the Delta
table ``main.ml.iris`` (generated iris-like measurements and a label), the volume
``main.ml.images`` (small generated PNG shapes in class folders plus ``labels.csv``) and a second
principal ``alice`` who may read the volume but not the table. ``run_demo()`` is the main job: it
reads the table to pandas and NumPy through the catalog, lists the volume, and shows alice's
denied access with its one-line error.

Example:
    $ uc-jupyter demo init
    $ python -m uc_jupyter.demo
"""

from __future__ import annotations

import contextlib
import csv
import io
import sys
import uuid
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from uc_jupyter.catalog import AlreadyExists, Catalog, NotFound, PermissionDenied, get_catalog

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["DemoSummary", "init_demo", "run_demo"]

CATALOG, SCHEMA, TABLE, VOLUME = "main", "main.ml", "main.ml.iris", "main.ml.images"
DENIED_PRINCIPAL = "alice"
SHAPES = ("circle", "square", "triangle")
# Per-species means of the classic iris measurements (sepal length/width, petal length/width, cm).
_SPECIES_MEANS = {
    "setosa": (5.01, 3.43, 1.46, 0.25),
    "versicolor": (5.94, 2.77, 4.26, 1.33),
    "virginica": (6.59, 2.97, 5.55, 2.03),
}
_FEATURES = ("sepal_length", "sepal_width", "petal_length", "petal_width")


@dataclass(frozen=True)
class DemoSummary:
    """What ``init_demo`` built (or found already built)."""

    table: str
    table_rows: int
    volume_path: str
    image_files: int
    classes: tuple[str, ...]
    denied_principal: str
    reused: bool

    def lines(self) -> list[str]:
        verb = "kept" if self.reused else "built"
        return [
            f"{verb} table {self.table}: {self.table_rows} rows",
            f"{verb} volume {self.volume_path}: {self.image_files} PNG images in "
            f"{len(self.classes)} class folders ({', '.join(self.classes)}) + labels.csv",
            f"principal {self.denied_principal}: may read {self.volume_path}, may not SELECT {self.table}",
        ]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        """In a notebook, what was built, a line each (not the dataclass's fields)."""
        printer.text("\n".join(self.lines()))


def init_demo(
    catalog: Catalog | None = None,
    *,
    force: bool = False,
    rows: int = 3000,
    images_per_class: int = 1000,
    seed: int = 0,
) -> DemoSummary:
    """Build the demo catalog objects; reuse them when already complete unless ``force``.

    Example:
        >>> init_demo(rows=300, images_per_class=10).table  # doctest: +SKIP
        'main.ml.iris'
    """
    cat = catalog or get_catalog()
    if not force and _demo_complete(cat):
        return _summary(cat, reused=True)
    _ensure(cat.create_catalog, CATALOG)
    _ensure(cat.create_schema, SCHEMA)
    cat.create_table(TABLE, iris_table(rows, seed), mode="overwrite", comment="generated iris measurements")
    try:
        cat.get_volume(VOLUME)
    except NotFound:
        cat.create_volume(VOLUME, comment="generated PNG shapes in class folders")
    _write_images(cat, images_per_class, seed)
    _ensure(cat.create_principal, DENIED_PRINCIPAL)
    for securable, privilege in ((CATALOG, "USE CATALOG"), (SCHEMA, "USE SCHEMA"), (VOLUME, "READ VOLUME")):
        cat.grant(securable, privilege, DENIED_PRINCIPAL)
    return _summary(cat, reused=False)


def iris_table(rows: int, seed: int = 0) -> pa.Table:
    """``rows`` iris-like rows: four float measurements, ``species`` and an integer ``label``."""
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    labels = rng.integers(0, len(_SPECIES_MEANS), size=rows)
    means = np.array(list(_SPECIES_MEANS.values()))[labels]
    features = np.round(means + rng.normal(0.0, 0.3, size=means.shape), 2).clip(0.1)
    columns: dict[str, Any] = {name: features[:, i] for i, name in enumerate(_FEATURES)}
    columns["species"] = np.array(list(_SPECIES_MEANS))[labels]
    columns["label"] = labels.astype("int64")
    return pa.table(columns)


def render_shape(shape: str, rng: Any, size: int = 32) -> bytes:
    """A small PNG of ``shape`` in a random colour, position and size."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), tuple(int(v) for v in rng.integers(0, 60, 3)))
    draw = ImageDraw.Draw(image)
    colour = tuple(int(v) for v in rng.integers(120, 256, 3))
    r = int(rng.integers(size // 5, size // 3))
    cx, cy = (int(v) for v in rng.integers(r, size - r, 2))
    if shape == "circle":
        draw.ellipse((cx - r, cy - r, cx + r, cy + r), fill=colour)
    elif shape == "square":
        draw.rectangle((cx - r, cy - r, cx + r, cy + r), fill=colour)
    else:
        draw.polygon(((cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)), fill=colour)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def _write_images(cat: Catalog, per_class: int, seed: int) -> None:
    """Write the images into a hidden build folder, then move it into place (nothing half-written)."""
    import numpy as np

    root = cat.resolve_volume_path(f"/Volumes/{VOLUME.replace('.', '/')}", write=True)
    fs, base = root.fs, root.path.rstrip("/")
    build = f"{base}/.build-{uuid.uuid4().hex}"
    rng = np.random.default_rng(seed)
    labels = io.StringIO()
    writer = csv.writer(labels, lineterminator="\n")
    writer.writerow(["path", "label", "label_id"])
    try:
        for label_id, shape in enumerate(SHAPES):
            fs.makedirs(f"{build}/{shape}", exist_ok=True)
            for i in range(per_class):
                name = f"{shape}/{shape}_{i:05d}.png"
                fs.pipe_file(f"{build}/{name}", render_shape(shape, rng))
                writer.writerow([name, shape, label_id])
        fs.pipe_file(f"{build}/labels.csv", labels.getvalue().encode())
        for entry in [*SHAPES, "labels.csv"]:
            if fs.exists(f"{base}/{entry}"):
                fs.rm(f"{base}/{entry}", recursive=True)
            fs.mv(f"{build}/{entry}", f"{base}/{entry}", recursive=True)
    finally:
        if fs.exists(build):
            fs.rm(build, recursive=True)


def _ensure(create: Any, name: str) -> None:
    with contextlib.suppress(AlreadyExists):
        create(name)


def _demo_complete(cat: Catalog) -> bool:
    try:
        cat.get_table(TABLE)
        root = cat.resolve_volume_path(f"/Volumes/{VOLUME.replace('.', '/')}/labels.csv")
        return bool(root.fs.exists(root.path)) and DENIED_PRINCIPAL in {p.name for p in cat.list_principals()}
    except (NotFound, PermissionDenied):
        return False


def _summary(cat: Catalog, *, reused: bool) -> DemoSummary:
    from uc_jupyter.tables.delta import open_delta

    volume = cat.get_volume(VOLUME)
    labels = cat.resolve_volume_path(f"{volume.path}/labels.csv")
    with labels.open() as raw:  # the file resolved, not whatever its path leads to now
        entries = list(csv.DictReader(io.TextIOWrapper(raw, encoding="utf-8", newline="")))
    return DemoSummary(
        table=TABLE,
        table_rows=open_delta(TABLE, catalog=cat).count(),
        volume_path=volume.path,
        image_files=len(entries),
        classes=tuple(sorted({e["label"] for e in entries})),
        denied_principal=DENIED_PRINCIPAL,
        reused=reused,
    )


def run_demo(catalog: Catalog | None = None, out: Any = None) -> int:
    """The end-to-end job on the embedded defaults; returns the process exit code."""
    from uc_jupyter.catalog import current_principal
    from uc_jupyter.tables.delta import open_delta, read_arrow

    cat = catalog or get_catalog()
    write = (out or sys.stdout).write

    def say(line: str) -> None:
        write(line + "\n")

    say(f"uc_jupyter demo: catalog {getattr(cat, 'root', cat)!s}, principal {current_principal()}")
    frame = read_arrow(TABLE, catalog=cat).to_pandas()
    version = open_delta(TABLE, catalog=cat).version()
    say(f"table {TABLE} (Delta version {version}): {len(frame)} rows x {len(frame.columns)} columns")
    means = frame.groupby("species")[list(_FEATURES)].mean().round(2)
    for species, row in means.iterrows():
        say(f"  pandas  mean of {species:<10}: " + ", ".join(f"{k}={v:.2f}" for k, v in row.items()))
    features = frame[list(_FEATURES)].to_numpy()
    labels = frame["label"].to_numpy()
    say(f"  numpy   features {features.shape} {features.dtype}, labels {labels.shape} {labels.dtype}")

    volume = cat.get_volume(VOLUME)
    from uc_jupyter.data.volume.listing import list_volume

    # Listed as the datasets list it: a local volume walked from its root, no symlink followed.
    files = list_volume(cat.resolve_volume_path(volume.path), recursive=True).files
    per_class: dict[str, int] = {}
    for file in files:
        if "/" in file.relative:
            per_class[file.relative.split("/", 1)[0]] = per_class.get(file.relative.split("/", 1)[0], 0) + 1
    total = sum(file.size for file in files)
    say(
        f"volume {volume.path}: {len(files)} files, {total / 1e6:.1f} MB; "
        + ", ".join(f"{k} {v}" for k, v in sorted(per_class.items()))
    )

    _stream_images(cat, volume.path, say)
    _tables_at_scale(cat, say)
    _train_on_ranks(say)

    with cat.as_principal(DENIED_PRINCIPAL):
        visible = cat.resolve_volume_path(f"{volume.path}/labels.csv")
        with visible.open() as handle:
            size = handle.seek(0, io.SEEK_END)
        say(f"as {DENIED_PRINCIPAL}: reads {visible.volume_path} ({size} bytes)")
        try:
            read_arrow(TABLE, catalog=cat)
        except PermissionDenied as denied:
            say(f"as {DENIED_PRINCIPAL}: PermissionDenied: {denied}")
        else:
            say(f"as {DENIED_PRINCIPAL}: unexpectedly allowed to read {TABLE}")
            return 1
    return 0


def _tables_at_scale(cat: Catalog, say: Any) -> None:
    """The table through Spark Connect (a local server, started once) and straight into PyTorch."""
    from uc_jupyter.data import DataLoader, UCTableDataset
    from uc_jupyter.tables import table

    counts = table(TABLE, catalog=cat).groupBy("species").count().orderBy("species").collect()
    say("Spark Connect: " + ", ".join(f"{row['species']} {row['count']}" for row in counts) + f" rows in {TABLE}")
    rows = UCTableDataset(TABLE, columns=[*_FEATURES, "label"], batch_size=512, shuffle=True, catalog=cat)
    loader = DataLoader(rows, batch_size=None, num_workers=2, multiprocessing_context="fork")
    batches = list(loader)
    say(
        f"UCTableDataset {TABLE} (Delta version {rows.version}): {sum(len(b['label']) for b in batches)} rows "
        f"in {len(batches)} batches of tensors from 2 workers; the local Spark server stays for "
        "later kernels and stops itself when idle (uc-jupyter spark status)"
    )


def _train_on_ranks(say: Any) -> None:
    """Data-parallel training of a linear classifier on 2 ranks (CPU ranks with gloo without GPUs)."""
    import warnings

    from uc_jupyter.distributed import distributed, shutdown_shared_pool

    with warnings.catch_warnings():  # the demo says itself that these are CPU ranks
        warnings.simplefilter("ignore")
        results = distributed(gpus=2)(_train_linear).distributed(epochs=5)
    shutdown_shared_pool()
    for rank, rows, accuracy in results:
        say(f"  rank {rank}: trained on {rows} rows of its own shard, accuracy {accuracy:.2f}")
    say(f"@distributed(gpus=2): {len(results)} ranks trained one DistributedDataParallel model on {TABLE}")


def _train_linear(epochs: int) -> tuple[int, int, float]:
    """Runs on every rank: each reads its own rows of the table and DDP averages the gradients."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from uc_jupyter.data import DataLoader, UCTableDataset

    rows = UCTableDataset(TABLE, columns=[*_FEATURES, "label"], batch_size=128, shuffle=True)
    model = DistributedDataParallel(torch.nn.Sequential(torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 3)))
    optimiser = torch.optim.SGD(model.parameters(), lr=0.5)
    seen = correct = 0
    for epoch in range(epochs):
        rows.set_epoch(epoch)
        seen = correct = 0
        for batch in DataLoader(rows, batch_size=None, num_workers=0, mlflow=False):
            features = torch.stack([batch[name].float() for name in _FEATURES], dim=1)
            labels = batch["label"].long()
            logits = model(features)
            loss = torch.nn.functional.cross_entropy(logits, labels)
            optimiser.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            optimiser.step()
            seen += len(labels)
            correct += int((logits.argmax(dim=1) == labels).sum())
    return dist.get_rank(), seen, correct / max(seen, 1)


def _stream_images(cat: Catalog, path: str, say: Any) -> None:
    """The volume into PyTorch: decoded (image, label) batches, then the shared cache at work."""
    import torch

    from uc_jupyter.data import DataLoader, UCVolumeDataset, decode_bytes, labelled_folder, map_paths

    images = labelled_folder(path, shuffle=True, seed=0, catalog=cat)
    loader = DataLoader(images, batch_size=64, num_workers=2, multiprocessing_context="fork")
    batches = [(x, y) for x, y in loader]
    counts = torch.bincount(torch.cat([y for _, y in batches]), minlength=len(images.classes)).tolist()
    x, _ = batches[0]
    say(
        f"UCVolumeDataset {path}: {len(batches)} batches of {tuple(x.shape)} {x.dtype} from 2 DataLoader workers; "
        + ", ".join(f"{name} {n}" for name, n in zip(images.classes, counts, strict=True))
    )
    timing = loader.stats()
    p = timing.percentiles()
    say(
        f"  DataLoader: {timing.samples_per_second:.0f} samples/s, batch fetch p50 {p['p50'] * 1e3:.2f} ms, "
        f"p95 {p['p95'] * 1e3:.2f} ms, p99 {p['p99'] * 1e3:.2f} ms"
    )
    cached = map_paths(UCVolumeDataset(path, recursive=True, cache="always", catalog=cat), decode_bytes)
    for epoch in (1, 2):
        sum(len(item) for item in cached)
        stream = cached.stats().streams[0]
        say(f"  cached pass {epoch}: {stream.files} files so far, {stream.hits} cache hits, {stream.misses} downloads")
    fill = cached.stats().cache
    if fill is not None:
        say(f"  cache {fill.root}: {fill.resident_bytes / 1e6:.1f} MB resident in {fill.entries} files")


if __name__ == "__main__":
    sys.exit(run_demo())
