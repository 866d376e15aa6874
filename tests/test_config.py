"""Settings from the environment: the cache's folder, budget and floor variables."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from uc_jupyter.catalog import Catalog
from uc_jupyter.config import settings
from uc_jupyter.data.cache import FileCache, NotACacheFolder


def test_the_cache_floor_and_budget_come_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UC_JUPYTER_CACHE_MAX_BYTES", "12_345_678")
    monkeypatch.setenv("UC_JUPYTER_CACHE_MIN_FREE_BYTES", "0")
    cache = FileCache(tmp_path / "c")
    assert (cache.max_bytes, cache.min_free_bytes) == (12_345_678, 0)
    given = FileCache(tmp_path / "c", max_bytes=1000, min_free_bytes=7)  # a dataset's own values win
    assert (given.max_bytes, given.min_free_bytes) == (1000, 7)


def test_without_the_variables_the_floor_is_a_tenth_of_the_disk_but_never_more_than_5_gib(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("UC_JUPYTER_CACHE_MIN_FREE_BYTES")
    cache = FileCache(tmp_path / "c")
    disk = shutil.disk_usage(tmp_path)
    assert cache.min_free_bytes == min(disk.total // 10, 5 << 30)
    assert 0 < cache.max_bytes <= disk.free


@pytest.mark.parametrize("variable", ["UC_JUPYTER_CACHE_MAX_BYTES", "UC_JUPYTER_CACHE_MIN_FREE_BYTES"])
@pytest.mark.parametrize("raw", ["10GB", "-5", "1.5"])
def test_a_bad_byte_count_is_a_one_line_error_naming_the_variable(
    variable: str, raw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(variable, raw)
    with pytest.raises(ValueError, match=rf"^invalid {variable}='{raw}': give a whole number of bytes \(\d or more\)"):
        settings()


def test_a_zero_budget_is_refused_but_a_zero_floor_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UC_JUPYTER_CACHE_MIN_FREE_BYTES", "0")
    assert settings().cache_min_free_bytes == 0
    monkeypatch.setenv("UC_JUPYTER_CACHE_MAX_BYTES", "0")
    with pytest.raises(ValueError, match=r"^invalid UC_JUPYTER_CACHE_MAX_BYTES='0': .*\(1 or more\)"):
        settings()


def test_the_cache_folder_comes_from_the_environment_else_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UC_JUPYTER_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("UC_JUPYTER_CACHE_DIR", raising=False)
    assert FileCache().root == (tmp_path / "home" / "cache").resolve()
    monkeypatch.setenv("UC_JUPYTER_CACHE_DIR", str(tmp_path / "node-cache"))
    assert FileCache().root == (tmp_path / "node-cache").resolve() == settings().cache_dir
    assert FileCache(tmp_path / "given").root == tmp_path / "given"  # a dataset's own folder wins


@pytest.mark.parametrize("spelling", ["plain", "symlink", "dotted"])
def test_a_cache_folder_pointed_at_the_catalogs_own_home_is_refused(
    catalog: Catalog, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, spelling: str
) -> None:
    """A node's UC_JUPYTER_CACHE_DIR is its admin's (ranks on Ray use it): set to the catalog's own home,
    however spelled, the cache would empty the metastore; it is refused, and the home is untouched."""
    before = sorted(p.name for p in isolated_home.iterdir())
    if spelling == "symlink":
        (tmp_path / "link").symlink_to(isolated_home)
        given = str(tmp_path / "link")
    else:
        given = str(isolated_home) if spelling == "plain" else f"{isolated_home}/./"
    monkeypatch.setenv("UC_JUPYTER_CACHE_DIR", given)
    with pytest.raises(NotACacheFolder, match="is uc_jupyter's home folder, not a cache"):
        FileCache()
    assert sorted(p.name for p in isolated_home.iterdir()) == before


@pytest.mark.parametrize("raw", ["0", "-1", "soon", "inf", "nan"])
def test_a_bad_spark_connect_timeout_is_a_one_line_error_and_unset_is_30_s(
    monkeypatch: pytest.MonkeyPatch, raw: str
) -> None:
    assert settings().spark_connect_timeout == 30.0
    monkeypatch.setenv("UC_JUPYTER_SPARK_CONNECT_TIMEOUT", "2.5")
    assert settings().spark_connect_timeout == 2.5
    monkeypatch.setenv("UC_JUPYTER_SPARK_CONNECT_TIMEOUT", raw)
    with pytest.raises(
        ValueError, match=f"^invalid UC_JUPYTER_SPARK_CONNECT_TIMEOUT='{raw}': give a number of seconds"
    ):
        settings()
