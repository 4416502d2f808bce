"""Build what the tests run, once per session, whichever xdist worker asks first.

`make` is the one way anything is built (Makefile -> build/bundle.sh, build/images.sh): make
rebuilds only what is missing or older than a source, and a lock keeps two workers from
running the same build at once. A machine that cannot build (build/bundle.sh --check says
why, exit 3) skips; under CI=true that skip fails (tests/environment.py).
"""

from __future__ import annotations

import contextlib
import fcntl
import subprocess
from typing import Iterator

import pytest

from tests import environment
from tests.conftest import REPO

BUNDLE_SCRIPT = REPO / "build" / "bundle.sh"
EXIT_CANNOT_BUILD = 3  # build/bundle.sh --check: this machine cannot build (the reason on stderr)

# A cold build (toolchain venv, PyInstaller, staticx) takes ~25 s per executable on 2 cores.
BUILD_TIMEOUT_S = 600
# Under qemu, from nothing (debootstrap, staticx compiled, both executables): see docs/build.md.
# `make test-arm64` builds before pytest starts; this bounds a direct pytest run that has to.
ARM64_BUILD_TIMEOUT_S = 3600


@contextlib.contextmanager
def exclusive(name: str) -> Iterator[None]:
    """One builder at a time: pytest-xdist workers each open the session fixtures.

    tests/containers/pod-env.sh takes the "bundle" lock too (flock(1) on the same file).
    """
    lock_path = REPO / "build" / "out" / f".{name}-fixture.lock"  # not the build scripts' own locks
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def require_bundle_toolchain(arch: str | None = None) -> None:
    """Skip unless this machine can build for `arch` (default its own; arm64 also under qemu)."""
    arch_args = ["--arch", arch] if arch else []
    check = subprocess.run([str(BUNDLE_SCRIPT), "--check", *arch_args], capture_output=True, text=True,
                           timeout=60)
    if check.returncode == EXIT_CANNOT_BUILD:
        environment.unavailable(check.stderr.strip())
    assert check.returncode == 0, check.stderr


def make(*targets: str, arch: str | None = None) -> None:
    """`make TARGET...` for what build/bundle.sh makes; skips where it cannot build.

    With `arch`, for that architecture alone (make's PLATFORMS=linux/ARCH).
    """
    require_bundle_toolchain(arch)
    platforms = [f"PLATFORMS=linux/{arch}"] if arch else []
    timeout_s = ARM64_BUILD_TIMEOUT_S if arch == "arm64" else BUILD_TIMEOUT_S
    with exclusive("bundle"):
        done = subprocess.run(["make", "-s", *targets, *platforms], cwd=REPO, capture_output=True, text=True,
                              timeout=timeout_s)
    if done.returncode != 0:
        pytest.fail(f"`make {' '.join(targets)}` failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
