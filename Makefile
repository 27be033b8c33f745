# icml25: two commands — `make run` and `make test` — each sets up .venv when it is missing.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.icml25-installed
PIPELINE ?= wavetoken
ENV    ?=
ENV_FLAG := $(if $(ENV),--env=$(ENV),)

.PHONY: system-packages screenshots install run test test-full lint bench viz mlflow tables docs paper-check paper-check-test

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || { PYTHON=$(PYTHON) bash scripts/system_packages.sh venv && $(PYTHON) -m venv $(VENV); }
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev,quantum,peers]"
	@touch $(STAMP)

install: $(STAMP)

run: install  ## kedro run --pipeline=$(PIPELINE) [--env=$(ENV)], then the scorecard
	$(BIN)/kedro run --pipeline=$(PIPELINE) $(ENV_FLAG)
	$(BIN)/kedro run --pipeline=report $(ENV_FLAG)

lint: install
	$(BIN)/ruff check src tests

system-packages:  ## the Debian packages the tests need (chromium, espeak-ng, flite): installed or named
	@bash scripts/system_packages.sh test

test: system-packages install lint  ## the suite (benchmarks and the whole-project run excluded)
	$(BIN)/pytest tests --ignore=tests/benchmarks -m "not whole_project and not paper_check"

test-full: system-packages install lint  ## the suite plus `kedro run` of every paper in one session (+4 min)
	$(BIN)/pytest tests --ignore=tests/benchmarks

bench: install  ## speed and memory measurements (pytest-benchmark)
	$(BIN)/pytest tests/benchmarks --benchmark-only

screenshots: install  ## docs/screenshots from the browser tests on a default-scale wavetoken run (~10 min)
	ICML25_BROWSER_ENV=local ICML25_SCREENSHOTS=docs/screenshots $(BIN)/pytest tests/browser

# the papers with a CPU dry run of their paper config (conf/paper_check/parameters_<name>.yml),
# less any named in PAPER_CHECK_SKIP
PAPER_CHECK_SKIP ?=
PAPER_CHECK_ROOMS ?= $(filter-out $(PAPER_CHECK_SKIP),$(sort $(patsubst conf/paper_check/parameters_%.yml,%,$(wildcard conf/paper_check/parameters_*.yml))))

# icml25.core.paper_check_run: the rooms whose dry run declares one core (paper_check.<name>.cores: 1)
# run first, one per core, each process pinned to its core; then the rooms that use every core
# (num_threads: 0), one at a time. numpy's and scipy's OpenBLAS stay on one thread throughout, so
# the data generators' measured rates are one-core rates (docs/scale.md).
paper-check: install  ## CPU dry run of every paper config (docs/scale.md), then its table
	@bash scripts/system_packages.sh paper
	$(BIN)/python -m icml25.core.paper_check_run --rooms $(PAPER_CHECK_ROOMS)
	$(BIN)/python -m icml25.core.paper_check_table

paper-check-test: install  ## wavetoken's dry run as a test (2-7 min; also in test-full)
	$(BIN)/pytest tests/test_paper_check_run.py

tables: install  ## regenerate README's results tables from results/<name>/claims.json
	$(BIN)/python -m icml25.pipelines.report.results_tables

viz: install
	$(BIN)/kedro viz run --autoreload

mlflow: install
	$(BIN)/mlflow ui --backend-store-uri sqlite:///mlflow.db --host 127.0.0.1

docs: install  ## the documentation site (mkdocs.yml) into build/site/, warnings as errors
	$(BIN)/mkdocs build --strict
