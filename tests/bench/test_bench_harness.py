"""The bench harness itself: the tie rule, and one tiny drain matrix rendered to a report."""

from __future__ import annotations

import pytest

from bench import report
from bench.drains.quality import SCENARIOS_BY_NAME, Cell, Strategy, run_matrix, seed_for
from bench.paths import PRESTOP_CONSOLE_SCRIPT
from bench.spread import Spread, Verdict, compare_paired


def test_a_difference_counts_only_when_every_pair_agrees_on_its_sign():
    # Seeds differ between repeats, so the ranges overlap; pair by pair, a is always lower.
    assert compare_paired([1, 5, 9], [2, 6, 10])[0] is Verdict.LOWER
    assert compare_paired([2, 6, 10], [1, 5, 9])[0] is Verdict.HIGHER
    assert compare_paired([1, 6, 9], [2, 6, 10])[0] is Verdict.TIE  # one pair equal: noise could flip it
    assert compare_paired([1, 7, 9], [2, 6, 10])[0] is Verdict.TIE
    assert compare_paired([1], [9])[0] is Verdict.UNJUDGED  # no spread, no verdict
    assert compare_paired([1, 5, 9], [2, 6, 10])[1] == Spread(-1, -1, -1, 3)


def test_wrong_port_runs_the_steady_load_again():
    steady, wrong = SCENARIOS_BY_NAME["steady short"], SCENARIOS_BY_NAME["wrong port"]
    assert seed_for(steady, 0) == seed_for(wrong, 0) != seed_for(steady, 1)


@pytest.mark.slow
def test_a_tiny_matrix_runs_and_renders(tmp_path):
    cells = [Cell(Strategy.NO_HOOK, SCENARIOS_BY_NAME["steady short"], 15.0, 0),
             Cell(Strategy.PRESTOP, SCENARIOS_BY_NAME["idle"], 15.0, 0)]
    no_hook, prestop = run_matrix(cells, jobs=2, prestop=PRESTOP_CONSOLE_SCRIPT)

    assert no_hook.error is None and prestop.error is None
    # vLLM aborts on SIGTERM: with no hook, the steady load's requests in flight are cut.
    assert no_hook.in_flight_at_delete > 0 and no_hook.cut > 0 and no_hook.sigterm_at_s < 0.5
    # An idle replica under prestop: the route wait, two idle reads, then SIGTERM and a clean exit.
    assert prestop.hook_exit_code == 0 and prestop.hook_outcome == "idle"
    assert 5.5 < prestop.sigterm_at_s < 8.0 and prestop.sigkill_at_s is None
    assert prestop.held_idle_s == pytest.approx(prestop.engine_exited_at_s)

    results = {
        "meta": {"command": "test", "finished": "now", "wall_s": 1.0, "nproc": 2, "cpu_model": "cpu",
                 "python": "3", "platform": "linux"},
        "drain": {"settings": {"graces_s": [15.0], "repeats": 1, "jobs": 2, "route_lag_range_s": [0.5, 2.0],
                               "prestop": "prestop", "prestop_version": "v"},
                  "cells": [no_hook.as_dict(), prestop.as_dict()],
                  "cpu": {"wall_s": 1.0, "ours_cores": 0.1, "others_cores": 0.0, "load_average": 0.1}},
    }
    text = report.render(results)
    assert "| steady short | no hook |" in text and "| idle | prestop |" in text
    assert "not judged (one run)" in text


def test_every_part_is_wired_and_rendered(tmp_path):
    """`--parts scrape` runs that part alone and the report shows it, with its CPU line."""
    from bench import run

    assert set(run.PARTS) == {"prestop", "sidecar-start", "reading", "scrape", "sidecar", "reliability", "drain",
                              "configurations", "fleet"}
    out, raw = tmp_path / "RESULTS.md", tmp_path / "results.json"
    assert run.main(["--quick", "--parts", "scrape", "--out", str(out), "--json", str(raw)]) == 0
    text = out.read_text()
    assert "### A scrape's cost to the engine" in text and "- scrape: " in text
    assert "| ~47 KB: vLLM 0.32.0's families, one engine |" in text
