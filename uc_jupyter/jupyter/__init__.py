"""The IPython side: magics (adapters only), their argument parsing, and tab completion."""

__all__: list[str] = []  # internal: no name of it is part of the public API (tests/test_public_api.py)
