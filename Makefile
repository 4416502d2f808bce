# Everything a newcomer or CI needs: `make demo`, `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: venv demo test typecheck lint fuzz bundle bench clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/python -m emulation.demo

# Three workers on two cores: the suite mostly waits on real clocks (route waits, deadlines).
PYTEST_WORKERS ?= 3

test: lint typecheck
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS)

# ruff, configured in pyproject.toml: unused imports and names, undefined names, syntax errors.
lint: venv
	$(BIN)/python -m ruff check .

# The differential tests of the reader and the fetch, with many more generated inputs than
# `make test` runs (FUZZ_EXAMPLES each; ~10 min at 10000 on 2 cores).
FUZZ_EXAMPLES ?= 10000

fuzz: venv
	MODELDRAIN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -n $(PYTEST_WORKERS) --timeout=3600 \
		tests/hook/test_exposition_differential.py tests/hook/test_fetch_differential.py

# mypy, configured in pyproject.toml: the product fully typed, the rest where annotated.
typecheck: venv
	$(BIN)/python -m mypy

# dist/prestop: the hook as one static executable (build/bundle.sh; see README.md).
# Rebuilt only when what goes into it changes.
BUNDLE_INPUTS := $(wildcard hook/*.py) build/bundle.sh build/prestop.spec build/stamp.py \
                 build/requirements-bundle.txt

bundle: dist/prestop

dist/prestop: $(BUNDLE_INPUTS)
	build/bundle.sh

# bench/RESULTS.md: drain quality against the alternatives, every drain configuration, and the
# cost of every part (~15 min on 2 cores). Uses dist/prestop when it exists; BENCH_ARGS=--quick for
# a fast check (~3 min).
bench: venv
	$(BIN)/python -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) build/out dist .pytest_cache .mypy_cache .setuptools-build
