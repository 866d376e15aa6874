"""Servers and helpers for tests, benchmarks and tutorials (real processes on 127.0.0.1)."""
