# The two commands a new user runs: `make demo` and `make test`. Everything installs from the
# project's own files into .venv; nothing is installed by hand.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit cluster-bins crds clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "Sluice needs Python 3.11 or newer as '$(PYTHON)'; set PYTHON=python3.11."; exit 1; }
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,scheduler,operator,runtime]'
	@touch $(STAMP)

demo: $(STAMP)
	$(BIN)/sluice demo

lint: $(STAMP)
	$(BIN)/ruff check .

typecheck: $(STAMP)
	$(BIN)/mypy

# Build (or reuse from ~/.cache/sluice) kube-apiserver, kubectl, etcd and helm for the cluster tier.
cluster-bins:
	tests/cluster/build-binaries.sh

test: $(STAMP) lint typecheck cluster-bins
	$(BIN)/pytest

unit: $(STAMP)
	$(BIN)/pytest -m 'not spark and not cluster and not kafka and not slow'

crds: $(STAMP)
	$(BIN)/sluice crds > crds/sluice.dev.yaml

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
