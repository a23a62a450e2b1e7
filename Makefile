# Two commands on a fresh machine: `make run` and `make test`.
# Each creates .venv when missing and installs what pyproject.toml asks for.
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
PYTHON ?= python3

.PHONY: run test bench lint e2e clean-db

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --upgrade pip
	@$(PY) -m pip install -q -e '.[dev]'
	@touch $(STAMP)

run: $(STAMP)
	@$(PY) -m src.main

test: $(STAMP)
	@$(PY) -m pytest -q

bench: $(STAMP)
	@$(PY) -m bench

# Screenshots of every web page in headless Chromium (Debian's chromium); not part of `make test`.
e2e: $(STAMP)
	@$(PY) -m tests.e2e_screenshots

lint: $(STAMP)
	@$(PY) -m ruff check src tests bench

clean-db:
	rm -rf data/pg
