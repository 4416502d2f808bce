"""modeldrain/sidecar/main.py: the dependency check in front of the server (end to end: tests/test_packaging.py)."""

from __future__ import annotations

import pytest

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.sidecar import main


def test_all_server_modules_present_here():
    assert main.missing_server_module() is None


def test_a_missing_module_is_named_with_the_install_command(monkeypatch, capsys):
    monkeypatch.setattr(main, "SERVER_MODULES", ("aiohttp", "no_such_module_for_the_sidecar"))
    assert main.main(["--help"]) == ExitCode.USAGE
    out, err = capsys.readouterr()
    assert out == ""
    assert err == ("drain-sidecar: error: cannot import no_such_module_for_the_sidecar (No module named "
                   "'no_such_module_for_the_sidecar'); install the sidecar's dependencies: "
                   "pip install 'modeldrain[sidecar]'\n")


def test_the_retirement_command_needs_no_server_module(monkeypatch, capsys):
    monkeypatch.setattr(main, "SERVER_MODULES", ("no_such_module_for_the_sidecar",))
    with pytest.raises(SystemExit) as exited:
        main.main(["retirement", "--help"])
    assert exited.value.code == 0
    assert "exit codes: 0 the replica may be deleted" in capsys.readouterr().out


def test_with_its_dependencies_it_is_the_server(capsys):
    with pytest.raises(SystemExit) as exited:
        main.main(["--help"])
    assert exited.value.code == 0
    assert capsys.readouterr().out.startswith("usage: drain-sidecar")
