"""The extension's entry points and URL patterns (the HTTP behaviour is in test_http.py)."""

from __future__ import annotations

import json
from pathlib import Path

import uc_jupyter.server
from uc_jupyter.server.handlers import routes

CONFIG = Path(__file__).parents[2] / "jupyter-config" / "jupyter_server_config.d" / "uc_jupyter.json"


def test_routes_live_under_the_base_url() -> None:
    assert [pattern for pattern, _ in routes("/user/bob/")] == [
        f"/user/bob/uc-jupyter/api/{route}"
        for route in ("catalogs", "schemas", "objects", "table", "volume", "load-line", "pools", "who")
    ]


def test_the_config_file_enables_the_extension_module() -> None:
    assert json.loads(CONFIG.read_text()) == {"ServerApp": {"jpserver_extensions": {"uc_jupyter.server": True}}}
    assert uc_jupyter.server._jupyter_server_extension_points() == [{"module": "uc_jupyter.server"}]
