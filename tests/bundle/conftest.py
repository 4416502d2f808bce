"""Fixtures for the bundled executables: built once per run, an engine to drain, old roots.

The engine is the emulated vLLM (emulation/). `make bundle` is the one way the executables are
built (Makefile -> build/bundle.sh): the fixture runs it, and make rebuilds only what is missing
or older than a source. A machine that cannot build them (not Debian-like, not x86_64, or the
Debian packages missing and no root to install them) skips with build/bundle.sh's reason.

Every test that takes `bundle` runs once per architecture (`build`): amd64 natively, and arm64
under qemu (marked arm64, so `make test` leaves it out; `make test-arm64` runs it). Where an
arm64 run cannot happen (no binfmt_misc, no qemu-aarch64, no root), it skips with the reason.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from modeldrain.hook.engine import PROC_ROOT_ENV
from tests import environment
from tests.builds import ARM64_BUILD_TIMEOUT_S, BUILD_TIMEOUT_S, exclusive, make, require_bundle_toolchain
from tests.conftest import REPO
from tests.process_table import empty_process_table

from .engine import BusyableEngine

TOOLCHAIN_BIN = REPO / "build" / "out" / "venv" / "bin"  # build/bundle.sh's amd64 virtualenv
OLD_DEBIAN_ROOTFS_SCRIPT = REPO / "tests" / "bundle" / "old_debian_rootfs.sh"
ARM64_ROOT_SCRIPT = REPO / "build" / "arm64-root.sh"
ARM64_TEST_S = 600  # an arm64 test's own run, beyond a cold build (the modules' native timeout)


@dataclass(frozen=True)
class Build:
    """One architecture's executables (where build/bundle.sh --arch puts them), and what running
    them here costs beyond a native start."""

    arch: str  # Debian's and the OCI platform's name: amd64, arm64
    machine: str  # uname -m of the machine that built it, in its build stamp
    dist: Path  # the executables
    out: Path  # the work files: PyInstaller's output before staticx
    elf_machine: int  # e_machine in the ELF header: what the kernel (or qemu) must run
    loader: bytes  # the program interpreter a dynamic ELF of this architecture would name
    libc_dir: str  # where Debian keeps this architecture's libc, inside a root
    # Added to every bound that includes the launchers' start-up (staticx's, PyInstaller's,
    # Python's imports): natively ~0.25 s idle, but 2.2 s was seen with the 2-core machine at
    # load 14; under qemu several times that (docs/build.md measures it). The behaviour is what
    # the tests hold, not the start-up's speed.
    start_allowance_s: float
    # How many times slower Python's own work runs (1 natively): scales the bounds on how late
    # a timer may fire once Python runs.
    slowdown: float

    def executable(self, program: str) -> Path:
        return self.dist / program

    def onefile(self, program: str) -> Path:
        """PyInstaller's output, before staticx: it needs the build's glibc or newer."""
        return self.out / "pyinstaller-dist" / program


AMD64 = Build("amd64", "x86_64", REPO / "dist", REPO / "build" / "out", elf_machine=62,
              loader=b"ld-linux-x86-64.so", libc_dir="usr/lib/x86_64-linux-gnu", start_allowance_s=2, slowdown=1)
# Emulated start-up (docs/build.md): `prestop version` 1.3 s median, 3.3 s at load 10-14;
# `drain-sidecar --version` 4.8 s median, 6.0 s at most, on 2 cores: 15 s leaves room for a load.
ARM64 = Build("arm64", "aarch64", REPO / "dist" / "linux-arm64", REPO / "build" / "out" / "linux-arm64", elf_machine=183,
              loader=b"ld-linux-aarch64.so", libc_dir="usr/lib/aarch64-linux-gnu", start_allowance_s=15, slowdown=5)


def elf_machine(head: bytes) -> int:
    """e_machine of a 64-bit little-endian ELF header: the architecture it runs on."""
    return int.from_bytes(head[18:20], "little")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """An arm64 test may be the one that builds under qemu from nothing (a direct pytest run;
    `make test-arm64` builds first): its timeout covers that build, which pytest-timeout
    counts as the first test's set-up."""
    for item in items:
        if item.get_closest_marker("arm64") is not None:
            item.add_marker(pytest.mark.timeout(ARM64_BUILD_TIMEOUT_S + ARM64_TEST_S), append=False)


@pytest.fixture(scope="session", params=[pytest.param(AMD64, id="amd64"),
                                         pytest.param(ARM64, id="arm64", marks=pytest.mark.arm64)])
def build(request) -> Build:
    return request.param


def built(build: Build, program: str) -> Path:
    make("bundle", arch=build.arch)
    executable = build.executable(program)
    assert executable.is_file() and os.access(executable, os.X_OK)
    return executable


@pytest.fixture(scope="session")
def bundle(build) -> Path:
    return built(build, "prestop")


@pytest.fixture(scope="session")
def native_bundle() -> Path:
    """This machine's own prestop, for tests that read a process's signal dispositions from /proc:
    qemu-user keeps an emulated process's to itself, so those run on amd64 alone."""
    return built(AMD64, "prestop")


@pytest.fixture(scope="session")
def sidecar_bundle(build) -> Path:
    return built(build, "drain-sidecar")


@pytest.fixture
def engine():
    server = BusyableEngine()
    yield server
    server.close()


@pytest.fixture
def bundle_env(tmp_path) -> dict[str, str]:
    """A private TMPDIR per test, so a test can check the bundle leaves nothing behind; and the
    session's empty process table, which an environment built from scratch would otherwise drop."""
    tmp = tmp_path / "unpack"
    tmp.mkdir()
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TMPDIR": str(tmp),
            PROC_ROOT_ENV: empty_process_table()}


def require_root() -> None:
    environment.require_root("chroot and private mounts")


def cached_root_dir(build: Build) -> Path:
    """amd64's old root is cached in build/out/ (~40 s to make); arm64's, debootstrap's second
    stage run under qemu, beside the arm64 build root, outside the tree (CI's cache)."""
    if build.arch == "amd64":
        return REPO / "build" / "out" / "rootfs"
    where = subprocess.run([str(ARM64_ROOT_SCRIPT), "--path"], capture_output=True, text=True,
                           timeout=60, check=True).stdout.strip()
    return Path(where).parent


@pytest.fixture(scope="session")
def old_debian_root(build) -> Path:
    """Debian 11 (bullseye, glibc 2.31), minbase: no Python. Built once, cached."""
    environment.require_root("debootstrap builds the Debian 11 root")
    if build.arch != "amd64":
        require_bundle_toolchain(build.arch)  # qemu-aarch64 in binfmt_misc, or skip with why
    suffix = "" if build.arch == "amd64" else f"-{build.arch}"
    root = cached_root_dir(build) / f"bullseye-minbase{suffix}"
    timeout_s = BUILD_TIMEOUT_S if build.arch == "amd64" else ARM64_BUILD_TIMEOUT_S
    with exclusive("rootfs"):
        done = subprocess.run(["bash", str(OLD_DEBIAN_ROOTFS_SCRIPT), "bullseye", str(root), build.arch],
                              capture_output=True, text=True, timeout=timeout_s)
    if done.returncode != 0:
        pytest.fail(f"building the bullseye root failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return root
