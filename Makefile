# The two commands a new user runs: `make demo` and `make test`. Everything installs from the
# project's own files into .venv; nothing is installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

CHECKOV := .venv-checkov/bin/checkov

.PHONY: demo test host-packages lint typecheck unit bench-check cluster-bins checkov crds clean compile

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Sluice needs Python 3.11 or newer as '$(PYTHON)'; set PYTHON=python3.11."; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,scheduler,operator,runtime]'
	@touch $(STAMP)

demo: $(STAMP) compile
	$(BIN)/sluice demo

# The scheduler core and the what-if simulation compiled with mypyc (src/sluice/compiled.py): the
# same code about 1.4x faster. Rebuilt when a scheduler source changes; where it cannot be built
# (no C compiler) everything runs interpreted, as it does when a source is newer than the build.
CORE := scheduler/mypyc-build.json
$(CORE): $(STAMP) $(wildcard scheduler/*.py) src/sluice/compiled.py
	@$(BIN)/python -m sluice.compiled > $(VENV)/compile.log 2>&1 && tail -n 1 $(VENV)/compile.log \
	  || echo "The scheduler core stays interpreted: mypyc could not build it (see $(VENV)/compile.log)."

compile: $(CORE)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache

typecheck: $(STAMP)
	$(BIN)/mypy

# Build (or reuse from ~/.cache/sluice) kube-apiserver, kubectl, etcd and helm for the cluster tier,
# and the node tier's kubelet, controllers, kube-proxy and CoreDNS: built here, before pytest, so a
# cold machine's builds do not run inside the node fixture's 600 s test timeout.
cluster-bins:
	tests/cluster/build-binaries.sh --node >/dev/null

# checkov (the chart's and the pools' objects are scanned in the cluster and node tiers), in its
# own virtualenv: its pins would move the project's.
$(CHECKOV): tests/checkov/requirements.txt
	@test -x .venv-checkov/bin/python || $(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/python -m pip install --quiet -r tests/checkov/requirements.txt
	@touch $(CHECKOV)

checkov: $(CHECKOV)

# Maven and the node tier's Debian packages, installed where missing (as root; else one sentence says what)
host-packages:
	tests/node/host-packages.sh

test: host-packages $(STAMP) compile lint typecheck cluster-bins $(CHECKOV)
	$(BIN)/pytest

unit: $(STAMP)
	$(BIN)/pytest -m 'not spark and not cluster and not kafka and not node and not chaos and not slow'

# the benchmark harnesses' end-to-end contract runs that make test leaves out (marker `bench`):
# run before measuring with `sluice bench overhead`, `density`, `capacity` or `calibrate`
bench-check: $(STAMP)
	$(BIN)/pytest -m bench

crds: $(STAMP)
	$(BIN)/sluice crds > crds/sluice.dev.yaml
	$(BIN)/sluice reference > docs/reference.md
	$(BIN)/sluice cli-reference > docs/cli.md

clean:
	rm -rf $(VENV) .venv-checkov .mypy_cache .pytest_cache .ruff_cache $(CORE) scheduler/*.so src/*__mypyc*.so
