# The two contract commands: `make demo` and `make test`. Each sets up .venv itself (idempotent:
# the install step reruns only when pyproject.toml or constraints.txt changed).
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PIP_NO_INPUT := 1
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: demo test check lint bench soak lab clean java chromium labextension

# The JupyterLab extension: TypeScript in labextension/, built into uc_jupyter/labextension (the
# install step's build hook builds it once; it is rebuilt here when its sources change). The venv's
# share/jupyter/labextensions/uc-jupyter-labextension links to that build, so JupyterLab sees it.
LABEXT_BUILD := uc_jupyter/labextension/package.json
LABEXT_SOURCES := $(wildcard labextension/src/*.ts labextension/style/*) labextension/package.json \
	labextension/yarn.lock labextension/tsconfig.json
JLPM := PATH="$(CURDIR)/$(VENV)/bin:$$PATH" "$(CURDIR)/$(VENV)/bin/jlpm"

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "uc_jupyter needs Python >= 3.10; set PYTHON=/path/to/python3.x")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c constraints.txt -e '.[dev]'
	$(VENV)/bin/jupyter-builder develop --overwrite . >/dev/null
	@touch $(STAMP)

$(LABEXT_BUILD): $(LABEXT_SOURCES) | $(STAMP)
	cd labextension && $(JLPM) install && $(JLPM) build
	@touch $@

labextension: $(LABEXT_BUILD)

# The official Unity Catalog client, for tests/ucserver/test_official_client.py, in a venv of its own:
# its pins would downgrade aiohttp, pydantic, typing_extensions and urllib3 in .venv. The stamp names
# the version, so changing UCCLIENT_VERSION reinstalls and nothing else does.
UCCLIENT_VERSION := 0.7.0
UCCLIENT_VENV := .venv-ucclient
UCCLIENT_STAMP := $(UCCLIENT_VENV)/.installed-$(UCCLIENT_VERSION)

$(UCCLIENT_STAMP):
	@test -x $(UCCLIENT_VENV)/bin/python || $(PYTHON) -m venv $(UCCLIENT_VENV)
	$(UCCLIENT_VENV)/bin/python -m pip install --quiet 'unitycatalog-client==$(UCCLIENT_VERSION)'
	@touch $@

.PHONY: ucclient
ucclient: $(UCCLIENT_STAMP)

# Azurite, the Azure Storage emulator, for the az:// and abfss:// volume tests: from npm into the project's
# own .azurite/ (no global install, no lockfile). The stamp names the version, as for ucclient. Azurite says
# it wants Node 22; its blob service runs on the Node 20 here (npm's engine warnings are silenced).
AZURITE_VERSION := 3.37.0
AZURITE_STAMP := .azurite/.installed-$(AZURITE_VERSION)

$(AZURITE_STAMP):
	@command -v npm >/dev/null 2>&1 || { echo "npm (Node.js) is needed for Azurite: install nodejs and npm"; exit 1; }
	mkdir -p .azurite
	npm install --prefix .azurite --no-save --no-package-lock --no-audit --no-fund --loglevel=error \
	  azurite@$(AZURITE_VERSION)
	@touch $@

.PHONY: azurite
azurite: $(AZURITE_STAMP)

# Spark Connect (tables) needs Java 17; as root on a fresh Debian machine it is installed here.
java:
	@command -v java >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; \
	  else echo "Java 17 is needed for Spark Connect: install openjdk-17-jre-headless"; exit 1; fi; }

# The browser tests (ui-tests/) drive Debian's chromium; as root it is installed here (no browser downloads).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium; \
	  else echo "chromium is needed for the browser tests: install it (apt-get install chromium)"; exit 1; fi; }

demo: $(STAMP) labextension java
	$(VENV)/bin/uc-jupyter demo init
	$(PY) -m uc_jupyter.demo

lint: $(STAMP) labextension
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-cache

# Every test: first those that start no server, spread over the cores as in `make check`, then those
# that do (Spark, S3 servers, Ray, kernels, JupyterLab and a browser), one at a time: they time real
# processes and waits, which two of them at once on a 2-core machine would skew. Both parts always run;
# the target fails if either does.
test: lint java chromium ucclient azurite
	@status=0; \
	$(VENV)/bin/pytest -m 'not servers' -n auto --dist worksteal -p no:cacheprovider --durations=10 -q || status=$$?; \
	$(VENV)/bin/pytest -m servers --durations=30 || status=$$?; \
	exit $$status

# The edit-test loop: lint and every test that starts no server (no Spark, S3 server, moto, Azurite,
# Ray, kernel, Jupyter or browser: tests/conftest.py marks those `servers`), spread over the machine's
# cores (pytest-xdist; worksteal: a worker left with the slow tests hands the rest on); about 3 minutes
# on 2 cores.
check: lint
	$(VENV)/bin/pytest -m 'not servers' -n auto --dist worksteal -p no:cacheprovider --durations=10 -q

# The tutorials in JupyterLab, on the demo catalog (root needs --allow-root, e.g. in containers).
lab: $(STAMP) labextension
	$(VENV)/bin/uc-jupyter demo init
	$(VENV)/bin/jupyter lab notebooks/ $(if $(filter 0,$(shell id -u)),--allow-root)

bench: $(STAMP)
	@for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

# The soak and fault suite of issue 29, not part of `test` or `check`: 2 ranks train for 20 epochs over
# a remote volume and a table on the S3 test server (1% of GETs 503, 0.1% reset), the dashboard live,
# while a rank, a DataLoader worker and uc-jupyter serve are killed and the cache's disk filled; it prints
# what held and fails when anything did not. About 40 minutes on a busy 2-core machine; SOAK_SIZE=quick
# takes a minute or two (every fault on less data). Mounting the cache's small disk needs root, as CI has.
SOAK_SIZE ?= full
soak: $(STAMP)
	$(PY) -m uc_jupyter.testing.soak --size $(SOAK_SIZE)

clean:
	rm -rf $(VENV) $(UCCLIENT_VENV) .azurite build dist .mypy_cache .pytest_cache .ruff_cache uc_jupyter/labextension \
	  labextension/node_modules labextension/lib labextension/lib-test labextension/.yarn labextension/*.tsbuildinfo
