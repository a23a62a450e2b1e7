# Two commands on a fresh machine: `make run` and `make test`.
# Each creates .venv when missing and installs what pyproject.toml asks for.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: run test bench lint e2e clean-db stop models

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	@$(PY) -m src.main

# The embedded PostgreSQL outlives `make run` on purpose (the next start takes milliseconds);
# this stops it, and the tests' own server (data/test-pg, `make test` and `make e2e`). Refused
# while a mind is using it (/quit first).
stop: $(STAMP)
	@$(PY) -m src.db stop --tests

# The FlashRank reranker, fetched once into providers.rerank.cache_dir (./data/models/flashrank);
# needs network access. The service never downloads at run time; the Docker build runs the same.
models: $(STAMP)
	@$(PY) -m src.providers fetch-models

test: $(STAMP)
	@$(PY) -m pytest -q

bench: $(STAMP)
	@$(PY) -m bench

# Screenshots of every web page in headless Chromium (Debian's chromium); not part of `make test`.
e2e: $(STAMP)
	@$(PY) -m tests.e2e_screenshots

lint: $(STAMP)
	@$(PY) -m ruff check src tests bench

clean-db: stop
	rm -rf data/pg
