"""A rank's entry point: ``python -m uc_jupyter.distributed._worker FD``.

The kernel starts one such process per rank with the torchrun environment (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``MASTER_ADDR``, ``MASTER_PORT``) and a socket on file descriptor
``FD``. The rank:

1. sends everything written to its stdout and stderr (file descriptors 1 and 2, so C libraries and
   child processes too) to the kernel, line by line, on that socket;
2. ends itself, and what it started, when the kernel goes away (the socket closes, or its supervisor
   is gone and it is re-parented);
3. initialises ``torch.distributed`` (``UC_JUPYTER_RANK_BACKEND``, ``UC_JUPYTER_RANK_DEVICE``) and says
   it is ready;
4. runs calls in order, in one persistent namespace, each as the principal the kernel's caller was
   (the call says who), and answers each with a result or a failure, after flushing the output the
   call produced.

The rank normally runs under :mod:`uc_jupyter.distributed._supervisor`, which ends whatever the rank
leaves behind.

SIGINT from the kernel interrupts the user code of a call (KeyboardInterrupt), never the rank's own
bookkeeping.
"""

from __future__ import annotations

import ast
import contextlib
import faulthandler
import io
import linecache
import os
import queue
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from types import CodeType, TracebackType
from typing import Any, BinaryIO, Literal

from uc_jupyter.distributed import proctree
from uc_jupyter.distributed.errors import RemoteFailure, failure_from
from uc_jupyter.distributed.payload import pack, restore_sources, unpack
from uc_jupyter.distributed.protocol import (
    Call,
    Channel,
    Output,
    Ready,
    Reply,
    StartFailed,
    Stop,
    Telemetry,
)
from uc_jupyter.distributed.stuck import DUMP_SIGNAL
from uc_jupyter.telemetry import mlflow_runs, mlflow_sink

_SYNC = b"\x00uc-jupyter-sync\x00"
_PARENT_GONE = 70  # exit code when the kernel disappeared


class _Interruptible:
    """SIGINT raises KeyboardInterrupt only while user code runs."""

    def __init__(self) -> None:
        self.active = False
        signal.signal(signal.SIGINT, self._on_sigint)

    def _on_sigint(self, signum: int, frame: object) -> None:
        if self.active:
            raise KeyboardInterrupt


class _OutputPump:
    """Redirects file descriptors 1 and 2 into pipes and forwards what arrives as Output messages."""

    def __init__(self, channel: Channel) -> None:
        self._channel = channel
        self._synced = {1: threading.Event(), 2: threading.Event()}
        for fd, stream in ((1, "stdout"), (2, "stderr")):
            read_end, write_end = os.pipe()
            os.dup2(write_end, fd)
            os.close(write_end)
            threading.Thread(target=self._pump, args=(read_end, fd, stream), daemon=True).start()
        for text_stream in (sys.stdout, sys.stderr):
            if isinstance(text_stream, io.TextIOWrapper):  # a pipe makes Python block-buffer: print lines live
                text_stream.reconfigure(line_buffering=True)

    def _pump(self, read_end: int, fd: int, stream: Literal["stdout", "stderr"]) -> None:
        pending = b""
        while True:
            chunk = os.read(read_end, 1 << 16)
            if not chunk:
                return
            pending += chunk
            while (mark := pending.find(_SYNC)) >= 0:
                self._send(stream, pending[:mark])  # the partial line before a reply goes out too
                pending = pending[mark + len(_SYNC) :]
                self._synced[fd].set()
            # Whole lines go now (a progress bar's carriage return counts as a line end); a partial
            # line, or a partial sync marker, waits for more.
            cut = max(pending.rfind(b"\n"), pending.rfind(b"\r")) + 1
            if cut:
                self._send(stream, pending[:cut])
                pending = pending[cut:]

    def _send(self, stream: Literal["stdout", "stderr"], data: bytes) -> None:
        if data:
            self._channel.send(Output(stream=stream, text=data.decode("utf-8", errors="replace")))

    def flush(self, timeout: float = 10.0) -> None:
        """Make sure everything written so far has been sent before what is sent next."""
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        for fd, event in self._synced.items():
            event.clear()
            os.write(fd, _SYNC)
        deadline = time.monotonic() + timeout
        for event in self._synced.values():
            event.wait(max(0.0, deadline - time.monotonic()))


def _watch_parent(channel: Channel, calls: queue.Queue[object], parent: int) -> None:
    """Receive calls; end the process when the kernel is gone (socket closed or re-parented)."""

    def receive() -> None:
        while True:
            try:
                calls.put(channel.recv())
            except (EOFError, OSError):
                leave()

    def poll_parent() -> None:
        while True:
            if os.getppid() != parent:
                leave()
            time.sleep(0.5)

    def leave() -> None:
        # The supervisor ends what is left once this process is gone; should it be gone itself, this
        # is the last chance to end what this rank started.
        if os.getppid() != parent:
            proctree.kill_tree(os.getpid())
        os._exit(_PARENT_GONE)

    threading.Thread(target=receive, daemon=True).start()
    threading.Thread(target=poll_parent, daemon=True).start()


def failure_of(exc: BaseException, rank: int, skip: int = 0) -> RemoteFailure:
    """A RemoteFailure for ``exc``; ``skip`` drops that many of the rank's own outermost frames."""
    tb: TracebackType | None = exc.__traceback__
    for _ in range(skip):
        if tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
    try:
        pickled: bytes | None = pack(exc, limit=1_000_000)
    except Exception:
        pickled = None
    return failure_from(exc, rank, tb, pickled)


class _Rank:
    def __init__(self, channel: Channel, rank: int, world_size: int, local_rank: int, device: Any) -> None:
        self.channel = channel
        self.rank = rank
        self.namespace: dict[str, Any] = {
            "__name__": "__main__",
            "rank": rank,
            "world_size": world_size,
            "local_rank": local_rank,
            "device": device,
        }
        self._cells = 0

    def handle(self, call: Call, interruptible: _Interruptible, pump: _OutputPump) -> None:
        from uc_jupyter.catalog.rules.privileges import validate_principal

        try:
            validate_principal(call.principal)  # the kernel checked it; a bad one must not end the rank
        except ValueError as exc:
            self._answer(call, failure=failure_of(exc, self.rank), pump=pump)
            return
        with _acting_as(call.principal), mlflow_runs.logging_to(call.mlflow_run):
            self._run(call, interruptible, pump)

    def _run(self, call: Call, interruptible: _Interruptible, pump: _OutputPump) -> None:
        try:
            payload = unpack(call.payload)  # unpickling runs code too: as the call's principal
            work = self._work(call.kind, payload)  # a payload of the wrong shape answers; it never ends the rank
        except BaseException as exc:
            self._answer(call, failure=failure_of(exc, self.rank), pump=pump)
            return
        try:
            interruptible.active = True
            try:
                value = work()
            finally:
                interruptible.active = False
        except BaseException as exc:
            self._answer(call, failure=failure_of(exc, self.rank, skip=2), pump=pump)
            return
        try:
            data = pack(value, limit=None)
        except Exception as exc:
            message = f"rank {self.rank} returned a {type(value).__name__} that cannot be sent back ({exc})"
            self._answer(call, failure=failure_of(TypeError(message), self.rank), pump=pump)
            return
        self._answer(call, value=data, pump=pump)

    def _work(self, kind: str, payload: Any) -> Callable[[], Any]:
        if kind == "run":
            fn, args, kwargs, sources = payload
            restore_sources(fn, sources)
            return lambda: fn(*args, **kwargs)
        if kind == "execute":
            return self._cell(str(payload))
        if kind == "push":
            return lambda: self.namespace.update(payload)
        if kind == "pull":
            return lambda: [self._lookup(name) for name in payload]
        raise ValueError(f"unknown call kind {kind!r}")

    def _lookup(self, name: str) -> Any:
        if name not in self.namespace:
            raise NameError(f"name {name!r} is not defined on rank {self.rank}")
        return self.namespace[name]

    def _cell(self, source: str) -> Callable[[], Any]:
        """Run ``source`` like a notebook cell: the value of a final expression is the result."""
        self._cells += 1
        filename = f"<rank cell {self._cells}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
        tree = ast.parse(source, filename=filename)
        last: CodeType | None = None
        final = tree.body[-1] if tree.body else None
        if isinstance(final, ast.Expr):
            tree.body.pop()
            last = compile(ast.Expression(final.value), filename, "eval")
        body = compile(tree, filename, "exec")

        def run() -> Any:
            exec(body, self.namespace)
            return eval(last, self.namespace) if last is not None else None

        return run

    def _answer(
        self,
        call: Call,
        *,
        pump: _OutputPump,
        value: bytes | None = None,
        failure: RemoteFailure | None = None,
    ) -> None:
        mlflow_sink.wait_all()  # the call's data-loading points are in MLflow when it returns
        pump.flush()
        self.channel.send(Reply(call_id=call.call_id, value=value, failure=failure))


@contextlib.contextmanager
def _acting_as(principal: str) -> Iterator[None]:
    """Everything the call does acts as ``principal``.

    Two places say who a process is: the ``as_principal`` override, which holds in this thread, and
    ``UC_JUPYTER_PRINCIPAL``, which threads (they start without the override) and child processes
    (DataLoader workers) read. Both are set from the call, so the rank's environment as it was started,
    or as an earlier call left it, never decides for this one. The variable keeps the call's value
    afterwards: a thread a call leaves running acts as the latest caller, never as whoever started the pool.
    """
    from uc_jupyter.catalog import as_principal

    os.environ["UC_JUPYTER_PRINCIPAL"] = principal
    with as_principal(principal):
        yield


def _start_torch(rank: int, world_size: int, local_rank: int) -> tuple[Any, str]:
    import torch
    import torch.distributed as dist

    backend = os.environ.get("UC_JUPYTER_RANK_BACKEND", "gloo")
    if os.environ.get("UC_JUPYTER_RANK_DEVICE") == "cuda":
        # On a Ray node the rank sees its node's GPUs and is told which is its own; here it is LOCAL_RANK's.
        index = int(os.environ.get("UC_JUPYTER_RANK_CUDA_INDEX", local_rank))
        torch.cuda.set_device(index)
        device = torch.device("cuda", index)
    else:
        device = torch.device("cpu")
    dist.init_process_group(backend=backend, init_method="env://", rank=rank, world_size=world_size)
    return device, backend


def main(argv: list[str]) -> int:
    channel = Channel.from_fd(int(argv[1]))
    parent = os.getppid()
    rank = int(os.environ["RANK"])
    world_size = int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    # A crash dump must outlive the pump threads: write it to the rank's log (the original stderr).
    crash_log: BinaryIO = os.fdopen(os.dup(2), "wb", buffering=0)
    faulthandler.enable(file=crash_log)
    # Every thread's stack, on the pool's asking, when this rank does not stop (distributed/stuck.py).
    faulthandler.register(DUMP_SIGNAL, file=crash_log, all_threads=True)
    calls: queue.Queue[object] = queue.Queue()
    _watch_parent(channel, calls, parent)
    pump = _OutputPump(channel)
    interruptible = _Interruptible()
    for entry in reversed(os.environ.get("UC_JUPYTER_RANK_PATH", "").split(os.pathsep)):
        if entry and entry not in sys.path:
            sys.path.insert(0, entry)
    try:
        device, backend = _start_torch(rank, world_size, local_rank)
    except BaseException as exc:
        pump.flush()
        channel.send(StartFailed(failure_of(exc, rank)))
        return 1

    from uc_jupyter.tables.spark import quiet_pandas_version_warning
    from uc_jupyter.telemetry import uplink

    quiet_pandas_version_warning()  # a rank's output is read in a notebook too
    uplink.install(lambda samples: channel.send(Telemetry(samples)))
    channel.send(Ready(rank=rank, pid=os.getpid(), device=str(device), backend=backend))
    worker = _Rank(channel, rank, world_size, local_rank, device)
    while True:
        try:
            message = calls.get()
        except KeyboardInterrupt:  # a late interrupt for a call that already ended
            continue
        if isinstance(message, Stop):
            break
        if isinstance(message, Call):
            worker.handle(message, interruptible, pump)
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    pump.flush(timeout=2.0)
    return 0


if __name__ == "__main__":
    code = main(sys.argv)
    # Skip interpreter teardown: user threads (non-daemon) must not keep a finished rank alive.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
