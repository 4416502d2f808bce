# Everything a newcomer or CI needs: `make demo`, `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: venv demo test typecheck lint fuzz bundle images bench clean engines test-engines engines-smoke

$(BIN)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	@# The wheel holds the product (hook, sidecar); the test bed is imported from this checkout.
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "modeldrain-checkout.pth").write_text("$(CURDIR)\n")'
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

# The static executables (build/bundle.sh; see docs/build.md), each rebuilt only when what goes
# into it changes: dist/prestop (the hook) and dist/drain-sidecar (the sidecar, aiohttp and uvloop
# inside); build/out/engine-emulator is the test bed's engine, for the container tests' image.
BUILD_INPUTS    := build/bundle.sh build/stamp.py build/requirements-bundle.txt
HOOK_INPUTS     := $(wildcard hook/*.py)
SIDECAR_INPUTS  := $(HOOK_INPUTS) $(wildcard sidecar/*.py) sidecar/openapi.json
EMULATOR_INPUTS := $(HOOK_INPUTS) $(wildcard emulation/*.py emulation/templates/*.txt)

bundle: dist/prestop dist/drain-sidecar

dist/prestop: $(HOOK_INPUTS) build/prestop.spec $(BUILD_INPUTS)
	build/bundle.sh prestop

dist/drain-sidecar: $(SIDECAR_INPUTS) build/drain-sidecar.spec $(BUILD_INPUTS)
	build/bundle.sh drain-sidecar

build/out/engine-emulator: $(EMULATOR_INPUTS) build/engine-emulator.spec $(BUILD_INPUTS)
	build/bundle.sh engine-emulator

# The images, without a Docker daemon and without pulling anything (build/images.sh: Debian's
# buildah builds each Dockerfile's final stage FROM scratch around the static executable), as
# OCI archives for `podman load` / `docker load`. build/out/images/engine-emulator.tar is the
# container tests' stand-in engine image (test bed, never shipped).
IMAGE_INPUTS := build/images.sh build/image-root.sh build/containers.sh

images: dist/images/prestop.tar dist/images/drain-sidecar.tar

dist/images/prestop.tar: dist/prestop Dockerfile.hook $(IMAGE_INPUTS)
	build/images.sh prestop $@

dist/images/drain-sidecar.tar: dist/drain-sidecar Dockerfile.sidecar $(IMAGE_INPUTS)
	build/images.sh drain-sidecar $@

build/out/images/engine-emulator.tar: build/out/engine-emulator emulation/engine.Dockerfile $(IMAGE_INPUTS)
	build/images.sh engine-emulator $@

# bench/RESULTS.md: drain quality against the alternatives, every drain configuration, and the
# cost of every part, then the fleet simulation drawn from them (~25 min on 2 cores; matplotlib, the
# plots' bench-only dependency, is installed first). Uses dist/prestop when it exists; BENCH_ARGS=--quick for
# a fast check (~6 min), written to bench/out/quick/ (untracked), never over the record.
bench: venv
	$(BIN)/python -m pip install -q -e '.[bench]'
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# The real-engine tier (docs/engines.md): real vLLM-CPU and SGLang-CPU with a tiny model made here,
# installed once per recipe into $(MODELDRAIN_ENGINES_CACHE), else $$XDG_CACHE_HOME or ~/.cache's
# modeldrain-engines (outside the tree; ~6 min from an empty cache). test-engines deletes real
# replicas with prestop and drain-sidecar; engines-smoke is the part .ci/run runs (one deletion of each).
engines:
	engines/install.sh

test-engines: venv engines
	$(BIN)/python -m pytest -q -m engines -p no:xdist --timeout=900 tests/engines

engines-smoke: venv engines
	$(BIN)/python -m pytest -q -m engines -p no:xdist --timeout=900 tests/engines/test_deletions.py

clean:
	rm -rf $(VENV) build/out dist .pytest_cache .mypy_cache .setuptools-build
