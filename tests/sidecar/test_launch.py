"""sidecar/launch.py: the dependency check in front of the CLI (end to end: tests/test_packaging.py)."""

from __future__ import annotations

import pytest

from hook.exitcodes import ExitCode
from sidecar import launch


def test_all_dependencies_present_here():
    assert launch.missing_dependency() is None


def test_a_missing_module_is_named_with_the_install_command(monkeypatch, capsys):
    monkeypatch.setattr(launch, "REQUIRED_MODULES", ("aiohttp", "no_such_module_for_the_sidecar"))
    assert launch.main(["--help"]) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("drain-sidecar: error: cannot import no_such_module_for_the_sidecar (No module named "
                   "'no_such_module_for_the_sidecar'); install the sidecar's dependencies: "
                   "pip install 'modeldrain[sidecar]'\n")


def test_with_its_dependencies_it_is_the_cli(capsys):
    with pytest.raises(SystemExit) as exited:
        launch.main(["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: drain-sidecar")
