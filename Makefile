# Two commands on a fresh machine: `make demo` (whole pipeline on the synthetic world) and `make test`.
# Each installs the pinned stack into ./.venv first; the install is skipped while pyproject.toml is unchanged.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell sha256sum pyproject.toml | cut -c1-12)
export DAGSTER_HOME := $(CURDIR)/.dagster_home
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: install demo test lint dev mlflow clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip==25.3
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	rm -f $(VENV)/.installed-*
	touch $@

$(DAGSTER_HOME)/dagster.yaml: dagster.yaml
	mkdir -p $(DAGSTER_HOME)
	ln -sf ../dagster.yaml $@

demo: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster asset materialize --select 'not group:arrivals' -m assets.definitions -c config/demo.yaml
	$(BIN)/hier where

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy hier_pipeline
	$(BIN)/lint-imports --no-cache
	$(BIN)/pytest $(PYTEST_ARGS)

dev: install $(DAGSTER_HOME)/dagster.yaml
	$(BIN)/dagster dev -h 127.0.0.1 -p 3000

mlflow: install
	$(BIN)/mlflow ui --backend-store-uri sqlite:///.hier/mlflow/mlflow.db --host 127.0.0.1 --port 5000 --workers 1

clean:
	rm -rf .hier .dagster_home
