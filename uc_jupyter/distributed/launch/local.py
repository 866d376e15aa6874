"""Ranks on this machine: one spawned process per rank, under its own supervisor.

Each rank is started under its own supervisor (:mod:`uc_jupyter.distributed._supervisor`, a
subreaper), in a new session so a terminal's Ctrl-C stays the kernel's to pass on. Everything a rank
starts, even a grandchild that calls ``setsid()`` or a daemon whose parent is gone, ends with the rank:
when the rank exits, when the kernel stops it (SIGTERM to the supervisor), and when the kernel dies
(the supervisor sees itself re-parented). Should a supervisor not answer, the kernel kills the tree it
finds in ``/proc`` itself (:func:`uc_jupyter.distributed.proctree.kill_tree`).

Where there are no subreapers (not Linux) ranks start directly, as their own process group, and only
that group is killed. :func:`start_rank_process` is also what a Ray node's rank host runs
(:mod:`uc_jupyter.distributed.launch.ray_host`), so a rank is the same process wherever it is placed.

Example:
    >>> generation = LocalPlacement().start(2, None, "cpu", "gloo", "admin", Collector(), 60.0)  # doctest: +SKIP
    >>> generation.stop(timeout=5.0)                                        # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from uc_jupyter.distributed import proctree
from uc_jupyter.distributed.launch import Exited, Generation, Inbox, Placement, RankHandle, deliver
from uc_jupyter.distributed.protocol import Channel, Stop
from uc_jupyter.distributed.stuck import DUMP_SIGNAL
from uc_jupyter.processes import free_port
from uc_jupyter.telemetry.collector import Collector

__all__ = [
    "SUPERVISED",
    "LocalGeneration",
    "LocalPlacement",
    "RankProcess",
    "rank_environment",
    "start_rank_process",
    "visible_gpus",
]

# Subreapers, /proc and sigtimedwait are Linux's; elsewhere a rank is its own process group, no more.
SUPERVISED = sys.platform.startswith("linux") and hasattr(signal, "sigtimedwait")
_ENTRY = "uc_jupyter.distributed._supervisor" if SUPERVISED else "uc_jupyter.distributed._worker"
_SUPERVISOR_GRACE = 5.0  # seconds a supervisor may take to end its rank's tree before the kernel does it


class RankProcess(RankHandle):
    """One rank on this machine: the process started for it (its supervisor, or the rank itself where
    there is none), the channel to the rank, and its log."""

    def __init__(self, rank: int, process: subprocess.Popen[bytes], channel: Channel, log: Path) -> None:
        self.rank = rank
        self.process = process
        self.channel = channel
        self.log = log
        self.reader: threading.Thread | None = None

    def send(self, message: object) -> None:
        self.channel.send(message)

    def interrupt(self) -> None:
        """SIGINT to the rank (the supervisor passes it on): interrupts the call it runs."""
        self._signal(signal.SIGINT)

    def terminate(self) -> None:
        """End the rank and everything it started, now (the supervisor kills the whole tree)."""
        if SUPERVISED:
            self._signal(signal.SIGTERM)
        else:
            self.kill_group()

    def dump_stacks(self) -> None:
        """The stack dump signal to the rank (the supervisor passes it on)."""
        self._signal(DUMP_SIGNAL)

    def kill_group(self) -> None:
        """SIGKILL the process group the kernel started: the last resort, and all there is without Linux."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)

    def returncode(self) -> int | None:
        return self.process.poll()

    def running(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, lines: int = 15) -> str:
        with contextlib.suppress(OSError):
            return "".join(self.log.read_text(errors="replace").splitlines(keepends=True)[-lines:])
        return ""

    def end(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the supervisor to end the tree; then end it from here."""
        try:
            self.process.wait(max(0.0, grace))
        except subprocess.TimeoutExpired:
            # A supervisor that does not answer (stopped, or SIGKILLed half-way): end its tree from here.
            proctree.kill_tree(self.process.pid, include_root=True)
            self.kill_group()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(5.0)

    def _signal(self, signum: int) -> None:
        if self.process.poll() is None:  # never signal a pid that was reaped (and may be reused)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.process.pid, signum)


def rank_environment(
    *,
    rank: int,
    size: int,
    local_rank: int,
    local_size: int,
    node_rank: int,
    master_addr: str,
    port: int,
    principal: str,
    devices: str,
    backend: str,
) -> dict[str, str]:
    """The torchrun environment of one rank, and what our rank entry point reads."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(size),
        "LOCAL_RANK": str(local_rank),
        "LOCAL_WORLD_SIZE": str(local_size),
        "GROUP_RANK": str(node_rank),
        "NODE_RANK": str(node_rank),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(port),
        "UC_JUPYTER_PRINCIPAL": principal,
        "UC_JUPYTER_RANK_BACKEND": backend,
        "UC_JUPYTER_RANK_DEVICE": devices,
    }


def start_rank_process(rank: int, environment: Mapping[str, str], logs: Path) -> RankProcess:
    """Start one rank process (under its supervisor) with this process's environment updated by
    ``environment``; its output goes to ``logs/rank-N.log`` until its channel is up."""
    ours, theirs = socket.socketpair()
    env = dict(os.environ)
    env.update(environment)
    env["UC_JUPYTER_RANK_PATH"] = os.pathsep.join(p for p in sys.path if p)
    # Like torchrun: ranks sharing the CPUs should not each start a thread per core.
    env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // int(env.get("LOCAL_WORLD_SIZE", "1")))))
    log = logs / f"rank-{rank}.log"
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
        return RankProcess(rank, process, Channel.over(ours), log)


class LocalGeneration(Generation):
    """Ranks spawned on this machine, rendezvousing on 127.0.0.1."""

    def __init__(self, port: int, devices: str, backend: str) -> None:
        super().__init__(port, devices, backend)
        self.processes: list[RankProcess] = []
        self.logs = Path(tempfile.mkdtemp(prefix="uc-jupyter-ranks-"))

    def spawn(self, rank: int, size: int, principal: str, collector: Collector) -> RankProcess:
        """Start rank ``rank`` of ``size``; ``principal`` is who it acts as until its first call says
        otherwise (every call carries its caller's principal)."""
        environment = rank_environment(
            rank=rank,
            size=size,
            local_rank=rank,
            local_size=size,
            node_rank=0,
            master_addr="127.0.0.1",
            port=self.port,
            principal=principal,
            devices=self.devices,
            backend=self.backend,
        )
        handle = start_rank_process(rank, environment, self.logs)
        handle.reader = threading.Thread(
            target=_read_channel,
            args=(handle, self.inbox, collector),
            name=f"uc-jupyter-rank-{rank}",
            daemon=True,
        )
        handle.reader.start()
        self.processes.append(handle)
        self.ranks.append(handle)
        return handle

    def stop(self, timeout: float) -> None:
        for handle in self.processes:
            with contextlib.suppress(OSError):
                handle.channel.send(Stop())
        deadline = time.monotonic() + timeout
        for handle in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                handle.process.wait(max(0.0, deadline - time.monotonic()))
        self.kill()  # whatever did not leave in time (a stopped rank's supervisor has ended its tree already)

    def kill(self) -> None:
        for handle in self.processes:
            handle.terminate()
        deadline = time.monotonic() + _SUPERVISOR_GRACE
        for handle in self.processes:
            handle.end(deadline - time.monotonic())
        for handle in self.processes:
            if handle.reader is not None:
                handle.reader.join(max(0.0, deadline - time.monotonic()))
            handle.channel.close()
        shutil.rmtree(self.logs, ignore_errors=True)


class LocalPlacement(Placement):
    """Every rank on this machine."""

    def plan(self, n: int, devices: str, backend: str) -> tuple[str, str]:
        gpus = visible_gpus() if devices != "cpu" else 0
        return plan_devices(n, devices, backend, gpus, "CUDA device(s) visible")

    def start(
        self,
        n: int,
        port: int | None,
        devices: str,
        backend: str,
        principal: str,
        collector: Collector,
        timeout: float,
    ) -> LocalGeneration:
        generation = LocalGeneration(port or free_port(), devices, backend)
        try:
            for rank in range(n):
                generation.spawn(rank, n, principal, collector)
        except BaseException:
            generation.kill()
            raise
        return generation

    def close(self) -> None:
        """Nothing to release: each generation ends its own processes."""


def plan_devices(n: int, devices: str, backend: str, gpus: int, where: str) -> tuple[str, str]:
    """(device kind, backend) for ``n`` ranks given ``gpus`` usable GPUs (``where`` says whose)."""
    if devices == "cuda" and gpus < n:
        raise ValueError(
            f"devices='cuda' needs one GPU per rank: {n} ranks asked, {gpus} {where}; use fewer ranks or devices='cpu'"
        )
    device = "cuda" if devices == "cuda" or (devices == "auto" and gpus >= n) else "cpu"
    if backend == "nccl" and device != "cuda":
        raise ValueError("backend='nccl' needs a GPU per rank; use backend='gloo' (or 'auto') on CPU ranks")
    chosen = backend if backend != "auto" else ("nccl" if device == "cuda" else "gloo")
    return device, chosen


def visible_gpus() -> int:
    """How many CUDA devices this process can see (0 without CUDA); does not initialise CUDA."""
    import torch

    return int(torch.cuda.device_count()) if torch.cuda.is_available() else 0


def _read_channel(handle: RankProcess, inbox: Inbox, collector: Collector) -> None:
    """One per rank: read the rank's channel until it closes, then say how the process ended."""
    while True:
        try:
            message = handle.channel.recv()
        except (EOFError, OSError):
            break
        deliver(handle.rank, message, inbox, collector)
    try:
        returncode: int | None = handle.process.wait(10.0)
    except subprocess.TimeoutExpired:
        returncode = None
    inbox.put((handle.rank, Exited(returncode)))
