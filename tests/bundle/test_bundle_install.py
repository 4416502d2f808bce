"""`dist/prestop install DIR` copies the static executable itself, not what staticx unpacked."""

from __future__ import annotations

import json
import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from .conftest import require_root
from .runner import run

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def test_installs_the_static_file_and_the_copy_runs(bundle, bundle_env, tmp_path):
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    ran = run([str(bundle), "install", str(target_dir)], env=bundle_env)
    assert ran.code == 0, ran.stderr
    report = json.loads(ran.stdout)
    installed = target_dir / "prestop"
    assert report["changed"] is True and report["path"] == str(installed)
    # Under staticx, sys.executable is the unpacked inner program: the copy must be the wrapper.
    assert installed.read_bytes() == bundle.read_bytes()
    assert stat.S_IMODE(installed.stat().st_mode) == 0o755

    again = run([str(installed), "install", str(target_dir)], env=bundle_env)
    assert again.code == 0, again.stderr
    assert json.loads(again.stdout)["changed"] is False

    version = run([str(installed), "version"], env={**bundle_env, "TMPDIR": report["tmpdir"]})
    assert version.code == 0 and "static bundled executable" in version.stdout
    assert os.listdir(report["tmpdir"]) == []


def test_missing_dir_is_a_clear_usage_error(bundle, bundle_env, tmp_path):
    ran = run([str(bundle), "install", str(tmp_path / "absent")], env=bundle_env)
    assert ran.code == 2
    assert "does not exist" in ran.stderr and "Traceback" not in ran.stderr


@pytest.fixture
def world_traversable_dir():
    """A folder another user can reach (pytest's tmp_path sits under a 0700 folder)."""
    path = Path(tempfile.mkdtemp(prefix="prestop-install-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path)


@pytest.mark.root
def test_dir_it_cannot_write_is_a_clear_usage_error(bundle, world_traversable_dir):
    require_root()
    target_dir = world_traversable_dir / "root-owned"
    target_dir.mkdir(mode=0o755)
    unpack = world_traversable_dir / "unpack"
    unpack.mkdir(mode=0o1777)
    unpack.chmod(0o1777)
    executable = world_traversable_dir / "prestop"  # the checkout may sit where nobody can reach
    shutil.copy2(bundle, executable)
    drop_to_nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    ran = run([*drop_to_nobody, str(executable), "install", str(target_dir)], env={"TMPDIR": str(unpack)})
    assert ran.code == 2, ran.stdout
    assert f"cannot write {target_dir}: Permission denied (running as uid 65534" in ran.stderr
    assert "Traceback" not in ran.stderr
    assert os.listdir(target_dir) == []
