"""A real IPython kernel driven as JupyterLab drives it (jupyter_client over ZeroMQ), for tests that
check what a person sees in a notebook: streams, tracebacks, results, widgets and their updates.

The kernel is its own process with its own environment, so what it shows is what a notebook shows,
not what a shell inside the test process would print. :func:`running_kernel` starts one and always
shuts it down; :meth:`Kernel.run` runs a cell and gathers what that cell sent into a :class:`Cell`.

Example (not run by the doctests: a kernel takes seconds to start):
    >>> env = kernel_env(UC_JUPYTER_HOME=str(home))                            # doctest: +SKIP
    >>> with running_kernel(env=env, cwd=home, load_extension=True) as kernel:  # doctest: +SKIP
    ...     cell = kernel.run("print('hi')\\n1 + 1")
    >>> cell.text("stdout"), cell.results, cell.reply["status"]                # doctest: +SKIP
    ('hi\\n', ['2'], 'ok')
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import KernelManager

__all__ = ["Cell", "Kernel", "kernel_env", "running_kernel"]

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Not a measured duration: a bound so that a broken kernel fails the test instead of hanging it.
_GUARD_S = 240.0
# Ours or the test run's: a kernel that inherited them would use the test's home, tracking server or
# Spark mode instead of what the test gives it. SPARK_CONNECT_MODE_ENABLED is set by get_spark() in
# the test process (uc_jupyter/tables/spark.py) and changes what pyspark imports.
_DROPPED_PREFIXES = ("UC_JUPYTER_", "MLFLOW_")
_DROPPED = ("SPARK_CONNECT_MODE_ENABLED",)


def kernel_env(**values: str) -> dict[str, str]:
    """This process's environment without uc_jupyter's, MLflow's and Spark Connect's settings, plus
    ``values``: what a kernel started from a clean shell with ``values`` exported would see.

    Example:
        >>> env = kernel_env(UC_JUPYTER_PRINCIPAL="admin")
        >>> env["UC_JUPYTER_PRINCIPAL"], [k for k in env if k.startswith("MLFLOW_")]
        ('admin', [])
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROPPED_PREFIXES) and k not in _DROPPED}
    return env | values


@dataclass
class Cell:
    """What one execute request produced on the kernel's iopub channel, and its shell reply."""

    reply: dict[str, Any]  # the execute_reply's content: status, and ename/evalue on an error
    streams: list[tuple[str, str]] = field(default_factory=list)  # (stdout | stderr, text), in order
    errors: list[list[str]] = field(default_factory=list)  # each error's traceback lines, ANSI removed
    results: list[str] = field(default_factory=list)  # text/plain of execute results
    displays: list[dict[str, Any]] = field(default_factory=list)  # the data (mime type: value) of each display_data
    values: list[Any] = field(default_factory=list)  # each widget ``value`` sent in a comm state update

    def text(self, name: str) -> str:
        """All that went to stream ``name`` ("stdout" or "stderr"), joined."""
        return "".join(text for stream, text in self.streams if stream == name)

    @property
    def failure(self) -> str | None:
        """What went wrong, to read in an assertion message; None when the cell ran.

        A ``UsageError`` (a magic's bad arguments) sends no error message: IPython prints it on
        stderr and the reply says "error", so its stderr is what went wrong.

        Example:
            >>> Cell(reply={"status": "error"}, streams=[("stderr", "UsageError: no table x\\n")]).failure
            'UsageError: no table x\\n'
            >>> Cell(reply={"status": "ok"}, streams=[("stderr", "a warning\\n")]).failure is None
            True
        """
        if self.errors:
            return "\n\n".join("\n".join(lines) for lines in self.errors)
        if self.reply.get("status", "ok") != "ok":
            return self.text("stderr") or f"the cell ended with status {self.reply['status']!r}"
        return None


class Kernel:
    """A running kernel and its client: run cells, read what they show, press Ctrl-C."""

    def __init__(self, manager: KernelManager, client: BlockingKernelClient, *, timeout: float = _GUARD_S) -> None:
        self.manager = manager
        self.client = client
        self.timeout = timeout

    def run(
        self, code: str, *, interrupt_when: Callable[[Cell], bool] | None = None, timeout: float | None = None
    ) -> Cell:
        """Run ``code`` as one cell and gather what it sent until the kernel is idle again.

        With ``interrupt_when``, interrupt the kernel (Ctrl-C) once, as soon as the output so far
        satisfies it. ``timeout`` (the kernel's by default) bounds the whole cell, reply included;
        past it the cell fails with an AssertionError naming the code.
        """
        seconds = self.timeout if timeout is None else timeout
        deadline, what = time.monotonic() + seconds, f"{code!r} in {seconds:g} s"
        msg_id = self.client.execute(code)
        cell = Cell(reply={})
        interrupted = False
        while True:
            message = self._next(self.client.get_iopub_msg, deadline, what)
            # The channel carries every cell's output (and the kernel's own status): keep this cell's.
            if message["parent_header"].get("msg_id") != msg_id:
                continue
            kind, content = message["msg_type"], message["content"]
            if kind == "stream":
                cell.streams.append((content["name"], content["text"]))
            elif kind == "error":
                cell.errors.append(_ANSI.sub("", "\n".join(content["traceback"])).splitlines())
            elif kind == "execute_result":
                cell.results.append(content["data"].get("text/plain", ""))
            elif kind == "display_data":
                cell.displays.append(content["data"])
            elif kind == "comm_msg" and "value" in content["data"].get("state", {}):
                cell.values.append(content["data"]["state"]["value"])
            elif kind == "status" and content["execution_state"] == "idle":
                break  # idle after this cell's busy: everything it sent has been sent
            if interrupt_when is not None and not interrupted and interrupt_when(cell):
                self.manager.interrupt_kernel()
                interrupted = True
        while True:  # the reply comes on the shell channel, after replies to anything sent before
            reply = self._next(self.client.get_shell_msg, deadline, what)
            if reply["parent_header"].get("msg_id") == msg_id:
                cell.reply = dict(reply["content"])
                return cell

    def complete(self, code: str) -> list[str]:
        """What Tab offers at the end of ``code``, asked as JupyterLab asks (a complete_request).

        Example:
            >>> kernel.complete("df = %uc_load main.ml.ir")   # doctest: +SKIP
            ['main.ml.iris']
        """
        deadline, what = time.monotonic() + self.timeout, f"completing {code!r}"
        msg_id = self.client.complete(code, len(code))
        while True:
            reply = self._next(self.client.get_shell_msg, deadline, what)
            if reply["parent_header"].get("msg_id") == msg_id:
                return list(reply["content"]["matches"])

    @staticmethod
    def _next(receive: Callable[..., dict[str, Any]], deadline: float, what: str) -> dict[str, Any]:
        try:
            return receive(timeout=max(deadline - time.monotonic(), 0.0))
        except queue.Empty:
            raise AssertionError(f"the kernel did not finish {what}") from None


@contextlib.contextmanager
def running_kernel(
    *, env: Mapping[str, str], cwd: str | Path, load_extension: bool = False, timeout: float = _GUARD_S
) -> Iterator[Kernel]:
    """A new python3 kernel with environment ``env`` in folder ``cwd``, ready for cells; shut down
    (at once, not politely: nothing in it is worth waiting for) when the block ends, however it ends.

    With ``load_extension``, ``%load_ext uc_jupyter`` has run in a cell of its own, as a notebook's
    first cell. ``timeout`` bounds the start and, unless a run says otherwise, each cell.

    Example:
        >>> with running_kernel(env=kernel_env(), cwd=tmp) as kernel:     # doctest: +SKIP
        ...     assert kernel.run("x = 1").failure is None
    """
    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(env=dict(env), cwd=str(cwd))
    client = manager.client()
    try:
        client.start_channels()
        client.wait_for_ready(timeout=timeout)
        kernel = Kernel(manager, client, timeout=timeout)
        if load_extension:
            loaded = kernel.run("%load_ext uc_jupyter")
            if loaded.failure is not None:
                raise AssertionError(f"%load_ext uc_jupyter failed:\n{loaded.failure}")
        yield kernel
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
