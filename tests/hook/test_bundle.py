"""What the bundle knows about itself, seen from a Python install and from a (simulated) bundle."""

import json
import os
import sys
import time

import pytest

from modeldrain.hook import bundle


def test_a_python_install_is_not_a_bundle():
    assert not bundle.is_bundle() and not bundle.is_static()
    assert bundle.executable_path() is None
    assert bundle.launcher_paths() == []
    assert bundle.read_build_stamp() is None
    assert bundle.build_description().startswith("Python package, Python 3.")


@pytest.fixture
def frozen(monkeypatch, tmp_path):
    """sys as PyInstaller's bootloader leaves it: frozen, the code unpacked in _MEIPASS."""
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    monkeypatch.setattr(sys, "_MEIPASS", str(tmp_path), raising=False)
    return tmp_path


def test_a_static_bundle_names_the_file_that_was_execd(frozen, monkeypatch):
    monkeypatch.setenv(bundle.STATICX_PROG_PATH_ENV, "/drain/prestop")
    assert bundle.is_bundle() and bundle.is_static()
    assert bundle.executable_path() == "/drain/prestop"  # not sys.executable, the unpacked inner program
    assert bundle.launcher_paths() == ["/proc/self/exe", "/drain/prestop"]


def test_a_dynamic_bundle_is_its_own_executable(frozen, monkeypatch):
    monkeypatch.delenv(bundle.STATICX_PROG_PATH_ENV, raising=False)
    assert bundle.executable_path() == sys.executable
    assert bundle.launcher_paths() == ["/proc/self/exe"]


def test_build_stamp_is_read_and_described(frozen, monkeypatch):
    monkeypatch.setenv(bundle.STATICX_PROG_PATH_ENV, "/drain/prestop")
    (frozen / bundle.BUILD_STAMP_FILE).write_text(json.dumps({
        "commit": "abc123", "built_at": "2026-11-30T08:00:00+00:00", "build_os": "Debian GNU/Linux 12",
        "glibc": "glibc-2.36", "tools": {"staticx": "0.14.1", "pyinstaller": "6.11"}}))
    assert bundle.read_build_stamp()["commit"] == "abc123"
    text = bundle.build_description()
    assert text.startswith("static bundled executable, commit abc123, built 2026-11-30T08:00:00+00:00")
    assert "pyinstaller 6.11, staticx 0.14.1" in text


@pytest.mark.parametrize("content", ["not json", "[1, 2]"])
def test_an_unreadable_stamp_is_said_plainly(frozen, content):
    (frozen / bundle.BUILD_STAMP_FILE).write_text(content)
    assert bundle.read_build_stamp() is None
    assert bundle.build_description().startswith("bundled executable without a build stamp")


def old_dir(tmp_path, name: str, age_s: float = 120.0):
    path = tmp_path / name
    path.mkdir()
    (path / "libpython3.11.so.1.0").write_bytes(b"\0" * 1000)
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def fake_proc_maps(tmp_path, *mapped: str) -> str:
    proc = tmp_path / "proc"
    (proc / "42").mkdir(parents=True, exist_ok=True)
    (proc / "42" / "maps").write_text("".join(
        f"7f0000000000-7f0000001000 r-xp 00000000 08:01 1234 {path}\n" for path in mapped)
        + "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n")
    return str(proc)


def test_only_old_unused_unpack_dirs_are_stale(tmp_path):
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    leftover = old_dir(tmp, "_MEI00004692rMJFs0")
    staticx = old_dir(tmp, "staticx-BnlikJ")
    in_use = old_dir(tmp, "_MEI00009999aaaaaa")
    fresh = old_dir(tmp, "staticx-Fresh1", age_s=1)  # another hook unpacking right now
    other = old_dir(tmp, "someone-elses")
    proc = fake_proc_maps(tmp_path, f"{in_use}/libpython3.11.so.1.0", f"{tmp}/staticx-other/ld.so")
    stale = bundle.stale_unpack_dirs(str(tmp), now_unix=time.time(), proc_root=proc)
    assert sorted(stale) == sorted([str(leftover), str(staticx)])
    assert fresh.exists() and other.exists()


def test_removal_is_a_bundle_only_chore(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    leftover = old_dir(tmp_path, "_MEI00004692rMJFs0")
    proc = fake_proc_maps(tmp_path)
    assert bundle.remove_stale_unpack_dirs(proc_root=proc) == ([], 0)  # not a bundle
    assert leftover.exists()
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    removed, freed = bundle.remove_stale_unpack_dirs(proc_root=proc)
    assert removed == [str(leftover)] and freed == 1000 and not leftover.exists()
