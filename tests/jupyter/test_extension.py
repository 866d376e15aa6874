"""uc_jupyter.jupyter.extension: registering the magics and the ``%uc_load`` matcher in a real IPython
shell, and unregistering them; completion through the matcher itself is in test_magics.py."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from IPython.core.completer import provisionalcompleter
from IPython.core.interactiveshell import InteractiveShell

from uc_jupyter.catalog.embedded.local import LocalCatalog
from uc_jupyter.distributed.shared import current_shared_pool, shared_pool
from uc_jupyter.jupyter.extension import register, unregister, unregister_completer
from uc_jupyter.jupyter.magics import UCMagics


@pytest.fixture
def bare_shell() -> Iterator[InteractiveShell]:
    """The process's IPython shell, with the extension not registered before or after the test."""
    ip = InteractiveShell.instance()
    unregister(ip)
    yield ip
    unregister(ip)


def ours(ip: InteractiveShell) -> list[Any]:
    return [m for m in ip.Completer.custom_matchers if getattr(m, "uc_jupyter", False)]


def completions(ip: InteractiveShell, line: str) -> list[Any]:
    with provisionalcompleter():
        return list(ip.Completer.completions(line, len(line)))


def test_register_adds_the_magics_and_one_matcher(bare_shell: InteractiveShell) -> None:
    magics = register(bare_shell)
    assert isinstance(magics, UCMagics) and magics.shell is bare_shell
    assert {"uc_load", "uc_distributed"} <= set(bare_shell.magics_manager.magics["line"])
    assert "uc_distributed" in bare_shell.magics_manager.magics["cell"]
    assert len(ours(bare_shell)) == 1


def test_registering_again_replaces_the_matcher_instead_of_adding_one(bare_shell: InteractiveShell) -> None:
    register(bare_shell)
    register(bare_shell)  # %reload_ext, or %load_ext run twice
    assert len(ours(bare_shell)) == 1


def test_unregistering_removes_only_our_matcher(bare_shell: InteractiveShell) -> None:
    def someone_elses(context: object) -> dict[str, Any]:
        return {"completions": [], "suppress": False}

    bare_shell.Completer.custom_matchers.append(someone_elses)
    try:
        register(bare_shell)
        unregister_completer(bare_shell)
        assert ours(bare_shell) == []
        assert someone_elses in bare_shell.Completer.custom_matchers
    finally:
        bare_shell.Completer.custom_matchers.remove(someone_elses)


def test_unregister_stops_the_kernels_rank_pool(bare_shell: InteractiveShell) -> None:
    register(bare_shell)
    shared_pool(1, devices="cpu")  # made, never started: no rank process
    assert current_shared_pool() is not None
    unregister(bare_shell)
    assert current_shared_pool() is None and ours(bare_shell) == []


def test_the_matcher_answers_uc_load_lines_only_and_hides_python_there(
    bare_shell: InteractiveShell, catalog: LocalCatalog
) -> None:
    register(bare_shell)
    offered = completions(bare_shell, "%uc_load main.ml.po")
    assert [(c.text, c.type) for c in offered] == [("main.ml.points", "uc_jupyter")]
    assert offered[0].start == len("%uc_load ")  # the whole last word is replaced
    assert [c.text for c in completions(bare_shell, "%uc_load /Volumes/main/ml/docs --dec")] == ["--decode"]
    assert "image" in [c.text for c in completions(bare_shell, "%uc_load /Volumes/main/ml/docs --decode ")]
    assert "--no-monitor" in [c.text for c in completions(bare_shell, "%uc_load main.ml.points --no-")]
    # Elsewhere Python's own completions come back, ours never.
    bare_shell.user_ns["uc_value_here"] = 1
    jedi = bare_shell.Completer.use_jedi
    bare_shell.Completer.use_jedi = False  # the plain namespace completer: enough here, and fast
    try:
        python = completions(bare_shell, "uc_value_h")
    finally:
        bare_shell.Completer.use_jedi = jedi
        del bare_shell.user_ns["uc_value_here"]
    assert "uc_value_here" in [c.text for c in python]
    assert all(c.type != "uc_jupyter" for c in python)


def test_the_matcher_completes_on_the_last_line_of_a_cell(bare_shell: InteractiveShell, catalog: LocalCatalog) -> None:
    register(bare_shell)
    cell = "import os\n  %uc_load main.ml.po"
    assert [c.text for c in completions(bare_shell, cell)] == ["main.ml.points"]


def test_the_matcher_uses_the_magics_default_catalog(bare_shell: InteractiveShell, catalog: LocalCatalog) -> None:
    catalog.create_catalog("other")
    catalog.create_schema("other.features")
    magics = register(bare_shell)
    assert [c.text for c in completions(bare_shell, "%uc_load fe")] == []
    magics.default_catalog = "other"
    assert [c.text for c in completions(bare_shell, "%uc_load fe")] == ["features."]


def test_registering_quiets_mlflow_and_pysparks_pandas_warning(
    bare_shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_LOGGING_LEVEL", raising=False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        register(bare_shell)
        warnings.warn("PySpark does not yet fully support pandas >= 3.0.0", FutureWarning, stacklevel=1)
        warnings.warn("another FutureWarning", FutureWarning, stacklevel=1)
    assert [str(w.message) for w in caught] == ["another FutureWarning"]
    assert os.environ["MLFLOW_LOGGING_LEVEL"] == "WARNING"


def test_a_users_own_mlflow_logging_level_wins(bare_shell: InteractiveShell, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_LOGGING_LEVEL", "DEBUG")
    register(bare_shell)
    assert os.environ["MLFLOW_LOGGING_LEVEL"] == "DEBUG"
