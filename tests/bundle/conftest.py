"""Fixtures for the bundled executables: built once per run, an engine to drain, old roots.

The engine is the emulated vLLM (emulation/). `make bundle` is the one way the executables are
built (Makefile -> build/bundle.sh): the fixture runs it, and make rebuilds only what is missing
or older than a source. A machine that cannot build them (not Debian-like, not x86_64, or the
Debian packages missing and no root to install them) skips with build/bundle.sh's reason.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests import environment
from tests.builds import BUILD_TIMEOUT_S, exclusive, make
from modeldrain.hook.engine import PROC_ROOT_ENV
from tests.conftest import REPO
from tests.process_table import empty_process_table

from .engine import BusyableEngine

BUNDLE = REPO / "dist" / "prestop"
SIDECAR_BUNDLE = REPO / "dist" / "drain-sidecar"
ONEFILE = REPO / "build" / "out" / "pyinstaller-dist" / "prestop"  # before staticx: needs a new glibc
TOOLCHAIN_BIN = REPO / "build" / "out" / "venv" / "bin"  # build/bundle.sh's virtualenv
OLD_DEBIAN_ROOTFS_SCRIPT = REPO / "tests" / "bundle" / "old_debian_rootfs.sh"


@pytest.fixture(scope="session")
def bundle() -> Path:
    make("bundle")
    assert BUNDLE.is_file() and os.access(BUNDLE, os.X_OK)
    return BUNDLE


@pytest.fixture(scope="session")
def sidecar_bundle() -> Path:
    make("bundle")
    assert SIDECAR_BUNDLE.is_file() and os.access(SIDECAR_BUNDLE, os.X_OK)
    return SIDECAR_BUNDLE


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


@pytest.fixture(scope="session")
def old_debian_root() -> Path:
    """Debian 11 (bullseye, glibc 2.31), minbase: no Python. Built once, cached in build/out/."""
    environment.require_root("debootstrap builds the Debian 11 root")
    root = REPO / "build" / "out" / "rootfs" / "bullseye-minbase"
    with exclusive("rootfs"):
        done = subprocess.run(["bash", str(OLD_DEBIAN_ROOTFS_SCRIPT), "bullseye", str(root)],
                              capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"building the bullseye root failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return root
