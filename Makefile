# The two contract commands: `make demo` and `make test`. Each sets up .venv itself (idempotent:
# the install step reruns only when pyproject.toml or constraints.txt changed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test lint bench lab clean java

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "uc_jupyter needs Python >= 3.10; set PYTHON=/path/to/python3.x")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	@touch $(STAMP)

# Spark Connect (tables) needs Java 17; as root on a fresh Debian machine it is installed here.
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; \
	  else echo "Java 17 is needed for Spark Connect: install openjdk-17-jre-headless"; exit 1; fi; }

demo: $(STAMP) java
	$(VENV)/bin/uc-jupyter demo init
	$(PY) -m uc_jupyter.demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

test: lint java
	$(VENV)/bin/pytest

# The tutorials in JupyterLab, on the demo catalog (root needs --allow-root, e.g. in containers).
lab: $(STAMP)
	$(VENV)/bin/uc-jupyter demo init
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist .mypy_cache .pytest_cache .ruff_cache
