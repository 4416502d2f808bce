"""Without the real-engine tier, every bench/engines command says in one line what to run first."""

from __future__ import annotations

import importlib

import pytest

from engines import tier

COMMANDS = ("lifecycle", "configurations", "stream_tail", "split_roles", "kv_producer", "deletions", "matrix")


@pytest.mark.parametrize("name", COMMANDS)
def test_a_missing_tier_is_one_line_naming_make_engines(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv(tier.CACHE_ENV, str(tmp_path))  # an empty cache: no tier installed
    command = importlib.import_module(f"bench.engines.{name}")
    with pytest.raises(SystemExit) as exited:
        command.main([])
    err = capsys.readouterr().err
    assert exited.value.code == 2
    assert err.count("\n") == 1 and err.startswith(f"python -m bench.engines.{name}: error: ")
    assert "`make engines`" in err and "Traceback" not in err


def test_the_emulator_twins_alone_need_no_tier(tmp_path, monkeypatch):
    """`--backends emulator` reruns the twins after an emulator fix: no tier is looked for."""
    from bench.engines import command, matrix

    monkeypatch.setenv(tier.CACHE_ENV, str(tmp_path))
    looked: list[str] = []
    monkeypatch.setattr(command, "tier", lambda prog: looked.append(prog))
    monkeypatch.setattr(matrix, "run_jobs", lambda cells, run, jobs, progress: [])
    result = matrix.measure(("vllm",), ("quality",), 1, 1, progress=lambda line: None, backends=("emulator",))
    assert looked == [] and result["cells"] == []
