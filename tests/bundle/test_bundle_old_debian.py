"""The bundle on an older distribution than it was built on: Debian 11, glibc 2.31, no Python.

The engine images' bases lag (vLLM's and SGLang's have shipped on Ubuntu 20.04 and 22.04,
glibc 2.31 and 2.35); the bundle is built on Debian 12 (glibc 2.36). PyInstaller's own output
needs the build's glibc or newer; staticx's wrapper needs none.
"""

from __future__ import annotations

import shutil

import pytest

from .roots import Mounts, run_in_root
from .runner import FAST

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(600)]

def run_copied_in(root, executable, args, tmp_path):
    """Run `executable` from the root's /mnt, as nobody.

    The cached root is shared by every test run, so nothing is written into it: the
    executable comes in by a bind mount and /tmp is a tmpfs, both gone with the run.
    """
    staging = tmp_path / "staging"
    staging.mkdir()
    shutil.copy2(executable, staging / "prestop")
    mounts = Mounts(binds=[(staging, "/mnt")], tmpfs=[("/tmp", "mode=1777")])
    return run_in_root(root, ["/mnt/prestop", *args], mounts=mounts)


def test_old_root_has_no_python_and_an_older_glibc(build, old_debian_root):
    assert not list((old_debian_root / "usr" / "bin").glob("python*"))
    assert list(old_debian_root.glob(f"{build.libc_dir}/libc-2.31.so"))


def test_bundle_drains_on_debian_11(bundle, engine, old_debian_root, tmp_path):
    ran = run_copied_in(old_debian_root, bundle, [*FAST, "--port", str(engine.port)], tmp_path)
    assert ran.code == 0, ran.stderr
    assert ran.finished["outcome"] == "idle"


def test_pyinstaller_output_alone_would_not_run_there(build, bundle, old_debian_root, tmp_path):
    """Why staticx is in the build: without it the hook fails on every older image."""
    ran = run_copied_in(old_debian_root, build.onefile("prestop"), ["version"], tmp_path)
    assert ran.code != 0
    assert "GLIBC_2.3" in ran.stderr and "not found" in ran.stderr
