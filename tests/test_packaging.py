"""What `pip install` gives: the wheel holds the product and its licence, `prestop` works, and
`drain-sidecar` without its extra says in one line what to install.

The wheel is built offline from a copy of the sources (no build isolation: the test extras
carry setuptools), and installed without dependencies into a fresh virtualenv that sees only
prometheus-client, the hook's one dependency, the way `pip install modeldrain` leaves an
engine image: no aiohttp, no uvloop.
"""

from __future__ import annotations

import email
import os
import re
import shutil
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import prometheus_client
import pytest

from modeldrain.hook import __version__
from modeldrain.hook.engine import PROC_ROOT_ENV
from modeldrain.hook.exitcodes import ExitCode
from tests.conftest import REPO
from tests.process_table import empty_process_table

SOURCES = ("pyproject.toml", "README.md", "LICENSE", "modeldrain", "emulation", "tests", "bench")
# The product's two packages: nothing at the top of site-packages but modeldrain.
PRODUCT = {"hook", "sidecar", "lint", "inject", "retirement"}


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    source = tmp_path_factory.mktemp("source")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, source / name, ignore=ignore)
        else:
            shutil.copy2(REPO / name, source / name)
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-q", "-w", str(out), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("modeldrain-*.whl")
    return built


def test_the_wheel_holds_the_product_not_the_test_bed(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    dist_info = f"modeldrain-{__version__}.dist-info"
    assert {name.split("/")[0] for name in names} == {"modeldrain", dist_info}
    assert {name.split("/")[1] for name in names if name.startswith("modeldrain/")} == PRODUCT | {"__init__.py", "__main__.py", "tools.py"}
    assert "modeldrain/sidecar/openapi.json" in names  # read at run time with importlib.resources
    for package in PRODUCT:
        shipped = {n.split("/", 2)[2] for n in names if n.startswith(f"modeldrain/{package}/")}
        assert shipped == {p.name for p in (REPO / "modeldrain" / package).iterdir() if p.is_file() and p.suffix in (".py", ".json")}
    assert f"{dist_info}/licenses/LICENSE" in names


def test_the_wheel_says_what_it_needs_and_its_licence(wheel):
    with zipfile.ZipFile(wheel) as archive:
        metadata = email.message_from_bytes(archive.read(f"modeldrain-{__version__}.dist-info/METADATA"))
        licence = archive.read(f"modeldrain-{__version__}.dist-info/licenses/LICENSE").decode()
        entry_points = archive.read(f"modeldrain-{__version__}.dist-info/entry_points.txt").decode()
    assert metadata["License-Expression"] == "Apache-2.0"
    assert "Apache License" in licence and "Version 2.0, January 2004" in licence
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in licence
    assert metadata.get_all("Provides-Extra") and "sidecar" in metadata.get_all("Provides-Extra")
    requires = metadata.get_all("Requires-Dist")
    plain = [r for r in requires if "extra ==" not in r]
    # The hook's: its exposition parser, and PyYAML for an engine's --config (as the engines read it).
    assert [re.split(r"[<>=!~;\s]", r)[0] for r in plain] == ["prometheus-client", "pyyaml"]
    for package in ("aiohttp", "uvloop"):
        assert any(r.startswith(package) and 'extra == "sidecar"' in r for r in requires), requires
    assert "prestop = modeldrain.hook.cli:main" in entry_points
    assert "drain-sidecar = modeldrain.sidecar.main:main" in entry_points


@pytest.fixture(scope="session")
def installed(wheel, tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel and prometheus-client, nothing else: its bin/."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           "--no-index", str(wheel)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    # prometheus-client, offline: this environment's copy, and nothing else of it.
    only = tmp_path_factory.mktemp("prometheus-client-only")
    (only / "prometheus_client").symlink_to(Path(prometheus_client.__file__).parent)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(purelib, "prometheus-client-only.pth").write_text(f"{only}\n")
    return venv / "bin"


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    # No PYTHONPATH, and a working directory outside the checkout: only what was installed. The
    # empty process table still holds (tests/process_table.py): else another test's engine on this
    # machine answers for the refused port.
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(cwd), PROC_ROOT_ENV: empty_process_table()}
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=60)


def test_the_installed_environment_has_neither_the_sidecars_dependencies_nor_the_test_bed(installed, tmp_path):
    for module in ("aiohttp", "uvloop", "emulation", "tests", "bench"):
        done = run([str(installed / "python"), "-c", f"import {module}"], tmp_path)
        assert done.returncode == 1 and f"No module named '{module}'" in done.stderr, (module, done.stderr)


def test_prestop_works_from_a_plain_install(installed, tmp_path):
    version = run([str(installed / "prestop"), "version"], tmp_path)
    assert version.returncode == ExitCode.OK, version.stderr
    assert version.stdout.startswith(f"prestop {__version__} (Python package")
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    check = run([str(installed / "prestop"), "check", "--engine", "vllm", "--port", str(port)], tmp_path)
    assert check.returncode == ExitCode.UNMEASURABLE, check.stdout + check.stderr
    assert '"outcome": "refused"' in check.stdout


def test_the_retirement_command_works_from_a_plain_install(installed, tmp_path):
    done = run([str(installed / "drain-sidecar"), "retirement", "--help"], tmp_path)
    assert done.returncode == ExitCode.OK, done.stderr
    assert "exit codes: 0 the replica may be deleted" in done.stdout


@pytest.mark.parametrize("args", [["--help"], [], ["--listen", "127.0.0.1:0"]])
def test_drain_sidecar_without_its_extra_names_it_in_one_line(installed, tmp_path, args):
    done = run([str(installed / "drain-sidecar"), *args], tmp_path)
    assert done.returncode == ExitCode.USAGE
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("drain-sidecar: error: cannot import aiohttp")
    assert lines[0].endswith("install the sidecar's dependencies: pip install 'modeldrain[sidecar]'")
    assert "Traceback" not in done.stderr

