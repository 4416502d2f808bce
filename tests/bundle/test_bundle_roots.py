"""The bundle where kubelet runs it: an empty root, a read-only root, a non-root user.

Each case is a chroot in private mount and PID namespaces (tests/bundle/roots.py), sharing the
host's loopback so the hook can read the emulated engine.
"""

from __future__ import annotations

import os

import pytest

from .conftest import require_root
from .roots import Mounts, run_in_root, scratch_root
from .runner import FAST

pytestmark = [pytest.mark.slow, pytest.mark.root, pytest.mark.timeout(600)]

ENGINE_USER = "1000:1000"  # engine images often run as a user of their own, not the init's


def drain_inside(executable: str, port: int) -> list[str]:
    return [executable, *FAST, "--port", str(port), "--grace", "30"]


@pytest.fixture
def empty_dir(tmp_path):
    """Stands in for a Pod's emptyDir: a fresh folder any container user may write (0777)."""
    require_root()
    path = tmp_path / "emptydir"
    path.mkdir()
    path.chmod(0o777)
    return path


def test_runs_in_an_empty_root_as_nobody(bundle, engine, tmp_path):
    require_root()
    root = scratch_root(tmp_path / "root", bundle)  # /prestop, /proc, /tmp: nothing else
    version = run_in_root(root, ["/prestop", "version"])
    assert version.code == 0, version.stderr
    ran = run_in_root(root, drain_inside("/prestop", engine.port))
    assert ran.code == 0, ran.stderr
    assert ran.finished["outcome"] == "idle"
    assert os.listdir(root / "tmp") == []


def test_init_container_installs_and_a_read_only_engine_drains(bundle, engine, tmp_path, empty_dir):
    """README.md's layout: an emptyDir at /drain holds the executable and TMPDIR."""
    require_root()
    # The init container: the FROM-scratch image (only /prestop), unpacking into the emptyDir.
    init_root = scratch_root(tmp_path / "init", bundle, dirs=("drain",))
    init = run_in_root(init_root, ["/prestop", "install", "/drain"], read_only=True,
                       env={"TMPDIR": "/drain"}, mounts=Mounts(binds=[(empty_dir, "/drain")]))
    assert init.code == 0, init.stderr
    assert sorted(os.listdir(empty_dir)) == ["prestop", "tmp"]

    # The engine container: readOnlyRootFilesystem, another user, TMPDIR in its env.
    engine_root = scratch_root(tmp_path / "engine", None, dirs=("drain", "tmp"))
    ran = run_in_root(engine_root, drain_inside("/drain/prestop", engine.port), user=ENGINE_USER,
                      read_only=True, env={"TMPDIR": "/drain/tmp"},
                      mounts=Mounts(binds=[(empty_dir, "/drain")]))
    assert ran.code == 0, ran.stderr
    assert ran.finished["outcome"] == "idle"
    assert os.listdir(empty_dir / "tmp") == []


def test_read_only_root_without_tmpdir_fails_loudly(bundle, engine, tmp_path, empty_dir):
    """What kubelet's FailedPreStopHook event shows when the layout is missed: never silence."""
    require_root()
    root = scratch_root(tmp_path / "engine", bundle, dirs=("tmp",))
    ran = run_in_root(root, drain_inside("/prestop", engine.port), user=ENGINE_USER, read_only=True)
    assert ran.code == 2
    assert ran.stderr.strip() == "prestop: Failed to create temporary directory in /tmp: Read-only file system"
    assert engine.reads == 0


def test_noexec_tmp_fails_loudly(bundle, engine, tmp_path):
    require_root()
    root = scratch_root(tmp_path / "engine", bundle, dirs=("tmp",))
    ran = run_in_root(root, drain_inside("/prestop", engine.port), user=ENGINE_USER,
                      mounts=Mounts(tmpfs=[("/tmp", "mode=1777,noexec")]))
    assert ran.code == 3
    assert "Failed to execv()" in ran.stderr and "Permission denied" in ran.stderr


def test_install_into_a_read_only_volume_is_a_clear_usage_error(bundle, tmp_path, empty_dir):
    require_root()
    root = scratch_root(tmp_path / "init", bundle, dirs=("drain", "tmp"))
    ran = run_in_root(root, ["/prestop", "install", "/drain"], env={"TMPDIR": "/tmp"},
                      mounts=Mounts(tmpfs=[("/drain", "ro")]))
    assert ran.code == 2
    assert ran.stderr.strip() == ("prestop install: cannot write /drain: Read-only file system "
                                  "(mount a writable volume there, e.g. an emptyDir)")
