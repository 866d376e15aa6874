"""uc_jupyter.testing.served: an in-process uc-jupyter serve that starts fast, answers as the real one,
hands out tokens per principal, and stops."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

from uc_jupyter.catalog import as_principal
from uc_jupyter.testing.served import ADMIN, serve_process, serving


def _status(url: str, token: str | None) -> int:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    request = urllib.request.Request(f"{url}/api/2.1/unity-catalog/uc-jupyter/whoami", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.mark.servers  # uc-jupyter serve, in this process
def test_serves_until_the_block_ends(tmp_path: Path) -> None:
    with serving(tmp_path / "home") as served:
        assert served.url.startswith("http://127.0.0.1:")
        assert _status(served.url, served.admin_token) == 200
        assert _status(served.url, None) == 401
        url = served.url
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"{url}/api/2.1/unity-catalog/catalogs", timeout=5)


@pytest.mark.servers  # uc-jupyter serve, in this process
def test_token_for_registered_principals_only_cached_and_renewed(tmp_path: Path) -> None:
    with serving(tmp_path / "home") as served:
        assert served.token_for("ghost") is None
        with as_principal(ADMIN):
            served.catalog.create_principal("alice")
        first = served.token_for("alice")
        assert first is not None and served.token_for("alice") == first
        with as_principal(ADMIN):
            served.store.revoke(first.split("_")[1])
        renewed = served.token_for("alice")
        assert renewed not in (None, first) and _status(served.url, renewed) == 200


@pytest.mark.servers  # uc-jupyter serve, a process
def test_a_served_process_serves_its_home_when_the_caller_points_at_a_catalog_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: a process started while UC_JUPYTER_CATALOG_URL named a server (the soak restarts its
    server after its ranks were pointed at it) took that server for its own catalog and exited."""
    with serving(tmp_path / "home") as served:
        monkeypatch.setenv("UC_JUPYTER_CATALOG_URL", served.url)
        monkeypatch.setenv("UC_JUPYTER_TOKEN", served.admin_token)
        process, url = serve_process(tmp_path / "home", principal="nobody")
        try:
            assert _status(url, served.admin_token) == 200
        finally:
            process.terminate()
            process.communicate(timeout=30)
