"""Servers and helpers for tests, benchmarks and tutorials (real processes on 127.0.0.1).

Its face gives what the tutorials use; the rest is imported from its modules by the project's own
tests and benchmarks.

Example:
    >>> from uc_jupyter.testing import S3TestServer
    >>> S3TestServer.__name__
    'S3TestServer'
"""

from uc_jupyter.lazy import lazy_attributes

__all__ = ["S3TestServer"]

__getattr__ = lazy_attributes("uc_jupyter.testing", {"S3TestServer": "uc_jupyter.testing.s3_server"})
