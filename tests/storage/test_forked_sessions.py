"""A child forked from a process that used s3fs collects the parent's filesystems without waiting on
their sessions (uc_jupyter.storage.forked_sessions). Run in a fresh interpreter, whose garbage the
test decides."""

from __future__ import annotations

import json
import textwrap

from uc_jupyter.testing.s3_server import S3TestServer
from uc_jupyter.testing.scripts import run_python

SCRIPT = textwrap.dedent(
    """
    import gc, json, os, sys, time, weakref
    from uc_jupyter.storage.forked_sessions import forget_parents_sessions
    from uc_jupyter.storage.urls import filesystem

    options = json.loads(sys.argv[1])
    gc.disable()  # the filesystems below stay garbage until the child collects them
    for _ in range(3):
        fs, path = filesystem("s3://sessions/data", {**options, "skip_instance_cache": True})
        assert fs.ls(path)  # its session is open: s3fs set its finalizer
        cycle = [fs]
        cycle.append(cycle)  # unreachable, freed only by a collection
        del fs, cycle
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        began = time.monotonic()
        gc.collect()  # the parent's three filesystems, and their finalizers if any are left
        os.write(write, json.dumps({"seconds": time.monotonic() - began, "left": forget_parents_sessions()}).encode())
        os._exit(0)
    os.waitpid(pid, 0)
    os.close(write)
    child = json.loads(os.read(read, 4096))
    closing = [i for i in weakref.finalize._registry.values() if i.func.__qualname__ == "S3FileSystem.close_session"]
    print(json.dumps({**child, "parents": len(closing)}))  # the parent's own, still to run here
    """
)


def test_a_forked_child_drops_its_parents_s3_sessions_without_waiting(s3: S3TestServer) -> None:
    folder = s3.bucket("sessions") / "data"
    folder.mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"1")
    seen, _ = run_python(SCRIPT, json.dumps(s3.storage_options))
    # s3fs's finalizer waits a second per filesystem for fsspec's I/O thread, which a child has not.
    assert seen["seconds"] < 1.0, seen
    assert seen["left"] == 0  # none left in the child; the parent keeps its own three
    assert seen["parents"] == 3
