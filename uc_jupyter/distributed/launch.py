"""One start of a rank pool (a *generation*): its processes, the channel to each, and how they end.

Each rank is started under its own supervisor (:mod:`uc_jupyter.distributed._supervisor`, a
subreaper), in a new session so a terminal's Ctrl-C stays the kernel's to pass on. Everything a rank
starts, even a grandchild that calls ``setsid()`` or a daemon whose parent is gone, ends with the rank:
when the rank exits, when the kernel stops it (SIGTERM to the supervisor), and when the kernel dies
(the supervisor sees itself re-parented). Should a supervisor not answer, the kernel kills the tree it
finds in ``/proc`` itself (:func:`uc_jupyter.distributed.proctree.kill_tree`).

Where there are no subreapers (not Linux) ranks start directly, as their own process group, and only
that group is killed.

Example:
    >>> generation = Generation(29500, "cpu", "gloo")                       # doctest: +SKIP
    >>> generation.ranks.append(generation.spawn(0, 1, "admin", Collector()))  # doctest: +SKIP
    >>> generation.stop(timeout=5.0)                                        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from uc_jupyter.distributed import proctree
from uc_jupyter.distributed.protocol import Channel, Stop, Telemetry
from uc_jupyter.telemetry.collector import Collector

__all__ = ["SUPERVISED", "Exited", "Generation", "RankProcess"]

# Subreapers, /proc and sigtimedwait are Linux's; elsewhere a rank is its own process group, no more.
SUPERVISED = sys.platform.startswith("linux") and hasattr(signal, "sigtimedwait")
_ENTRY = "uc_jupyter.distributed._supervisor" if SUPERVISED else "uc_jupyter.distributed._worker"
_SUPERVISOR_GRACE = 5.0  # seconds a supervisor may take to end its rank's tree before the kernel does it


@dataclass
class Exited:
    """Posted by a reader thread when its rank's channel closed (the process ended)."""

    returncode: int | None


@dataclass
class RankProcess:
    """One rank: the process the kernel started (its supervisor, or the rank itself where there is
    none), the channel to the rank, its log, and what the rank said about itself when it was ready."""

    rank: int
    process: subprocess.Popen[bytes]
    channel: Channel
    log: Path
    reader: threading.Thread | None = None
    device: str = "?"
    pid: int | None = None  # the rank's own process, from its Ready message

    def interrupt(self) -> None:
        """SIGINT to the rank (the supervisor passes it on): interrupts the call it runs."""
        self._signal(signal.SIGINT)

    def terminate(self) -> None:
        """End the rank and everything it started, now (the supervisor kills the whole tree)."""
        if SUPERVISED:
            self._signal(signal.SIGTERM)
        else:
            self.kill_group()

    def kill_group(self) -> None:
        """SIGKILL the process group the kernel started: the last resort, and all there is without Linux."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return ""

    def _signal(self, signum: int) -> None:
        if self.process.poll() is None:  # never signal a pid that was reaped (and may be reused)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.process.pid, signum)


class Generation:
    """One start of the pool: its processes, their inbox, the port they rendezvoused on."""

    def __init__(self, port: int, devices: str, backend: str) -> None:
        self.port = port
        self.devices = devices
        self.backend = backend
        self.ranks: list[RankProcess] = []
        self.inbox: queue.Queue[tuple[int, object]] = queue.Queue()
        self.logs = Path(tempfile.mkdtemp(prefix="uc-jupyter-ranks-"))

    def spawn(self, rank: int, size: int, principal: str, collector: Collector) -> RankProcess:
        """Start rank ``rank`` of ``size`` with the torchrun environment; ``principal`` is who it acts
        as until its first call says otherwise (every call carries its caller's principal)."""
        ours, theirs = socket.socketpair()
        env = dict(os.environ)
        env.update(
            RANK=str(rank),
            WORLD_SIZE=str(size),
            LOCAL_RANK=str(rank),
            LOCAL_WORLD_SIZE=str(size),
            GROUP_RANK="0",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=str(self.port),
            UC_JUPYTER_PRINCIPAL=principal,
            UC_JUPYTER_RANK_BACKEND=self.backend,
            UC_JUPYTER_RANK_DEVICE=self.devices,
            UC_JUPYTER_RANK_PATH=os.pathsep.join(p for p in sys.path if p),
        )
        # Like torchrun: ranks sharing the CPUs should not each start a thread per core.
        env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // size)))
        log = self.logs / f"rank-{rank}.log"
        with ours, theirs, open(log, "wb") as log_file:
            process = subprocess.Popen(
                [sys.executable, "-m", _ENTRY, str(theirs.fileno())],
                env=env,
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=log_file,
                start_new_session=True,  # its own session: a terminal's Ctrl-C is ours to pass on
            )
            handle = RankProcess(rank, process, Channel.over(ours), log)
        handle.reader = threading.Thread(
            target=_read_channel,
            args=(handle, self.inbox, collector),
            name=f"uc-jupyter-rank-{rank}",
            daemon=True,
        )
        handle.reader.start()
        return handle

    def stop(self, timeout: float) -> None:
        """Ask every rank to leave, wait up to ``timeout`` seconds, then end what is left."""
        for handle in self.ranks:
            with contextlib.suppress(OSError):
                handle.channel.send(Stop())
        deadline = time.monotonic() + timeout
        for handle in self.ranks:
            with contextlib.suppress(subprocess.TimeoutExpired):
                handle.process.wait(max(0.0, deadline - time.monotonic()))
        self.kill()  # whatever did not leave in time (a stopped rank's supervisor has ended its tree already)

    def kill(self) -> None:
        """End every rank with everything it started, then release the channels and logs."""
        for handle in self.ranks:
            handle.terminate()
        deadline = time.monotonic() + _SUPERVISOR_GRACE
        for handle in self.ranks:
            try:
                handle.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                # A supervisor that does not answer (stopped, or SIGKILLed half-way): end its tree from here.
                proctree.kill_tree(handle.process.pid, include_root=True)
                handle.kill_group()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    handle.process.wait(5.0)
        for handle in self.ranks:
            if handle.reader is not None:
                handle.reader.join(max(0.0, deadline - time.monotonic()))
            handle.channel.close()
        shutil.rmtree(self.logs, ignore_errors=True)


def _read_channel(handle: RankProcess, inbox: queue.Queue[tuple[int, object]], collector: Collector) -> None:
    """One per rank: telemetry goes straight to the collector, the rest to the caller in order."""
    while True:
        try:
            message = handle.channel.recv()
        except (EOFError, OSError):
            break
        if isinstance(message, Telemetry):
            for sample in message.samples:
                collector.offer(sample)
        else:
            inbox.put((handle.rank, message))
    try:
        returncode: int | None = handle.process.wait(10.0)
    except subprocess.TimeoutExpired:
        returncode = None
    inbox.put((handle.rank, Exited(returncode)))
