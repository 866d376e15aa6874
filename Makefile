# The two contract commands: `make demo` and `make test`. Each sets up .venv itself (idempotent:
# the install step reruns only when pyproject.toml or constraints.txt changed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "uc_jupyter needs Python >= 3.10; set PYTHON=/path/to/python3.x")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/uc-jupyter demo init
	$(PY) -m uc_jupyter.demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint
	$(VENV)/bin/pytest

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
