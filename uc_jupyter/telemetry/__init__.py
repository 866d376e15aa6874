"""Telemetry: cumulative samples from producers, collected into snapshots for widgets and MLflow."""

__all__: list[str] = []  # internal: no name of it is part of the public API (tests/test_public_api.py)
