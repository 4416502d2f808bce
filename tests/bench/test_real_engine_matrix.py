"""bench/engines/matrix.py and its report: which cells run, how the twins pair, how the target and
the disagreements are judged (synthetic cells; the real ones need the engine tier)."""

from __future__ import annotations

import argparse

import pytest

from bench.engines import matrix
from bench.engines import report as engines_report


def test_every_real_cell_has_an_emulator_twin_and_the_shutdown_timeout_family_is_vllms() -> None:
    cells = matrix.cells(matrix.ENGINES, matrix.FAMILIES, 1)
    real = {(c.family, c.engine, c.scenario, c.setting.name) for c in cells if c.backend == "real"}
    twins = {(c.family, c.engine, c.scenario, c.setting.name) for c in cells if c.backend == "emulator"}
    assert real == twins
    assert {c.engine for c in cells if c.family == "shutdown timeout"} == {"vllm"}
    # The same load and seed for the twin and for every strategy of a scenario's repeat.
    seeds: dict[tuple[str, str], set[int]] = {(c.family, c.scenario): set() for c in cells}
    for c in cells:
        seeds[(c.family, c.scenario)].add(c.seed())
    assert all(len(s) == 1 for s in seeds.values())
    wrong, steady = (next(c for c in cells if c.scenario == name) for name in ("wrong port", "steady short"))
    assert wrong.seed() == steady.seed() and wrong.load() == steady.load()


def test_names_on_the_command_line_are_checked() -> None:
    assert matrix._names("shutdown-timeout", matrix.FAMILIES, "family") == ("shutdown timeout",)
    with pytest.raises(argparse.ArgumentTypeError, match="unknown engine tgi"):
        matrix._names("vllm,tgi", matrix.ENGINES, "engine")


def cell(strategy: str, exit_s: float, sigterm_s: float, *, cut: int = 0, policy: str | None = None,
         backend: str = "real", scenario: str = "idle", sigkill: float | None = None) -> dict:
    return {"family": "quality", "engine": "vllm", "backend": backend, "scenario": scenario, "strategy": strategy,
            "repeat": 0, "completed": 3, "cut": cut, "rejected_new": 0, "failed": 0, "refused": 0, "other": 0,
            "sigterm_at_s": sigterm_s, "engine_exited_at_s": exit_s, "sigkill_at_s": sigkill, "held_idle_s": 1.0,
            "hook_exit_code": 0 if strategy == "prestop" else None, "hook_outcome": None, "hook_exit_policy": policy,
            "error": None, "seconds_per_token": 0.0034, "engine_start_s": 40.0}


def test_prestop_may_hold_the_route_wait_and_its_confirming_read_beyond_an_alternative_that_lost_nothing() -> None:
    cells = [cell("prestop", 6.5, 6.1, policy="full_drain"), cell("no hook", 0.4, 0.0), cell("sleep 5", 5.4, 5.0),
             cell("sleep G−5", 25.4, 25.0)]
    verdicts = engines_report.judge(cells, ("prestop",), ("no hook", "sleep 5", "sleep G−5"))
    assert len(verdicts) == 3 and all("**met**" in v for v in verdicts)
    # Another engine's cells are never a yardstick.
    other = dict(cell("sleep 5", 1.0, 0.5), engine="sglang")
    assert len(engines_report.judge([*cells, other], ("prestop",), ("sleep 5",))) == 1
    # 2 s past sleep 5's exit: more than the confirming read.
    late = [cell("prestop", 7.4, 7.0, policy="full_drain"), cell("sleep 5", 5.4, 5.0)]
    (verdict,) = engines_report.judge(late, ("prestop",), ("sleep 5",))
    assert "**not met**" in verdict and "0.75 s over" in verdict


def test_an_alternative_that_lost_requests_is_not_a_yardstick_and_prestop_losing_any_fails() -> None:
    cells = [cell("prestop", 9.0, 8.0, policy="full_drain"), cell("no hook", 0.4, 0.0, cut=4)]
    assert engines_report.judge(cells, ("prestop",), ("no hook",)) == []
    lossy = [cell("prestop", 6.5, 6.1, cut=1, policy="full_drain"), cell("sleep 5", 5.4, 5.0)]
    (verdict,) = engines_report.judge(lossy, ("prestop",), ("sleep 5",))
    assert "**not met** (lost 1)" in verdict


def test_following_the_engines_drain_is_priced_at_its_start_up_not_a_confirming_read() -> None:
    follows = [cell("prestop", 9.6, 5.1, policy="follow_engine_drain"), cell("sleep 5", 9.0, 5.0)]
    (verdict,) = engines_report.judge(follows, ("prestop",), ("sleep 5",))
    assert "price 0.50 s: **met**" in verdict
    slower = [cell("prestop", 10.0, 5.1, policy="follow_engine_drain"), cell("sleep 5", 9.0, 5.0)]
    (verdict,) = engines_report.judge(slower, ("prestop",), ("sleep 5",))
    assert "**not met**" in verdict


def test_disagreements_name_the_exit_lag_and_the_losses_the_twins_differ_on() -> None:
    real = cell("no hook", 0.4, 0.0)
    twin = cell("no hook", 2.1, 0.0, backend="emulator")
    assert engines_report.disagreements([real, twin]) == [
        "vLLM, idle, no hook: SIGTERM to exit 0.40 s real, 2.10 s emulated"]
    assert engines_report.disagreements([real, cell("no hook", 0.5, 0.0, backend="emulator")]) == []
    # Both had work at SIGTERM (a request ended after it), one was killed: the engines differ.
    lingered = dict(cell("no hook", 30.1, 0.0, sigkill=30.0), last_completed_at_s=None, cut=0)
    busy_twin = dict(cell("no hook", 4.1, 0.0, backend="emulator"), last_completed_at_s=3.5)
    assert engines_report.disagreements([lingered, busy_twin]) == [
        "vLLM, idle, no hook: SIGKILLed real only (exit 30.1 s real, 4.1 s emulated)"]
    # Work at SIGTERM on one side only: the loads differed, not the engines.
    cut_twin = cell("no hook", 30.0, 0.0, backend="emulator", cut=2, sigkill=30.0)
    assert engines_report.disagreements([real, cut_twin]) == []


def test_the_section_renders_every_real_cell_beside_its_twin() -> None:
    cells = [cell("prestop", 6.5, 6.1, policy="full_drain"), cell("prestop", 8.2, 6.1, backend="emulator",
                                                                  policy="full_drain")]
    part = {"command": "python -m bench.engines.matrix", "engines": {"vllm": "vLLM", "sglang": "SGLang"},
            "real_jobs": 1, "twin_jobs": 8, "wall_s": 60.0, "load_average_after_real": 1.0, "grace_s": 30.0,
            "cells": cells}
    text = "\n".join(engines_report.render(part))
    assert "| vLLM | idle | prestop | 3/0/0/0 | 3/0/0/0 | 6.1 | 6.1 | 6.5 | 8.2 |" in text
    assert "vLLM, idle, prestop: SIGTERM to exit 0.40 s real, 2.10 s emulated" in text
    assert "vLLM 3.4 ms a token" in text


def test_an_excess_within_the_engines_own_exit_spread_is_a_tie_and_an_outlier_cannot_excuse_itself() -> None:
    # Other quiet deletions of the same engine and SIGTERM exited 0.4-1.0 s after it: a 0.6 s spread.
    others = [cell("sleep G−5", 25.4, 25.0, scenario="steady short"),
              cell("sleep G−5", 26.0, 25.0, scenario="mixed ≤20 s")]
    close = [cell("prestop", 7.0, 6.1, policy="full_drain"), cell("sleep 5", 5.4, 5.0), *others]
    (verdict,) = engines_report.judge(close, ("prestop",), ("sleep 5",))
    assert "**met, within the engine's own exit spread** (0.35 s over, the spread 0.60 s)" in verdict
    # Its own 10 s exit is left out of the spread it is judged by.
    outlier = [cell("prestop", 16.1, 6.1, policy="full_drain"), cell("sleep 5", 5.4, 5.0), *others]
    (verdict,) = engines_report.judge(outlier, ("prestop",), ("sleep 5",))
    assert "**not met** (9.45 s over)" in verdict
