"""What processes that died left in the cache is taken back, through FileCache's public methods
(:meth:`FileCache.reclaim_dead`, :meth:`FileCache.reclaim_finished_workers`): a killed process's
partial download, streamed file and reserved room; never a living process's, and never a file whose
name is not one of ours. (Finished downloads adopted: tests/data/test_cache.py; DataLoader workers'
stream folders: test_streams.py.)"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from uc_jupyter.data.cache import FileCache

# A process that reserves a resident download (half written) and a streamed one (complete, not yet
# released), says where their files are, and is killed before it can give anything back.
_DIE_HOLDING = """
import json, os, signal, sys
from pathlib import Path
from uc_jupyter.data.cache import FileCache, Ticket
cache = FileCache(sys.argv[1], max_bytes=10**6, min_free_bytes=0)
(partial,) = cache.reserve([(FileCache.key("s3://b/p", 1000, "v"), 1000, "p.bin")], group="g")
(through,) = cache.reserve([(FileCache.key("s3://b/s", 300, "v"), 300, "s.bin")], group="g", keep=False)
assert isinstance(partial, Ticket) and isinstance(through, Ticket)
Path(partial.tmp).write_bytes(b"x" * 400)
Path(through.tmp).write_bytes(b"s" * 300)
streamed = cache.finish(through)
cache.flush()
print(json.dumps({"tmp": partial.tmp, "streamed": streamed.path}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def dead_pid() -> int:
    """The pid of a process that ran and is gone (reaped)."""
    done = subprocess.Popen([sys.executable, "-c", ""])
    done.wait()
    return done.pid


def test_a_killed_process_s_partial_download_streamed_file_and_room_are_taken_back(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    child = subprocess.run(
        [sys.executable, "-c", _DIE_HOLDING, str(cache.root)], capture_output=True, text=True, timeout=120
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    left = json.loads(child.stdout)
    assert Path(left["tmp"]).exists() and Path(left["streamed"]).exists()
    assert cache.stats().in_flight_bytes == 1300  # the dead process's reservations still hold room
    cache.reclaim_finished_workers()  # it was no worker of this process: nothing changes
    assert cache.stats().in_flight_bytes == 1300 and Path(left["tmp"]).exists()
    cache.reclaim_dead()
    assert not Path(left["tmp"]).exists() and not Path(left["streamed"]).parent.exists()
    stats = cache.stats()
    assert (stats.in_flight_bytes, stats.resident_bytes, stats.entries) == (0, 0, 0)


def test_a_living_process_s_leftovers_and_names_not_ours_stay(tmp_path: Path) -> None:
    cache = FileCache(tmp_path / "cache", max_bytes=10**6, min_free_bytes=0)
    tmp, stream = Path(cache.root) / "tmp", Path(cache.root) / "stream"
    living = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        dead = dead_pid()
        kept = [
            tmp / f"{'a' * 64}.{living.pid}.0",  # a download under way elsewhere
            tmp / "notes.txt",  # no owner in the name
            tmp / f"a.{dead}x.0",  # an owner that is not a pid
            tmp / f"..{dead}",  # an empty owner, the pid in the last part
        ]
        for path in kept:
            path.write_bytes(b"keep")
        folders = [stream / str(living.pid), stream / "notes", stream / f"{dead}x"]
        for folder in folders:
            folder.mkdir()
            (folder / "0.bin").write_bytes(b"keep")
        taken = tmp / f"{'b' * 64}.{dead}.3"
        taken.write_bytes(b"gone")
        cache.reclaim_dead()
        assert not taken.exists()
        assert [p for p in kept if not p.exists()] == [] and [f for f in folders if not f.exists()] == []
    finally:
        living.communicate(b"", timeout=30)
    assert os.path.exists(kept[0])  # taken back only by a later reclaim, once its process is gone
    cache.reclaim_dead()
    assert not kept[0].exists() and not folders[0].exists() and all(p.exists() for p in kept[1:])
