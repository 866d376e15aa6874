"""Progress for waits: what is awaited and for how long, once a wait passes a second.

A wait that ends within ``delay`` (1 s) shows nothing. A longer one shows one line that says what it
waits for and how long it has waited, redrawn every ``interval``: a single rewritten line on a
terminal, a small widget in a Jupyter kernel, and otherwise (logs, pipes) one line when it starts
being shown and one when it ends. The line's text is the same everywhere::

    starting Spark Connect (first use: about 20 s) ... 6 s
    starting Spark Connect (first use: about 20 s): done in 14 s

Time and output are injected: tests pass a fake clock and a recording output, leave out the ticker
thread (``interval=None``) and call :meth:`Wait.tick` themselves.

Example:
    >>> import time
    >>> with waiting("starting Spark Connect (first use: about 20 s)") as wait:  # doctest: +SKIP
    ...     time.sleep(3)
    ...     wait.label = "connecting to Spark Connect"
    starting Spark Connect (first use: about 20 s) ... 2 s
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TextIO

__all__ = [
    "LineCallback",
    "PlainLines",
    "ProgressOutput",
    "TerminalLine",
    "Wait",
    "WidgetLine",
    "as_output",
    "auto_output",
    "current_wait",
    "format_duration",
    "waiting",
]

Clock = Callable[[], float]
_current = threading.local()  # the wait with the default output that this thread is in, if any


class ProgressOutput(Protocol):
    """Where a wait's line goes: ``show`` while waiting (the newest text replaces the last one),
    ``finish`` once, when the wait is over."""

    def show(self, text: str) -> None: ...

    def finish(self, text: str) -> None: ...


def format_duration(seconds: float) -> str:
    """Seconds as people read them: whole seconds, then minutes, then hours.

    Example:
        >>> format_duration(6.4), format_duration(65), format_duration(3720)
        ('6 s', '1 min 5 s', '1 h 2 min')
    """
    total = max(0, int(seconds))
    if total < 60:
        return f"{total} s"
    minutes, secs = divmod(total, 60)
    if minutes < 60:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


class Wait:
    """One wait in progress; :func:`waiting` makes it. ``label`` may be changed as the wait moves on
    to its next step; the elapsed time counts from the start of the whole wait."""

    def __init__(self, label: str, output: ProgressOutput, *, clock: Clock = time.monotonic, delay: float = 1.0):
        self._label = label
        self._output = output
        self._clock = clock
        self._delay = delay
        self._start = clock()
        self._shown = False
        self._finished = False
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        return self._label

    @label.setter
    def label(self, value: str) -> None:
        with self._lock:
            self._label = value
        self.tick()

    @property
    def elapsed(self) -> float:
        """Seconds since the wait began (by the injected clock)."""
        return self._clock() - self._start

    @property
    def shown(self) -> bool:
        """Whether anything has been shown (the wait passed ``delay``)."""
        return self._shown

    def tick(self) -> None:
        """Show the line now if the wait has passed ``delay``; the ticker thread calls this."""
        with self._lock:
            elapsed = self.elapsed
            if self._finished or elapsed < self._delay:
                return
            self._shown = True
            self._output.show(f"{self._label} ... {format_duration(elapsed)}")

    def finish(self, *, failed: bool = False, label: str | None = None) -> None:
        """End the wait: a last line when anything was shown (``done in`` or ``failed after``),
        under ``label`` when given (what the wait came to, rather than its last step)."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            if label is not None:
                self._label = label
            if self._shown:
                outcome = "failed after" if failed else "done in"
                self._output.finish(f"{self._label}: {outcome} {format_duration(self.elapsed)}")


def current_wait() -> Wait | None:
    """The wait with the default output this thread is in (a table load's, say), if any: a step it
    waits for (a Spark query's progress) says itself on that wait's line instead of drawing another."""
    return getattr(_current, "wait", None)


@contextlib.contextmanager
def waiting(
    label: str,
    *,
    output: ProgressOutput | None = None,
    clock: Clock = time.monotonic,
    delay: float = 1.0,
    interval: float | None = 0.5,
) -> Iterator[Wait]:
    """Show the progress of the wait in the ``with`` block once it passes ``delay`` seconds.

    ``output`` defaults to :func:`auto_output`. With ``interval`` (seconds) a daemon thread redraws
    the line while the block blocks; with ``interval=None`` only :meth:`Wait.tick` calls redraw it.
    A wait with the default output inside another one in the same thread (a server start inside a
    table load) is a step of the outer wait: it relabels the outer line for its duration rather
    than drawing a second line.

    Example:
        >>> lines = []
        >>> now = [0.0]
        >>> with waiting("starting", output=LineCallback(lines.append), clock=lambda: now[0], interval=None) as w:
        ...     now[0] = 2.0
        ...     w.tick()
        >>> lines
        ['starting ... 2 s', 'starting: done in 2 s']
    """
    outer = current_wait()
    if output is None and outer is not None:
        before = outer.label
        outer.label = label
        try:
            yield outer
        finally:
            outer.label = before
        return
    wait = Wait(label, output if output is not None else auto_output(), clock=clock, delay=delay)
    if output is None:
        _current.wait = wait
    stop = threading.Event()
    ticker = None
    if interval is not None:
        period = interval

        def redraw() -> None:
            while not stop.wait(period):
                wait.tick()

        ticker = threading.Thread(target=redraw, name="uc-jupyter-progress", daemon=True)
        ticker.start()
    failed = True
    try:
        yield wait
        failed = False
    finally:
        stop.set()
        if ticker is not None:
            ticker.join()
        if current_wait() is wait:
            _current.wait = None
        wait.finish(failed=failed)


# ----------------------------------------------------------------------------- outputs
class LineCallback:
    """Each line to a function of one string (``print``, a logger, a list's ``append``): the first
    line of each step (a new label) and the last one, never the redraws in between."""

    def __init__(self, write: Callable[[str], object]):
        self._write = write
        self._step: str | None = None

    def show(self, text: str) -> None:
        step = text.rsplit(" ... ", 1)[0]
        if step != self._step:
            self._step = step
            self._write(text)

    def finish(self, text: str) -> None:
        self._write(text)


class PlainLines(LineCallback):
    """Lines to a stream that cannot redraw (a log file, a pipe): the first and the last."""

    def __init__(self, stream: TextIO | None = None):
        def write(text: str) -> None:
            target = stream if stream is not None else sys.stderr
            print(text, file=target, flush=True)

        super().__init__(write)


class TerminalLine:
    """One line on a terminal, rewritten in place (carriage return), ended by the last text."""

    def __init__(self, stream: TextIO | None = None):
        self._stream = stream
        self._width = 0

    def show(self, text: str) -> None:
        self._write(text, end="")

    def finish(self, text: str) -> None:
        self._write(text, end="\n")

    def _write(self, text: str, *, end: str) -> None:
        stream = self._stream if self._stream is not None else sys.stderr
        padding = " " * max(0, self._width - len(text))  # blank what a longer earlier text left
        self._width = len(text)
        stream.write(f"\r{text}{padding}{end}")
        stream.flush()


class WidgetLine:
    """A one-line widget in a Jupyter kernel, shown at the first redraw and updated in place
    (ipykernel >= 7.1 sends updates from the ticker thread)."""

    def __init__(self, display: Callable[[Any], object] | None = None):
        self._display = display
        self._widget: Any = None

    def show(self, text: str) -> None:
        if self._widget is None:
            import ipywidgets  # type: ignore[import-untyped]

            self._widget = ipywidgets.HTML(value=_html(text), layout=ipywidgets.Layout(width="auto"))
            if self._display is not None:
                self._display(self._widget)
            else:
                from IPython.display import display

                display(self._widget)  # type: ignore[no-untyped-call]
        else:
            self._widget.value = _html(text)

    def finish(self, text: str) -> None:
        if self._widget is not None:
            self._widget.value = _html(text)


def _html(text: str) -> str:
    import html

    return f"<code>{html.escape(text)}</code>"


def auto_output(stream: TextIO | None = None) -> ProgressOutput:
    """A widget in a Jupyter kernel, a rewritten line on a terminal, plain lines otherwise
    (``stream`` defaults to ``sys.stderr``)."""
    if _in_kernel():
        return WidgetLine()
    target = stream if stream is not None else sys.stderr
    isatty = getattr(target, "isatty", None)
    if isatty is not None and isatty():
        return TerminalLine(target)
    return PlainLines(target)


def as_output(progress: ProgressOutput | Callable[[str], object] | None) -> ProgressOutput | None:
    """An output from what callers may pass: an output as is, a function of one line wrapped in
    :class:`LineCallback` (``print``, ``lambda line: None`` to be silent), None (the default) as is."""
    if progress is None or (callable(getattr(progress, "show", None)) and callable(getattr(progress, "finish", None))):
        return progress  # type: ignore[return-value]
    if not callable(progress):
        raise TypeError(f"invalid progress {progress!r}: give a ProgressOutput, a function of one line, or None")
    return LineCallback(progress)


def _in_kernel() -> bool:
    # IPython is not imported for the question: if nothing imported it, there is no kernel.
    if "IPython" not in sys.modules or ("ipywidgets" not in sys.modules and not _importable("ipywidgets")):
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _importable(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
