"""Decoding wrappers through the public API: real PNG and text files in a local catalog volume."""

from __future__ import annotations

import collections
import doctest
import functools
import io
import os
import pickle
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.utils.data
from PIL import Image

from uc_jupyter.catalog import get_catalog
from uc_jupyter.data import (
    UCVolumeDataset,
    decode_bytes,
    decode_image,
    decode_text,
    labelled_folder,
    map_paths,
)
from uc_jupyter.data.volume import decode as decode_module
from uc_jupyter.data.volume.decode import reads_files

PICS = "/Volumes/main/ml/pics"
TEXTS = {"notes.txt": "héllo wörld ✓ 日本語\nsecond line\n", "plain.txt": "just ascii"}


def rgb_pixels(width: int, height: int) -> np.ndarray:
    """[height, width, 3] with pixel (x, y) = (30x, 40y, 10(x+y) + 5)."""
    y, x = np.mgrid[0:height, 0:width]
    return np.stack([30 * x, 40 * y, 10 * (x + y) + 5], axis=-1).astype(np.uint8)


def gray_pixels(width: int, height: int) -> np.ndarray:
    y, x = np.mgrid[0:height, 0:width]
    return (10 * x + 3 * y + 1).astype(np.uint8)


def rgba_pixels(width: int, height: int) -> np.ndarray:
    rgb = rgb_pixels(width, height)
    alpha = np.full((height, width, 1), 77, dtype=np.uint8)
    alpha[0, 0, 0] = 255
    return np.concatenate([rgb, alpha], axis=-1)


# relative path -> (Pillow mode, pixels); every image has its own shape so items identify themselves
IMAGES: dict[str, tuple[str, np.ndarray]] = {
    "cats/a_rgb.png": ("RGB", rgb_pixels(8, 6)),
    "cats/b_gray.png": ("L", gray_pixels(5, 4)),
    "dogs/c_rgba.png": ("RGBA", rgba_pixels(3, 7)),
    "dogs/d_rgb.png": ("RGB", rgb_pixels(2, 9)),
}
LABELS = {"cats": 0, "dogs": 1}
# (channels, height, width) of decode_image's RGB tensor -> label
EXPECTED_ITEMS = collections.Counter(
    ((3, *pixels.shape[:2]), LABELS[relative.split("/")[0]]) for relative, (_, pixels) in IMAGES.items()
)


@pytest.fixture
def pics(isolated_home: Path) -> Path:
    """The volume main.ml.pics, with class folders, files beside them, hidden and marker files."""
    cat = get_catalog()
    cat.create_catalog("main")
    cat.create_schema("main.ml")
    volume = cat.create_volume("main.ml.pics")
    assert volume.path == PICS
    root = Path(volume.storage_location.removeprefix("file://"))
    for relative, (_, pixels) in IMAGES.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(pixels).save(root / relative)
    (root / "labels.csv").write_text("file,label\ncats/a_rgb.png,cats\n")
    for name, text in TEXTS.items():
        (root / name).write_text(text, encoding="utf-8")
    for junk in (".DS_Store", "_SUCCESS", ".hidden.txt", "cats/.DS_Store", "dogs/_SUCCESS"):
        (root / junk).write_bytes(b"\x00not an image\xff")
    return root


# ------------------------------------------------------------------ the decoders on their own


@pytest.mark.parametrize("relative", [r for r, (m, _) in IMAGES.items() if m == "RGB"])
def test_decode_image_gives_exact_rgb_pixels(pics: Path, relative: str) -> None:
    pixels = IMAGES[relative][1]
    tensor = decode_image(str(pics / relative))
    height, width = pixels.shape[:2]
    assert tensor.dtype == torch.uint8 and tuple(tensor.shape) == (3, height, width)
    assert tensor[:, 0, 0].tolist() == [0, 0, 5]
    assert tensor[:, height - 1, width - 1].tolist() == pixels[height - 1, width - 1].tolist()
    assert tensor[:, 1, 1].tolist() == [30, 40, 25]
    assert np.array_equal(tensor.permute(1, 2, 0).numpy(), pixels)


def test_decode_image_modes(pics: Path) -> None:
    gray = gray_pixels(5, 4)
    as_l = decode_image(str(pics / "cats/b_gray.png"), mode="L")
    assert as_l.dtype == torch.uint8 and tuple(as_l.shape) == (1, 4, 5)
    assert np.array_equal(as_l[0].numpy(), gray)
    assert as_l[0, 3, 4].item() == 10 * 4 + 3 * 3 + 1
    as_rgb = decode_image(str(pics / "cats/b_gray.png"))  # grey level copied to all three channels
    assert tuple(as_rgb.shape) == (3, 4, 5)
    assert all(np.array_equal(as_rgb[c].numpy(), gray) for c in range(3))
    assert tuple(decode_image(str(pics / "cats/a_rgb.png"), mode="L").shape) == (1, 6, 8)


def test_decode_image_rgba_keeps_colours_and_drops_or_keeps_alpha(pics: Path) -> None:
    rgba = IMAGES["dogs/c_rgba.png"][1]
    path = str(pics / "dogs/c_rgba.png")
    rgb = decode_image(path)
    assert tuple(rgb.shape) == (3, 7, 3)
    assert np.array_equal(rgb.permute(1, 2, 0).numpy(), rgba[:, :, :3])
    with_alpha = decode_image(path, mode="RGBA")
    assert tuple(with_alpha.shape) == (4, 7, 3)
    assert with_alpha[3, 0, 0].item() == 255 and with_alpha[3, 1, 1].item() == 77


@pytest.mark.parametrize(
    "text",
    ["", "plain ascii", "héllo wörld ✓ 日本語 🐈", "lines\nand\ttabs\n"],
    ids=["empty", "ascii", "utf8", "lines"],
)
def test_decode_text_and_bytes_round_trip(tmp_path: Path, text: str) -> None:
    path = tmp_path / "file.txt"
    path.write_bytes(text.encode("utf-8"))
    assert decode_text(str(path)) == text
    assert decode_bytes(str(path)) == text.encode("utf-8")


def test_decode_text_other_encoding_and_binary_bytes(tmp_path: Path) -> None:
    latin = tmp_path / "latin.txt"
    latin.write_bytes("café".encode("latin-1"))
    assert decode_text(str(latin), encoding="latin-1") == "café"
    with pytest.raises(UnicodeDecodeError):
        decode_text(str(latin))
    binary = tmp_path / "all.bin"
    binary.write_bytes(bytes(range(256)))
    assert decode_bytes(str(binary)) == bytes(range(256))


def test_decoders_take_an_open_binary_file_as_well_as_a_path(pics: Path) -> None:
    image = pics / "cats" / "a_rgb.png"
    with open(image, "rb") as handle:
        assert torch.equal(decode_image(handle), decode_image(str(image)))
    assert decode_image(image).shape == decode_image(str(image)).shape  # a PathLike too
    assert decode_text(io.BytesIO("héllo".encode())) == "héllo"
    assert decode_text(io.BytesIO("café".encode("latin-1")), encoding="latin-1") == "café"
    assert decode_bytes(io.BytesIO(b"\x00\xff")) == b"\x00\xff"


def test_the_documented_examples_hold() -> None:
    result = doctest.testmod(decode_module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0


def test_which_transforms_read_open_files() -> None:
    assert all(reads_files(d) for d in (decode_image, decode_text, decode_bytes))
    assert reads_files(functools.partial(decode_image, mode="L"))
    assert reads_files(functools.partial(functools.partial(decode_text), encoding="latin-1"))
    assert not reads_files(len) and not reads_files(lambda p: p)

    class Marked:
        reads_files = True

        def __call__(self, source: Any) -> Any:
            return source

    class Truthy:
        reads_files = "yes"  # only True itself counts

        def __call__(self, source: Any) -> Any:
            return source

    class Unhashable(Marked):
        __hash__ = None  # type: ignore[assignment]

    assert reads_files(Marked()) and not reads_files(Truthy()) and reads_files(Unhashable())


def test_chains_read_open_files_when_their_first_step_does(pics: Path) -> None:
    assert reads_files(map_paths(map_paths(texts_dataset(), decode_bytes), len).transform)  # type: ignore[arg-type]
    assert not reads_files(map_paths(map_paths(texts_dataset(), os.path.basename), len).transform)  # type: ignore[arg-type]
    names = map_paths(map_paths(texts_dataset(), os.path.basename), str.upper)  # a path-taking chain still gets paths
    assert list(names) == [name.upper() for name in sorted(TEXTS)]


# ------------------------------------------------------------------ map_paths


def texts_dataset() -> UCVolumeDataset:
    return UCVolumeDataset(PICS, include="*.txt")


def test_map_paths_decodes_each_file(pics: Path) -> None:
    ds = texts_dataset()
    assert list(map_paths(ds, decode_text)) == [TEXTS[name] for name in sorted(TEXTS)]  # .hidden.txt skipped


def test_map_paths_chains(pics: Path) -> None:
    lengths = map_paths(map_paths(texts_dataset(), decode_bytes), len)
    expected = [len(TEXTS[name].encode("utf-8")) for name in sorted(TEXTS)]
    assert list(lengths) == expected
    assert expected[0] != len(TEXTS["notes.txt"])  # bytes were counted, not characters
    assert list(map_paths(map_paths(texts_dataset(), decode_text), str.upper)) == [
        TEXTS[name].upper() for name in sorted(TEXTS)
    ]


def test_map_paths_leaves_the_original_dataset_alone(pics: Path) -> None:
    ds = texts_dataset()
    mapped = map_paths(ds, decode_text)
    texts = list(mapped)
    assert ds.transform is None
    paths = list(ds)
    assert paths == [os.path.join(str(pics), name) for name in sorted(TEXTS)]
    assert all(os.path.isfile(p) for p in paths)
    assert list(mapped) == texts  # and the mapped one keeps mapping
    assert len(mapped) == len(ds) == len(TEXTS)


def test_map_paths_copy_keeps_its_own_progress(pics: Path) -> None:
    """Iterating the mapped copy must not show up in the original's checkpoint or counters."""
    ds = texts_dataset()
    before = (ds.state_dict(), ds.stats().streams)
    list(map_paths(ds, decode_text))
    assert (ds.state_dict(), ds.stats().streams) == before


@pytest.mark.parametrize("fn", ["decode_text", None, 3], ids=["str", "none", "int"])
def test_map_paths_needs_a_callable(pics: Path, fn: Any) -> None:
    with pytest.raises(TypeError, match=type(fn).__name__):
        map_paths(texts_dataset(), fn)


def test_map_paths_needs_a_volume_dataset() -> None:
    with pytest.raises(TypeError, match="map_paths needs a UCVolumeDataset, got list"):
        map_paths([1, 2], len)  # type: ignore[arg-type]


def test_mapped_dataset_pickles_with_its_chain(pics: Path) -> None:
    mapped = map_paths(map_paths(texts_dataset(), decode_bytes), len)
    clone = pickle.loads(pickle.dumps(mapped))
    assert list(clone) == list(mapped)


# ------------------------------------------------------------------ labelled_folder


def items_of(pairs: Any) -> collections.Counter[tuple[tuple[int, ...], int]]:
    return collections.Counter((tuple(t.shape), int(label)) for t, label in pairs)


def test_labelled_folder_labels_by_class_folder(pics: Path) -> None:
    ds = labelled_folder(PICS)
    assert ds.classes == ("cats", "dogs")
    pairs = list(ds)
    assert len(pairs) == len(IMAGES) == len(ds)  # labels.csv, texts, hidden and marker files skipped
    assert items_of(pairs) == EXPECTED_ITEMS
    # without shuffle the order is the sorted listing
    assert [label for _, label in pairs] == [LABELS[r.split("/")[0]] for r in sorted(IMAGES)]
    first, label = pairs[0]
    assert label == 0 and np.array_equal(first.permute(1, 2, 0).numpy(), IMAGES["cats/a_rgb.png"][1])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_labelled_folder_shuffled_still_yields_every_file_once(pics: Path, seed: int) -> None:
    ds = labelled_folder(PICS, shuffle=True, seed=seed)
    for _ in range(2):  # two epochs, two orders, same items
        assert items_of(ds) == EXPECTED_ITEMS


def test_labelled_folder_with_another_decoder_and_include(pics: Path) -> None:
    ds = labelled_folder(PICS, decode=decode_bytes, include="dogs/*")
    assert ds.classes == ("dogs",)
    assert [(data[:8], label) for data, label in ds] == [(b"\x89PNG\r\n\x1a\n", 0)] * 2


def test_labelled_folder_without_class_folders_is_refused(pics: Path) -> None:
    with pytest.raises(ValueError, match="class folders"):
        labelled_folder(PICS, include="*.txt")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"recursive": False}, "labelled_folder sets recursive itself; leave it out"),
        ({"label_by": None}, "labelled_folder sets label_by itself"),
        ({"transform": len}, "labelled_folder sets transform itself; leave it out (map_paths adds a transform)"),
        ({"decode": "image"}, "invalid decode 'image': give a function"),
        ({"shuffle": "yes"}, "invalid shuffle 'yes': give True or False"),
    ],
)
def test_labelled_folder_refuses_what_it_sets_and_bad_options(
    pics: Path, options: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=re.escape(message)) as caught:
        labelled_folder(PICS, **options)
    assert "\n" not in str(caught.value)


# ------------------------------------------------------------------ in a real DataLoader


def test_decoded_items_through_spawned_dataloader_workers(pics: Path) -> None:
    loader = torch.utils.data.DataLoader(
        labelled_folder(PICS, shuffle=True),
        num_workers=2,
        batch_size=None,
        multiprocessing_context="spawn",
    )
    pairs = list(loader)
    assert items_of(pairs) == EXPECTED_ITEMS
    sums: dict[tuple[int, ...], int] = {tuple(t.shape): int(t.sum()) for t, _ in pairs}
    for _, pixels in IMAGES.values():
        expected = Image.fromarray(pixels).convert("RGB")
        assert sums[(3, *pixels.shape[:2])] == int(np.asarray(expected, dtype=np.int64).sum())


# ------------------------------------------------------------------ image files only, and decode errors
TOP_FILES = ("labels.csv", "notes.txt", "plain.txt")  # beside the class folders; not images


@pytest.mark.parametrize("cache", ["auto", "always"], ids=["in-place", "cached"])
def test_decoding_images_reads_image_files_only_and_counts_the_others(pics: Path, cache: str) -> None:
    ds = map_paths(UCVolumeDataset(PICS, recursive=True, cache=cache), decode_image)
    assert len(ds) == len(IMAGES) and ds.skipped == len(TOP_FILES)  # hidden and marker files are not counted
    assert sorted(tuple(t.shape) for t in ds) == sorted((3, *p.shape[:2]) for _, p in IMAGES.values())
    assert ds.stats().skipped_files == len(TOP_FILES)
    assert sum(s.skipped for s in ds.stats().streams) == len(TOP_FILES)
    made = UCVolumeDataset(PICS, recursive=True, transform=decode_image)  # the same when given at the start
    assert (len(made), made.skipped) == (len(IMAGES), len(TOP_FILES))


def test_other_decoders_read_every_file(pics: Path) -> None:
    sizes = map_paths(map_paths(UCVolumeDataset(PICS), decode_bytes), len)
    assert len(sizes) == len(TOP_FILES) and sizes.skipped == 0
    assert len(map_paths(UCVolumeDataset(PICS, recursive=True), decode_text)) == len(TOP_FILES) + len(IMAGES)


def test_include_chooses_the_files_an_image_decoder_gets(pics: Path) -> None:
    only_dogs = map_paths(UCVolumeDataset(PICS, recursive=True, include="dogs/*"), decode_image)
    assert len(only_dogs) == 2 and only_dogs.skipped == 5
    assert len(UCVolumeDataset(PICS, recursive=True, include="*", transform=decode_image)) == len(IMAGES) + 3


def test_labelled_folder_counts_the_files_beside_the_classes_as_skipped(pics: Path) -> None:
    ds = labelled_folder(PICS)
    assert ds.skipped == len(TOP_FILES) and len(ds) == len(IMAGES)


def test_a_folder_of_class_folders_read_without_recursive_says_to_add_it(pics: Path) -> None:
    with pytest.raises(ValueError, match="add --recursive") as caught:
        UCVolumeDataset(PICS, transform=decode_image)
    assert str(caught.value) == (
        f"{PICS} holds no image files at its top, only in sub-folders (cats, dogs): add --recursive (recursive=True)"
    )
    with pytest.raises(ValueError, match=re.escape(f"{PICS} holds no image files; add recursive=True (--recursive)")):
        map_paths(UCVolumeDataset(PICS), decode_image)  # the listing was taken before the decoder was known


@pytest.mark.parametrize("cache", ["auto", "always"], ids=["in-place", "cached"])
def test_a_file_that_fails_to_decode_names_its_volume_path_and_the_decoder(pics: Path, cache: str) -> None:
    ds = UCVolumeDataset(PICS, include="labels.csv", transform=decode_image, cache=cache)
    with pytest.raises(decode_module.DecodeError) as caught:
        list(ds)
    message = str(caught.value)
    assert message.startswith(f"{PICS}/labels.csv: decode_image could not decode it (UnidentifiedImageError: ")
    assert str(pics) not in message and ".uc_jupyter" not in message and "cache" not in message
    assert "\n" not in message and caught.value.__suppress_context__  # Pillow's frames are not shown


def test_a_decode_error_in_a_dataloader_worker_names_the_volume_path(pics: Path) -> None:
    from uc_jupyter.data import DataLoader

    ds = UCVolumeDataset(PICS, include="labels.csv", transform=decode_image, cache="always")
    with pytest.raises(decode_module.DecodeError) as caught:
        list(DataLoader(ds, batch_size=1, num_workers=1, monitor=False))
    assert str(caught.value).startswith(f"{PICS}/labels.csv: decode_image could not decode it (Unidentified")
    assert str(pics) not in str(caught.value) and "\n" not in str(caught.value)  # not torch's worker traceback
    assert caught.value.__cause__ is None and caught.value.__suppress_context__


def test_a_failing_transform_of_ones_own_in_a_worker_keeps_the_workers_traceback(pics: Path) -> None:
    from uc_jupyter.data import DataLoader

    ds = map_paths(UCVolumeDataset(PICS, include="notes.txt"), int)
    with pytest.raises(
        decode_module.DecodeError, match=re.escape(f"{PICS}/notes.txt: int could not decode it")
    ) as caught:
        list(DataLoader(ds, batch_size=1, num_workers=1, monitor=False))
    assert "Original Traceback" in str(caught.value.__cause__)  # the worker's frames, for one's own bug


def test_a_failing_transform_of_ones_own_is_named_and_keeps_its_cause(pics: Path) -> None:
    def parse_row(path: str) -> int:
        return int(Path(path).read_text().split()[0])

    ds = map_paths(UCVolumeDataset(PICS, include="notes.txt"), parse_row)
    with pytest.raises(decode_module.DecodeError, match=re.escape(f"{PICS}/notes.txt: ")) as caught:
        list(ds)
    assert "parse_row" in str(caught.value) and isinstance(caught.value.__cause__, ValueError)
    partial = functools.partial(decode_text, encoding="ascii")
    with pytest.raises(decode_module.DecodeError, match=re.escape("decode_text(encoding='ascii') could not")):
        list(map_paths(UCVolumeDataset(PICS, include="notes.txt"), partial))
