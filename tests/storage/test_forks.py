"""object_store does not survive a fork (a child of a process that made a request hangs or crashes on
its own first one): the process that lists a volume stays clean for its forked workers, which read
through object_store; a child forked after its parent read falls back to fsspec and still reads.
Run in a fresh interpreter: the test process itself has made object_store requests already."""

from __future__ import annotations

import textwrap
from pathlib import Path

from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.scripts import run_python

SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    from uc_jupyter.storage.downloads import Job
    from uc_jupyter.storage.retry import RetryPolicy
    from uc_jupyter.storage import objects
    from uc_jupyter.storage.reads import open_storage

    options, out = json.loads(sys.argv[1]), sys.argv[2]

    def read(name):
        storage = open_storage("s3://forks/data", options, where="/Volumes/c/s/v")
        files = sorted(r for page in storage.pages(recursive=True) for r, _, _ in page.files)
        downloads = storage.downloads(RetryPolicy(attempts=1), on_retry=lambda: None, threads=2)
        local = os.path.join(out, name)
        downloads.start([Job("forks/data/a.bin", local, "/Volumes/c/s/v/a.bin", 8)])[0].result(60)
        downloads.close()
        with open(local, "rb") as f:
            return files, f.read(), type(downloads).__name__

    def in_child(name):
        pid = os.fork()
        if pid == 0:
            try:
                files, body, kind = read(name)
                with open(os.path.join(out, name + ".json"), "w") as f:
                    json.dump([files, body.decode(), kind], f)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
        with open(os.path.join(out, name + ".json")) as f:
            return json.load(f)

    storage = open_storage("s3://forks/data", options, where="/Volumes/c/s/v")
    listed = [r for page in storage.pages(recursive=True) for r, _, _ in page.files]
    clean = objects.fork_safe()  # listed in a helper child: no runtime here
    worker = in_child("worker")  # a DataLoader worker forked from the clean maker
    files, body, kind = read("parent")  # the maker reads itself: its runtime starts
    assert not objects.fork_safe()
    late = in_child("late")  # forked after that: object_store cannot run there
    print(json.dumps({"listed": listed, "clean": clean, "worker": worker, "parent": [files, body.decode(), kind],
                      "late": late}))
    """
)


def test_a_clean_maker_lists_without_object_store_and_forked_readers_pick_what_works(
    s3: S3TestServer, tmp_path: Path
) -> None:
    import json

    folder = s3.bucket("forks") / "data"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"the body")
    (folder / "b.bin").write_bytes(b"another")
    seen, run = run_python(SCRIPT, json.dumps(s3.storage_options), str(tmp_path), timeout=120)
    files = ["a.bin", "b.bin"]
    assert sorted(seen["listed"]) == files and seen["clean"] is True
    assert seen["worker"] == [files, "the body", "ObjectDownloads"]
    assert seen["parent"] == [files, "the body", "ObjectDownloads"]
    assert seen["late"] == [files, "the body", "ThreadDownloads"]  # fsspec: slower, never a hang
    assert "cannot run after a fork" in run.stderr  # one notice says why and what to do


DATASET = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import torch.utils.data
    from uc_jupyter.catalog.embedded.local import LocalCatalog
    from uc_jupyter.data import UCVolumeDataset
    from uc_jupyter.storage import objects
    from uc_jupyter.testing.catalogs import external_location

    options, home = json.loads(sys.argv[1]), Path(sys.argv[2])
    catalog = LocalCatalog(home / "home")
    catalog.create_catalog("main")
    catalog.create_schema("main.ml")
    external_location(catalog, "s3://dataset", options)
    catalog.create_volume("main.ml.images", "s3://dataset/data")
    dataset = UCVolumeDataset("/Volumes/main/ml/images", catalog=catalog, shuffle=True,
                              cache_dir=home / "cache", cache_max_bytes=10**7, min_free_bytes=0)
    clean = objects.fork_safe()
    read = lambda batch: [Path(p).read_bytes() for p in batch]
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=read)
    bodies = sorted(b.decode() for batch in loader for b in batch)
    print(json.dumps({"clean": clean, "bodies": bodies, "parent_started": not objects.fork_safe()}))
    """
)


def test_forked_dataloader_workers_of_a_fresh_dataset_read_through_object_store(
    s3: S3TestServer, tmp_path: Path
) -> None:
    import json

    folder = s3.bucket("dataset") / "data"
    folder.mkdir()
    for i in range(24):
        (folder / f"f{i:02d}.bin").write_bytes(f"file {i:02d}".encode())
    seen, run = run_python(DATASET, json.dumps(s3.storage_options), str(tmp_path), timeout=180)
    assert seen["bodies"] == [f"file {i:02d}" for i in range(24)]
    assert seen["clean"] is True and seen["parent_started"] is False  # the maker never started the runtime
    assert "cannot run after a fork" not in run.stderr  # so no worker fell back to fsspec
    assert s3.stats()["requests"] == {"LIST": 1, "GET": 24}  # one listing, one GET per file (no extra probes)
