"""uc_jupyter.testing.soak.driver: the whole soak at its smallest size, so that it cannot rot: every
fault injected, each survived (the loop carried on, or the call's error and a resume), and every
check held. Real processes throughout: the S3 test server, uc-jupyter serve, 2 ranks and their
workers, a tmpfs (root, as CI has; skipped where it cannot be mounted)."""

from __future__ import annotations

from pathlib import Path

import pytest

from uc_jupyter.testing.mounts import MountUnavailable, mounted
from uc_jupyter.testing.soak.driver import run_soak
from uc_jupyter.testing.soak.plan import FAULTS, SoakSize


@pytest.fixture
def can_mount(tmp_path: Path) -> None:
    try:
        with mounted(tmp_path / "probe", "tmpfs", "size=1m"):
            pass
    except MountUnavailable as exc:
        pytest.skip(str(exc))


@pytest.mark.servers  # the S3 test server, uc-jupyter serve, ranks
@pytest.mark.timeout(600)
def test_the_smallest_soak_injects_every_fault_and_every_check_holds(can_mount: None, tmp_path: Path) -> None:
    said: list[str] = []
    report = run_soak(SoakSize.named("tiny"), root=tmp_path, say=said.append)
    text = report.text()
    assert report.held, text
    assert [record.fault for record in report.faults.values() if record.epoch] == list(FAULTS), text
    assert {check.name.split(" (")[0] for check in report.checks} >= {
        "every epoch exactly once",
        "no corrupted sample",
        "memory flat",
        "dashboard telemetry flowing",
        "no file left behind",
        "no process left",
    }
    faults = report.s3_stats["faults"]
    assert faults["503"] > 0, text  # the S3 server's random faults were on
    assert not list(tmp_path.glob("uc-soak-*"))  # the run's folder is gone
