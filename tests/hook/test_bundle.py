"""What the bundle knows about itself, seen from a Python install and from a (simulated) bundle."""

import json
import sys

import pytest

from hook import bundle


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
