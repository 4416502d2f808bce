"""`make bench BENCH_ARGS=--quick` never replaces the record: bench/run.py's argument handling."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from bench import report, run

REPO = Path(__file__).resolve().parents[2]


def test_a_quick_run_writes_beside_the_record_not_over_it():
    quick = run.parse_args(["--quick"])
    assert (quick.out, quick.json) == (REPO / "bench/out/quick/RESULTS.md", REPO / "bench/out/quick/results.json")
    assert quick.out != report.DEFAULT_MD and quick.json != report.DEFAULT_JSON
    full = run.parse_args([])
    assert (full.out, full.json) == (report.DEFAULT_MD, report.DEFAULT_JSON) == (REPO / "bench/RESULTS.md",
                                                                                 REPO / "bench/results.json")


def test_where_a_quick_run_writes_is_untracked_and_an_explicit_out_wins(tmp_path):
    ignored = subprocess.run(["git", "check-ignore", "-q", "bench/out/quick/RESULTS.md"], cwd=REPO, timeout=30)
    assert ignored.returncode == 0, "bench/out/ must be in .gitignore"
    chosen = run.parse_args(["--quick", "--out", str(tmp_path / "r.md"), "--json", str(tmp_path / "r.json")])
    assert (chosen.out, chosen.json) == (tmp_path / "r.md", tmp_path / "r.json")
    assert run.parse_args(["--quick", "--parts", "scrape , drain"]).parts == ["scrape", "drain"]


def test_a_quick_run_without_every_pool_draws_the_matrix_pools_from_the_record():
    """A --quick run's configurations part does not make vLLM's --shutdown-timeout teardown cells: its
    fleet part took them from nowhere and ended in a traceback (MissingMeasurement) after 7 min."""
    from bench.fleet.measured import MissingMeasurement, from_results

    quick_results = {"drain": {"cells": [], "settings": {"route_lag_range_s": [0.5, 1.5]}},
                     "configurations": {"cells": []}}
    assert run.matrix_pools(quick_results, quick=True) == from_results(json.loads(report.DEFAULT_JSON.read_text()))
    with pytest.raises(MissingMeasurement):
        run.matrix_pools(quick_results, quick=False)


def test_a_fleet_without_its_pools_is_left_out_and_the_other_parts_are_still_written(tmp_path, monkeypatch, capsys):
    """A full run on a busy machine lost every configurations deletion (the engines started too late):
    its fleet part raised MissingMeasurement, a traceback, and the run wrote nothing of its 38 min."""
    late = {"error": "emulation.engine_process.EngineStartError: emulated engine did not write its ready file"}
    monkeypatch.setattr(run, "run_drain", lambda *args: {"settings": {"route_lag_range_s": [0.5, 2.0]},
                                                         "cells": [dict(late)]})
    monkeypatch.setattr(run, "run_configurations", lambda *args: {"cells": [dict(late)]})
    written: list[dict] = []
    monkeypatch.setattr(report, "write", lambda results, json_path, md_path: written.append(results))
    code = run.main(["--parts", "drain,configurations,fleet", "--json", str(tmp_path / "r.json"),
                     "--out", str(tmp_path / "r.md")])
    err = capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert [line for line in err.splitlines() if "fleet: not run: " in line and "python -m bench.run --parts" in line]
    (results,) = written
    assert {"drain", "configurations", "meta"} <= set(results) and "fleet" not in results
