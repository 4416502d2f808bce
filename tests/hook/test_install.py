"""`prestop install DIR`: the atomic, idempotent copy an init container makes (in-process)."""

from __future__ import annotations

import os
import stat

import pytest

from modeldrain.hook import install
from modeldrain.hook.cli import main


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "built" / "prestop"
    path.parent.mkdir()
    path.write_bytes(b"\x7fELF" + os.urandom(4096))
    return path


def test_copies_with_mode_0755_and_makes_the_tmp_dir(source, tmp_path):
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    report = install.install_executable(str(source), str(target_dir))
    installed = target_dir / "prestop"
    assert installed.read_bytes() == source.read_bytes()
    assert stat.S_IMODE(installed.stat().st_mode) == 0o755
    assert stat.S_IMODE((target_dir / "tmp").stat().st_mode) == 0o1777
    assert report.changed is True and report.tmpdir == str(target_dir / "tmp")
    assert sorted(os.listdir(target_dir)) == ["prestop", "tmp"]  # no temporary file left


def test_second_install_changes_nothing(source, tmp_path):
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    install.install_executable(str(source), str(target_dir))
    inode = (target_dir / "prestop").stat().st_ino
    report = install.install_executable(str(source), str(target_dir))
    assert report.changed is False
    assert (target_dir / "prestop").stat().st_ino == inode


def test_a_different_file_is_replaced_by_rename(source, tmp_path):
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    (target_dir / "prestop").write_bytes(b"an older build")
    old_inode = (target_dir / "prestop").stat().st_ino
    report = install.install_executable(str(source), str(target_dir))
    assert report.changed is True
    assert (target_dir / "prestop").read_bytes() == source.read_bytes()
    assert (target_dir / "prestop").stat().st_ino != old_inode  # a new file, never rewritten in place


@pytest.mark.parametrize("make, message", [
    (lambda d: None, "does not exist"),
    (lambda d: d.write_text("not a dir"), "is not a directory"),
])
def test_bad_dir_is_refused(source, tmp_path, make, message):
    target = tmp_path / "drain"
    make(target)
    with pytest.raises(install.InstallError, match=message):
        install.install_executable(str(source), str(target))


def test_the_python_package_refuses_to_install_itself(tmp_path, capsys):
    assert main(["install", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "only the bundled executable" in err and "make bundle" in err
    assert os.listdir(tmp_path) == []


def test_usage_error_without_dir(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["install"])
    assert exit_info.value.code == 2
    assert "DIR" in capsys.readouterr().err


def test_a_symlink_at_dir_tmp_is_refused_and_its_target_keeps_its_mode(source, tmp_path):
    # The emptyDir outlives container restarts: the engine container (any user) may leave DIR/tmp a
    # symlink to a directory outside, which a chmod through it would make world-writable.
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    outside = tmp_path / "etc"
    outside.mkdir(mode=0o755)
    outside.chmod(0o755)
    (target_dir / "tmp").symlink_to(outside)
    with pytest.raises(install.InstallError, match=r"/tmp exists and is a symlink .*never follows"):
        install.install_executable(str(source), str(target_dir))
    assert stat.S_IMODE(outside.stat().st_mode) == 0o755
    assert (target_dir / "tmp").is_symlink()


def test_a_symlink_at_dir_prestop_is_replaced_and_its_target_keeps_its_mode(source, tmp_path):
    # Even a link to a file that holds this very executable: it is not the install's own copy.
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    outside = tmp_path / "shadow"
    outside.write_bytes(source.read_bytes())
    outside.chmod(0o600)
    (target_dir / "prestop").symlink_to(outside)
    report = install.install_executable(str(source), str(target_dir))
    installed = target_dir / "prestop"
    assert report.changed is True and not installed.is_symlink()
    assert installed.read_bytes() == source.read_bytes() and stat.S_IMODE(installed.stat().st_mode) == 0o755
    assert stat.S_IMODE(outside.stat().st_mode) == 0o600


def test_a_file_at_dir_tmp_is_refused(source, tmp_path):
    target_dir = tmp_path / "drain"
    target_dir.mkdir()
    (target_dir / "tmp").write_text("")
    with pytest.raises(install.InstallError, match=r"/tmp exists and is not a directory"):
        install.install_executable(str(source), str(target_dir))
