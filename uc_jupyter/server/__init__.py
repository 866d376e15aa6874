"""The Jupyter server extension behind the JupyterLab sidebar: catalog browsing and rank-pool status.

Enabled on install by ``jupyter-config/jupyter_server_config.d/uc_jupyter.json``
(``{"ServerApp": {"jpserver_extensions": {"uc_jupyter.server": true}}}``). Every route is a GET under
``<base_url>uc-jupyter/api/`` behind the server's authentication, answered as the server process's
principal (``UC_JUPYTER_PRINCIPAL``):

- ``catalogs``, ``schemas?catalog=main``, ``objects?schema=main.ml``
- ``table?name=main.ml.iris&rows=10`` (SELECT checked), ``volume?path=/Volumes/main/ml/images&limit=200&after=``
  (READ VOLUME; one page, ``next`` is the ``after`` of the following one)
- ``load-line?source=main.ml.iris``: the line "Insert %uc_load" writes for a table, folder or file
- ``pools``: the rank pools of this server's kernels

Example:
    $ jupyter lab --ServerApp.jpserver_extensions="{'uc_jupyter.server': True}"
    $ curl -H "Authorization: token $TOKEN" http://127.0.0.1:8888/uc-jupyter/api/catalogs
    {"items": [{"name": "main", "full_name": "main", "kind": "catalog", "comment": null}]}
"""

from __future__ import annotations

from typing import Any

__all__ = ["API_PATH", "_jupyter_server_extension_points", "_load_jupyter_server_extension"]

API_PATH = "uc-jupyter/api"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    """Where the Jupyter server finds this extension."""
    return [{"module": "uc_jupyter.server"}]


def _load_jupyter_server_extension(serverapp: Any) -> None:
    """Register the handlers under ``<base_url>uc-jupyter/api/`` (called once by the Jupyter server)."""
    from uc_jupyter.server.handlers import routes

    web_app = serverapp.web_app
    web_app.add_handlers(".*$", routes(web_app.settings["base_url"]))
    serverapp.log.info("uc_jupyter server extension: catalog browser at %s%s/", web_app.settings["base_url"], API_PATH)
