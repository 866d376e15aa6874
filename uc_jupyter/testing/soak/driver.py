"""The soak's driver: the notebook's side of a long training run under faults, and what it held.

:func:`run_soak` starts the services (:class:`~uc_jupyter.testing.soak.stack.SoakStack`), turns the
S3 server's random faults on, and runs :func:`~uc_jupyter.testing.soak.rank_loop.train_epoch` on a
pool of 2 ranks, one call per epoch, with the pool's dashboard live (one
:class:`~uc_jupyter.widgets.LoaderMonitor` over the ranks' telemetry, a pass per call, as one
notebook cell training for 20 epochs has). In the epochs
:func:`~uc_jupyter.testing.soak.plan.fault_epochs` names it injects, one each: rank 1 kills itself,
rank 0 kills one of its DataLoader workers, the catalog server is killed and started again, the
cache's disk is filled. A call that fails is what a person would see: its error, one line; the next
call resumes from the newest checkpoint. At the end it judges
(:mod:`~uc_jupyter.testing.soak.verdict`) and looks for what was left behind
(:mod:`~uc_jupyter.testing.soak.leftovers`).

Example:
    >>> report = run_soak(SoakSize.named("tiny"))  # doctest: +SKIP
    >>> report.held, print(report.text())            # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from uc_jupyter.errors import first_line
from uc_jupyter.testing.soak.injections import Injection, during
from uc_jupyter.testing.soak.leftovers import files_in, files_left, processes_left, stamped
from uc_jupyter.testing.soak.plan import BASELINE_EPOCH, RANKS, SoakSize, fault_epochs
from uc_jupyter.testing.soak.rank_loop import EpochCall, EpochResult, rss_bytes, train_epoch
from uc_jupyter.testing.soak.stack import SoakStack
from uc_jupyter.testing.soak.verdict import (
    Check,
    EpochTally,
    epochs_exactly_once,
    memory_flat,
    no_corrupted_sample,
    table,
    tally,
)

__all__ = ["SoakReport", "run_soak"]

FAIL_RATE, RESET_RATE = 0.01, 0.001  # the issue's: 1% of GETs answered 503, 0.1% reset
_SERVE_DOWN_S = 2.0  # how long the catalog server stays dead
_DISK_FULL_S = 20.0  # how long the disk stays full at most (the call usually fails within seconds)
_MAX_FAILURES = 3  # failed calls in a row before the soak gives up (a fault the loop does not survive)


@dataclass
class FaultRecord:
    """One fault: the epoch it was injected in (1-based, 0: never), what was done, the error the call
    raised (one line; "" when the loop carried on), and an error of the injection itself."""

    fault: str
    epoch: int = 0
    said: str = ""
    error: str = ""
    broken: str = ""


@dataclass
class SoakReport:
    """What a run recorded and held; :meth:`text` is the table printed at the end."""

    size: SoakSize
    checks: list[Check] = field(default_factory=list)
    faults: dict[str, FaultRecord] = field(default_factory=dict)
    seconds: float = 0.0
    s3_stats: dict[str, Any] = field(default_factory=dict)
    taken_back: int = 0

    @property
    def held(self) -> bool:
        return bool(self.checks) and all(check.held for check in self.checks)

    def text(self) -> str:
        size = self.size
        injected = self.s3_stats.get("faults", {})
        gets = sum(self.s3_stats.get("gets", {}).values())
        lines = [
            f"soak: {size.epochs} epochs, 2 ranks x {size.workers} workers, {size.files} files + {size.rows} rows, "
            f"{self.seconds / 60:.1f} min; S3 faults: {injected.get('503', 0)} 503s and {injected.get('reset', 0)} "
            f"resets in {gets:,} GETs ({FAIL_RATE:.0%} / {RESET_RATE:.1%})",
            table(self.checks),
        ]
        return "\n".join(lines)


def run_soak(
    size: SoakSize, *, root: Path | None = None, seed: int = 0, say: Callable[[str], None] = print
) -> SoakReport:
    """Run the soak at ``size`` in a temporary folder under ``root`` (default: the system's); the report."""
    report = SoakReport(size, faults={fault: FaultRecord(fault) for fault in fault_epochs(size.epochs)})
    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="uc-soak-", dir=root))
    processes: set[str] = set()  # stamps of the ranks, the servers
    try:
        with SoakStack(workdir, size, seed=seed) as stack:
            stack.faults_on(fail_rate=FAIL_RATE, reset_rate=RESET_RATE)
            with _environment(stack.environment()):
                tallies, rss, telemetry = _train(stack, size, report, processes, say)
            report.s3_stats = stack.s3.stats()
            report.taken_back, left = _files_left(stack)
            processes |= stack.processes
            _judge(report, tallies, rss, telemetry, left)
        still = processes_left(processes)
        mounted = _is_mounted(workdir / "cache-disk")
        report.checks.append(
            Check(
                "no process left",
                not still and not mounted,
                f"{len(processes)} processes gone" + _named(still, mounted),
            )
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        report.seconds = time.monotonic() - began
    return report


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """The kernel's environment for the block: ranks copy it when they start."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _train(
    stack: SoakStack, size: SoakSize, report: SoakReport, processes: set[str], say: Callable[[str], None]
) -> tuple[dict[int, EpochTally], dict[str, dict[int, int]], dict[int, bool]]:
    from uc_jupyter.distributed import RankPool
    from uc_jupyter.widgets import LoaderMonitor

    pending = {epoch: fault for fault, epoch in fault_epochs(size.epochs).items()}
    tallies: dict[int, EpochTally] = {}
    rss: dict[str, dict[int, int]] = {"driver": {}}
    telemetry: dict[int, bool] = {}
    middle = size.steps_per_epoch // 2 + 1  # past a mid-epoch checkpoint: the resume is a partial epoch's
    epoch, failures, calls = 0, 0, 0
    with RankPool(RANKS, devices="cpu", stop_grace=5.0) as pool:
        # Live from each pass's first poll (show_after=0), where a notebook shows it once a pass has
        # lasted a second: every epoch of the soak has it, however quick.
        watch = LoaderMonitor(
            pool.collector.snapshot, title="soak: 2 ranks", show_after=0.0, display=_headless, cell=lambda: "soak"
        )
        while epoch < size.epochs:
            calls += 1
            fault = next((f for e, f in sorted(pending.items()) if e <= epoch + 1), None)
            handshake = stack.root / "handshakes" / f"call-{calls}"
            call = EpochCall(
                epoch,
                failures > 0,
                stack.volume,
                stack.table,
                stack.run,
                size,
                kill_worker_at=middle if fault == "worker" else None,
                kill_rank_at=middle if fault == "rank" else None,
                meet_at=middle if fault in _BY_THE_DRIVER else None,
                handshake=str(handshake),
            )
            before = pool.collector.snapshot().loops()
            started = time.monotonic()
            with _fault(fault, stack, handshake) as injected:
                watch.begin(f"epoch {epoch + 1}", pool.collector.snapshot())
                try:
                    results: list[EpochResult] = pool.run(train_epoch, call)
                    error = ""
                except Exception as exc:
                    error = _one_line(exc)
                watch.end(pool.collector.snapshot(), error=error or None)
            processes |= stamped(rank.pid for rank in pool.status().ranks)
            if fault is not None and injected.done:
                pending = {e: f for e, f in pending.items() if f != fault}
                record = report.faults[fault]
                record.epoch, record.said, record.error, record.broken = epoch + 1, injected.said, error, injected.error
                say(f"epoch {epoch + 1}: {injected.said}" + (f" ({injected.error})" if injected.error else ""))
            if error:
                failures += 1
                if failures > _MAX_FAILURES:
                    report.checks.append(Check("the loop went on", False, f"epoch {epoch + 1} failed {failures} times"))
                    say(f"epoch {epoch + 1}: {error}; {failures} failures in a row, giving up")
                    break
                say(f"epoch {epoch + 1}: {error}; resuming from the newest checkpoint")
                continue
            done, failures = results[0].epoch, 0
            seconds = time.monotonic() - started
            after = pool.collector.snapshot().loops()
            fresh = all(after.get(rank) not in (None, before.get(rank)) for rank in range(RANKS))
            telemetry[done] = fresh and watch.dashboard is not None
            tallies[done] = tally(
                np.frombuffer(results[0].before + b"".join(result.after for result in results), "S16"),
                np.frombuffer(b"".join(result.row_ids for result in results), np.int64),
                np.frombuffer(b"".join(result.row_digests for result in results), "S16"),
                stack.expected_files,
                stack.expected_rows,
            )
            for result in results:
                rss.setdefault(f"rank {result.rank}", {})[done + 1] = result.rss_bytes
            resumed = results[0].resumed_from
            del results  # every digest of the epoch: judged, not kept
            gc.collect()  # what the driver holds, not garbage it has yet to collect
            rss["driver"][done + 1] = rss_bytes()
            memory = "/".join(f"{rss[name][done + 1] / 2**20:.0f}" for name in sorted(rss))
            since = f", resumed from {resumed.rsplit('/', 1)[-1]}" if resumed else ""
            say(f"epoch {done + 1}/{size.epochs}: {seconds:.1f} s{since}; RSS driver/ranks {memory} MiB")
            epoch = done + 1
    return tallies, rss, telemetry


def _headless(widget: object) -> None:
    """Where the dashboard would be displayed: the soak runs with no kernel, so it is only kept live
    (polled and redrawn) and never shown."""


@contextlib.contextmanager
def _fault(fault: str | None, stack: SoakStack, handshake: Path) -> Iterator[Injection]:
    """The fault of this call: the driver's own injected from a thread while the call runs (see
    :mod:`~uc_jupyter.testing.soak.injections`), the ranks' told in the call."""
    if fault == "serve":

        def kill() -> str:
            stack.kill_serve()
            return f"uc-jupyter serve killed (SIGKILL), started again {_SERVE_DOWN_S:g} s later"

        with during(kill, stack.restart_serve, handshake=handshake, hold_s=_SERVE_DOWN_S) as injected:
            yield injected
    elif fault == "disk":

        def fill() -> str:
            filled = stack.fill_disk() / 2**20
            return (
                f"the cache's disk filled ({filled:.0f} MiB more), emptied when the call ended or {_DISK_FULL_S:g} s on"
            )

        with during(fill, stack.free_disk, handshake=handshake, hold_s=_DISK_FULL_S) as injected:
            yield injected
    else:
        said = _BY_THE_RANKS.get(fault or "", "")
        yield Injection(done=bool(said), said=said)


_BY_THE_DRIVER = ("serve", "disk")
# The faults the ranks inject into themselves, at the middle step of their epoch (see rank_loop).
_BY_THE_RANKS = {"rank": "rank 1 killed itself (SIGKILL)", "worker": "rank 0 killed a DataLoader worker (SIGKILL)"}


def _files_left(stack: SoakStack) -> tuple[int, list[str]]:
    """What dead processes left in the cache (taken back by its next opening), and what is left after it."""
    from uc_jupyter.data.cache import FileCache

    cache = stack.cache_dir
    dead = len(files_in(cache / "tmp")) + len(files_in(cache / "stream"))
    FileCache(cache, max_bytes=stack.cache_max_bytes)
    bucket = stack.s3.root / "soak"
    left = files_left(
        runs=bucket / "runs" / "soak", uploads=stack.s3.root / ".uploads", cache=cache, staging=cache / "staging"
    )
    return dead, left


def _judge(
    report: SoakReport,
    tallies: dict[int, EpochTally],
    rss: dict[str, dict[int, int]],
    telemetry: dict[int, bool],
    left: list[str],
) -> None:
    size = report.size
    for record in report.faults.values():
        outcome = f"error, then resumed: {_clipped(record.error)}" if record.error else "the loop carried on"
        if record.epoch == 0:
            outcome = "never injected"
        elif record.broken:
            outcome = f"the injection failed: {record.broken}"
        held = record.epoch > 0 and not record.broken
        report.checks.append(Check(f"fault: {record.fault} (epoch {record.epoch})", held, f"{record.said}; {outcome}"))
    report.checks += [
        epochs_exactly_once(tallies, epochs=size.epochs, samples=size.files + size.rows),
        no_corrupted_sample(tallies),
        memory_flat(rss, baseline=BASELINE_EPOCH, last=size.epochs),
        Check(
            "dashboard telemetry flowing",
            len(telemetry) == size.epochs and all(telemetry.values()),
            f"{sum(telemetry.values())}/{size.epochs} epochs: the dashboard live, new loop telemetry from every rank",
        ),
        Check(
            "no file left behind",
            not left,
            "; ".join(left[:5])
            or f"checkpoints, uploads, staging, cache ({report.taken_back} files of dead "
            "processes taken back by the cache's next opening)",
        ),
    ]


def _is_mounted(where: Path) -> bool:
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == str(where) for line in mounts)


def _named(pids: list[int], mounted: bool) -> str:
    said = [f"still running: {pids}"] if pids else []
    said += ["the cache's tmpfs is still mounted"] if mounted else []
    return "; " + "; ".join(said) if said else ""


def _one_line(exc: BaseException) -> str:
    """The error a call raised, in one line, with what caused it where its first line does not say:
    torch's CheckpointException says only which ranks failed, and an error of the user's (or of a
    library's) re-raised from a DataLoader worker only in which worker ("Caught ... in DataLoader
    worker process 1.": the project's own come back as themselves, data/loader/worker_errors.py);
    the last line of their messages is the error itself."""
    said = f"{type(exc).__name__}: {first_line(exc)}"
    messages = [failure.message for failure in getattr(exc, "failures", ())] or [str(exc)]
    causes = [message.strip().splitlines()[-1] for message in messages if message.strip()]
    deeper = sorted({cause for cause in causes if cause not in said})
    return f"{said} ({'; '.join(deeper)})"[:400] if deeper else said[:400]


def _clipped(text: str, most: int = 160) -> str:
    return text if len(text) <= most else text[: most - 3] + "..."
