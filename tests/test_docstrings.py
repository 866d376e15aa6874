"""The examples in the pure modules' docstrings run and print what they show."""

from __future__ import annotations

import doctest
from types import ModuleType

import pytest

import uc_jupyter.ucserver as ucserver
from uc_jupyter import errors, lazy, options, processes, progress, testing
from uc_jupyter.catalog import delta_files, volume_paths
from uc_jupyter.catalog import model as catalog_model
from uc_jupyter.catalog.embedded import entry_locks, local, metastore, pending, secrets, tokens
from uc_jupyter.catalog.embedded import rows as _rows
from uc_jupyter.catalog.rest import http, vended
from uc_jupyter.catalog.rest import names as rest_names
from uc_jupyter.catalog.rules import names, privileges, reserved
from uc_jupyter.catalog.wire import errors as wire_errors
from uc_jupyter.catalog.wire import read as wire_read
from uc_jupyter.catalog.wire import shapes as wire
from uc_jupyter.checkpoint import layout as checkpoint_layout
from uc_jupyter.checkpoint import rng
from uc_jupyter.data.loader import fit
from uc_jupyter.data.mix import epochs as mix_epochs
from uc_jupyter.data.mix import figures as mix_figures
from uc_jupyter.data.mix import part_consumer as mix_part_consumer
from uc_jupyter.data.mix import schedule as mix_schedule
from uc_jupyter.data.stream import partition, position, renewal, resume
from uc_jupyter.data.stream import partitioned as stream
from uc_jupyter.data.volume import decode, files_at_once, pace
from uc_jupyter.data.volume import listing as remote
from uc_jupyter.data.volume import window_files as wanted
from uc_jupyter.distributed import accelerators, board, checks, outcome, payload, proctree, protocol, status
from uc_jupyter.distributed import errors as rank_errors
from uc_jupyter.distributed.launch import ray_cluster
from uc_jupyter.jupyter import args
from uc_jupyter.ray import checks as ray_checks
from uc_jupyter.storage import cloud, downloads, export_manifest, keys, locations, nofollow, retry, stores, writes
from uc_jupyter.storage import errors as storage_errors
from uc_jupyter.storage import staged as staged_files
from uc_jupyter.storage import urls as storage
from uc_jupyter.tables import spark_server, spark_watchdog
from uc_jupyter.telemetry import collector, model, producer, reporter, uplink, watch
from uc_jupyter.testing import boards, clocks, kernels, s3_answers, scripts, served, waits
from uc_jupyter.ucserver import app as ucserver_app
from uc_jupyter.ucserver import auth as ucserver_auth
from uc_jupyter.ucserver import routes_data as ucserver_routes_data
from uc_jupyter.ucserver import routes_extensions as ucserver_routes_extensions
from uc_jupyter.ucserver import serve as ucserver_serve
from uc_jupyter.widgets import charts, view


@pytest.mark.parametrize(
    "module",
    [
        *(names, privileges, storage, locations, reserved, secrets, entry_locks, _rows, delta_files),
        *(local, metastore, pending, tokens, staged_files),
        *(partition, options, decode, stream, model, reporter, collector, producer, uplink, lazy),
        *(processes, errors, rank_errors, payload, protocol, board, proctree, args, charts, view),
        *(progress, spark_server, spark_watchdog, kernels, boards),
        *(wire, wire_errors, ucserver, ucserver_app, ucserver_auth, ucserver_routes_data, ucserver_serve),
        *(http, vended, wire_read, rest_names, ucserver_routes_extensions),
        pytest.param(served, marks=pytest.mark.servers),  # its example serves a home (uc-jupyter serve)
        *(pace, remote, wanted, waits, clocks, scripts, fit, files_at_once),
        *(accelerators, status, ray_cluster, checks, outcome, ray_checks),
        *(mix_schedule, mix_epochs, mix_part_consumer, mix_figures),
        *(resume, position, renewal, rng, checkpoint_layout, writes, s3_answers, export_manifest),
        *(keys, retry, stores, watch, downloads, catalog_model, volume_paths, cloud, storage_errors, nofollow, testing),
    ],
    ids=lambda m: m.__name__,
)
def test_docstring_examples(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
