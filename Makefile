# Two commands for people: `make run` and `make test`. Everything they need is installed here.
SHELL := /bin/bash
PYTHON ?= python3.11
CACHE_DIR ?= $(HOME)/.cache/knowledge-platform
LOCK_HASH := $(shell cat requirements.lock | sha256sum | cut -c1-16)
VENV ?= $(CACHE_DIR)/venv-$(LOCK_HASH)
WHEELS_HASH := $(shell cat tests/clients/offline-requirements.txt | sha256sum | cut -c1-16)
PY := $(VENV)/bin/python
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: run test test-unit bench deps system-deps python-deps launcher vendor-js lint clean-var

## run: the whole platform on the embedded default (Neo4j, Redis, SQLite, local embeddings)
run: deps
	$(PY) platform/run.py

## test: install what is missing, start Neo4j and Redis for the session, run the whole suite
test: deps
	cd $(CURDIR) && $(PY) -m pytest $(PYTEST_ARGS)

## test-unit: the pure-logic tests only (marked `unit`), no Neo4j or Redis started; `make test` runs them too
test-unit: python-deps
	cd $(CURDIR) && TEST_TIER=unit $(PY) -m pytest -m unit -q $(PYTEST_ARGS)

## bench: benchmarks; figures go to bench/results/
bench: deps
	$(PY) bench/run.py $(BENCH_ARGS)

lint: deps
	$(PY) -m ruff check . && $(PY) -m ruff format --check . && $(PY) -m mypy

deps: system-deps python-deps launcher vendor-js

system-deps:
	@bash platform/bin/install-system-deps

python-deps: $(VENV)/.installed $(VENV)/wheelhouse/.complete-$(WHEELS_HASH)
	@touch $(VENV)/.last-used
	@# venvs of other locks may belong to other checkouts: removed only after 14 days unused
	@for old in $(CACHE_DIR)/venv-*; do \
	  [ -d "$$old" ] && [ "$$old" != "$(VENV)" ] || continue; \
	  mark="$$old"; for m in "$$old/.installed" "$$old/.last-used"; do [ -e "$$m" ] && mark="$$m"; done; \
	  [ -n "$$(find "$$mark" -maxdepth 0 -mtime -14)" ] || { echo "removing $$old (unused for 14 days)"; rm -rf "$$old"; }; \
	done

# The venv path carries the lock's hash, so a changed lock means a new venv; no mtime dependency
# (a fresh clone's files are all new).
$(VENV)/.installed:
	@mkdir -p $(CACHE_DIR)
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	@touch $@

# Wheels for the client install test (a fresh virtualenv installs from here with --no-index), fetched
# from the registry once per lock and requirements file (by content, like the venv itself).
$(VENV)/wheelhouse/.complete-$(WHEELS_HASH): $(VENV)/.installed
	$(PY) -m pip download --quiet --dest $(VENV)/wheelhouse -r tests/clients/offline-requirements.txt
	@touch $@

launcher:
	@platform/neo4j/build

# the admin's graph view library, pinned by version and hash, from the npm registry (no CDN at run time)
vendor-js: python-deps
	@$(PY) platform/bin/fetch_vendor_js.py

clean-var:
	rm -rf var
