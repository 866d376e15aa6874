"""Telemetry: cumulative samples from producers, collected into snapshots for widgets and MLflow."""
