# Everything a newcomer or CI needs: `make demo`, `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: venv demo test clean

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/.installed

demo: venv
	$(BIN)/python -m emulation.demo

test: venv
	$(BIN)/python -m pytest

clean:
	rm -rf $(VENV) build/out dist .pytest_cache
