"""Which MLflow run this process logs to: its active run, or in a rank the kernel's run its call
carries; and MLflow's own logging kept out of a notebook.

A kernel running ranks (:mod:`uc_jupyter.distributed`) sends each call the run active in the kernel
(:func:`caller_run`); the rank puts it in place for the call (:func:`logging_to`), and every loader
of the rank logs into it (:func:`active_run_id`, what :class:`~uc_jupyter.telemetry.mlflow_sink.MlflowSink`
asks), as the reference runtime's ranks log into the notebook's run.

Example:
    >>> with logging_to(None):
    ...     active_run_id() is None or "an MLflow run is active here"
    True
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator

__all__ = ["RUN_VARIABLE", "active_run", "active_run_id", "caller_run", "logging_to", "quiet_mlflow_logging"]

_QUIET = "WARNING"  # MLflow's INFO lines ("Created MLflow experiment", run links) are not for a notebook
# In a rank, for a call: the kernel's run (caller_run), which the rank's loaders log into.
RUN_VARIABLE = "UC_JUPYTER_MLFLOW_RUN"


def quiet_mlflow_logging() -> None:
    """Keep MLflow's INFO logging out of a notebook: MLflow reads ``MLFLOW_LOGGING_LEVEL`` when it is
    first imported (here, or in ranks and workers, which inherit it); a level the user set wins.
    When MLflow is already imported, its loggers are raised to that level now.

    Example:
        >>> quiet_mlflow_logging()   # what %load_ext uc_jupyter does   # doctest: +SKIP
    """
    import logging

    threshold = logging.getLevelName(os.environ.setdefault("MLFLOW_LOGGING_LEVEL", _QUIET).upper())
    if "mlflow" in sys.modules and isinstance(threshold, int):
        for name in ("mlflow", "alembic"):
            logger = logging.getLogger(name)
            if logger.getEffectiveLevel() < threshold:
                logger.setLevel(threshold)


def active_run_id() -> str | None:
    """The run this process logs to: its active fluent run, else the kernel's run that a rank's
    call carries (:func:`logging_to`), else ``MLFLOW_RUN_ID``; never imports mlflow itself (an
    active fluent run means it is imported already)."""
    found = active_run()
    return found[0] if found is not None else None


def active_run() -> tuple[str, str | None] | None:
    """:func:`active_run_id` and the tracking URI to reach it at (None: MLflow's own default)."""
    mlflow = sys.modules.get("mlflow")
    if mlflow is not None:
        active = mlflow.active_run()
        if active is not None:
            return str(active.info.run_id), None
    carried = os.environ.get(RUN_VARIABLE)
    if carried:
        with contextlib.suppress(ValueError, KeyError, TypeError):
            run = json.loads(carried)
            return str(run["run_id"]), str(run["tracking_uri"])
    run_id = os.environ.get("MLFLOW_RUN_ID")
    return (run_id, None) if run_id else None


def caller_run() -> str | None:
    """The run active in this process (a kernel), as a rank's call carries it: its id and tracking
    URI; None when none is active. The ranks' loaders log their per-rank keys into it
    (:func:`logging_to`), as the reference runtime's do into the notebook's run.

    Example:
        >>> with mlflow.start_run():                       # doctest: +SKIP
        ...     carried = caller_run()                     # what pool calls send their ranks
    """
    mlflow = sys.modules.get("mlflow")
    active = mlflow.active_run() if mlflow is not None else None
    if mlflow is None or active is None:
        return None
    return json.dumps({"run_id": active.info.run_id, "tracking_uri": mlflow.get_tracking_uri()})


@contextlib.contextmanager
def logging_to(run: str | None) -> Iterator[None]:
    """For one call in a rank: loaders log into ``run`` (:func:`caller_run`, the kernel's; None:
    none unless the rank starts its own). The rank's environment before the call comes back after
    it, so a later call made without a run logs nothing into an old one. MLflow's own variables are
    left alone: ``MLFLOW_RUN_ID`` would make a ``start_run()`` in the rank resume, and end, the kernel's run.

    Example:
        >>> with logging_to(call.mlflow_run):              # doctest: +SKIP
        ...     run_the_call()
    """
    before = os.environ.get(RUN_VARIABLE)
    if run is None:
        os.environ.pop(RUN_VARIABLE, None)
    else:
        os.environ[RUN_VARIABLE] = run
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(RUN_VARIABLE, None)
        else:
            os.environ[RUN_VARIABLE] = before
