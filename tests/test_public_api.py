"""The public API is what the README and the tutorials import: each such import names a package's
face (``uc_jupyter``, ``uc_jupyter.data``, ...) or a public module (``uc_jupyter.demo``), and a name
in its ``__all__``; every name a face exports resolves. Everything else is internal
(docs/architecture.md, "Layers"): a user who follows the README never imports a module path that a
refactor may move."""

from __future__ import annotations

import ast
import importlib
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
PUBLIC_MODULES = {"uc_jupyter.demo"}  # modules that are public though they are no package's face
_IMPORT = re.compile(r"^\s*from (uc_jupyter[\w.]*) import ([^\n#]+)", re.M)


def _documented_imports() -> list[tuple[str, str, str]]:
    """(where, module, name) of every ``from uc_jupyter... import`` in the README and the tutorials."""
    texts = [("README.md", (ROOT / "README.md").read_text())]
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(notebook.read_text())["cells"]
        code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
        texts.append((notebook.name, code))
    found = []
    for where, text in texts:
        for module, names in _IMPORT.findall(text):
            for name in names.replace("(", "").replace(")", "").split(","):
                if name.strip():
                    found.append((where, module, name.strip().split(" as ")[0]))
    return found


IMPORTS = _documented_imports()


def test_the_readme_and_the_tutorials_import_something() -> None:
    assert len(IMPORTS) > 10  # the pattern still finds them


@pytest.mark.parametrize(("where", "module", "name"), IMPORTS, ids=lambda v: str(v))
def test_each_documented_import_is_a_faces_export(where: str, module: str, name: str) -> None:
    imported = importlib.import_module(module)
    face = Path(imported.__file__ or "").name == "__init__.py" or module in PUBLIC_MODULES
    assert face, f"{where} imports {name} from {module}, an internal module: import it from its package"
    assert name in getattr(imported, "__all__", ()), f"{where} imports {name} from {module}, whose __all__ lacks it"


FACES = sorted(
    {module for _, module, _ in IMPORTS}
    | {f"uc_jupyter.{p.name}" for p in (ROOT / "uc_jupyter").iterdir() if (p / "__init__.py").is_file()}
)


@pytest.mark.parametrize("module", FACES)
def test_every_name_a_face_exports_resolves(module: str) -> None:
    imported = importlib.import_module(module)
    missing = [name for name in getattr(imported, "__all__", ()) if getattr(imported, name, None) is None]
    assert not missing, f"{module}.__all__ names {missing}, which it does not give"
    tree = ast.parse(Path(imported.__file__ or "").read_text())
    said = any(
        (isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "__all__" for t in node.targets))
        or (isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "__all__")
        for node in tree.body
    )
    assert said, f"{module} has no __all__: say what of it is public ([] for an internal package)"
