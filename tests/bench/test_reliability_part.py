"""The `reliability` part: the fuzz figures, its wiring into `make bench`, and its section of RESULTS.md."""

from __future__ import annotations

import json

import pytest

from bench import report, run
from bench.reliability import report as reliability_report
from bench.reliability.fuzz import measure as fuzz_measure
from bench.reliability.fuzz import parse_outcome
from bench.reliability.hostile import summary


@pytest.mark.slow
def test_the_fuzz_figures_are_hypothesis_own_counts():
    result = fuzz_measure(3)
    assert result["exit_code"] == 0 and result["violations"] == 0
    assert len(result["properties"]) == 3
    assert result["examples_run"] == 9 and all(p["passing"] == 3 for p in result["properties"].values())
    assert result["tests"].get("passed", 0) >= 2
    assert parse_outcome("3 failed, 17 passed in 1.00s") == {"failed": 3, "passed": 17}


def _reliability_results() -> dict:
    """The part's shape, as bench/reliability/part.py returns it, with one run of each kind."""
    hostile_run = {"case": "busy engine", "group": "test", "executable": "console", "exit_code": 10,
                   "expected": [10], "seconds": 2.05, "deadline_s": 2.0, "traceback": False, "outcome": "deadline",
                   "own_elapsed_s": 2.0, "said_idle": False, "longest_log_line": 600, "log_lines_dropped": 0,
                   "temp_left": 0, "problems": [], "detail": "busy: 3 in flight", "lateness_s": 0.05}
    client = {"requests": 10, "ok": 10, "success_rate": 1.0, "p50_ms": 2.0, "p99_ms": 5.0, "mean_ms": 2.5,
              "failures": {}}
    scenario = {"scenario": "baseline", "attack": "no attacker", "seconds": 3.0,
                "clients": {"kubelet /healthz": client},
                "attacker": {}, "sidecar_counters": {}, "evicted": 0, "rejected_503": 0}
    return {
        "quick": True,
        "hostile": {"command": "python -m bench.reliability.hostile --executables console --jobs 3",
                    "executables": {"console": ".venv/bin/prestop"}, "summary": summary([]) | {
                        "cases": 1, "runs": 1, "max_lateness_s": 0.05, "max_lateness_case": "busy engine, console"},
                    "runs": [hostile_run]},
        "sidecar": {"command": "python -m bench.reliability.sidecar", "answers": [
            {"case": "busy engine", "group": "test", "status": 200, "verdict": "busy", "outcome": "busy",
             "seconds": 0.1, "healthz_status": 200, "healthz_ms": 1.0, "problems": []}],
            "start_with_port_superscript": {"healthz_status": 200, "problems": []},
            "unknown_path": {"status": 404, "echoed": False, "problems": []},
            "token_swapped_for_fifo": {"work_status": 401, "work_ms": 1.0, "healthz_status": 200, "healthz_ms": 1.0,
                                       "problems": []},
            "token_fifo_at_start": {"exit_code": 2, "seconds": 1.0, "message": "error", "problems": []},
            "sigterm_mid_parse": {"exit_code": 0, "seconds": 1.5, "bound_s": 3.0, "body_bytes": 2300000,
                                  "problems": []},
            "traceback_in_log": False},
        "fuzz": {"command": "MODELDRAIN_FUZZ_EXAMPLES=3 pytest", "examples_per_property": 3, "examples_run": 6,
                 "violations": 0, "seconds": 5.0, "tests": {"passed": 20}, "exit_code": 0,
                 "properties": {"tests/x.py::test_p": {"passing": 3, "failing": 0, "invalid": 0, "seconds": 0.1}}},
        "availability": {"command": "python -m bench.reliability.availability --seconds 3", "controller_every_s": 1.0,
                         "controller_timeout_s": 10.0, "probe_every_s": 0.5, "probe_timeout_s": 1.0,
                         "sidecar_rss_at_start_kib": 40000, "scenarios": [scenario],
                         "soak": dict(scenario, scenario="all at once", memory={
                             "samples": 3, "every_s": 1.0, "rss_start_kib": 40000, "rss_max_kib": 41000,
                             "rss_end_kib": 40500, "rss_slope_kib_per_min_second_half": 0.0, "fds_start": 10,
                             "fds_max": 12, "fds_end": 10, "series": []}),
                         "traceback_in_log": False},
        "drain_route": {"command": "python -m bench.reliability.drain_route", "false_idles": 0, "problems": 0,
                        "traceback_in_log": False, "cases": [
                            {"case": "flood 1×8", "attack": "8 stranger calls", "kubelet_status": 200,
                             "kubelet_outcome": "idle", "kubelet_seconds": 6.1, "in_flight_at_answer": 0,
                             "strangers": {"200": 4, "429": 4}, "problems": []}]},
    }


def test_the_part_is_wired_into_the_bench_and_renders_its_section(tmp_path, monkeypatch):
    assert "reliability" in run.PARTS
    calls = []

    def fake_measure(executables, quick, progress):
        calls.append((sorted(executables), quick))
        return _reliability_results()

    monkeypatch.setattr(run.reliability, "measure", fake_measure)
    out, raw = tmp_path / "RESULTS.md", tmp_path / "results.json"
    assert run.main(["--parts", "reliability", "--quick", "--out", str(out), "--json", str(raw)]) == 0
    assert calls and calls[0][1] is True and "console" in calls[0][0]
    text = out.read_text()
    assert "## Reliability under hostile input (issue 12)" in text
    assert "`python -m bench.reliability.hostile --executables console --jobs 3`" in text
    assert "| busy engine | 200 | busy (busy) |" in text
    assert "### Abuse of GET /v1/drain (issue 15)" in text
    assert "| flood 1×8 | 8 stranger calls | 200 | idle | 6.10 | 0 | 200 × 4, 429 × 4 | ok |" in text
    assert "1 cases, 0 false idles, 0 with a problem; kubelet's call: 200 idle" in text
    assert json.loads(raw.read_text())["reliability"]["fuzz"]["examples_run"] == 6
    assert "- reliability:" in text  # its CPU line


def test_a_problem_is_printed_in_bold_in_the_section():
    results = _reliability_results()
    results["hostile"]["runs"][0]["problems"] = ["false idle"]
    text = "\n".join(reliability_report.section(results))
    assert "**console: false idle**" in text
    assert report.render({"meta": {"command": "c", "finished": "now", "wall_s": 60.0, "nproc": 2, "cpu_model": "x",
                                   "python": "3", "platform": "linux"}, "reliability": results}).count(
        "## Reliability") == 1


def test_the_section_counts_each_class_of_hostile_input():
    results = _reliability_results()
    run0 = results["hostile"]["runs"][0]
    results["hostile"]["runs"] = [run0, dict(run0, case="v999", group="hostile leader answers", problems=["false idle"])]
    text = "\n".join(reliability_report.section(results))
    assert "| class | cases | runs | crashes | false idles | overruns |" in text
    assert "| hostile leader answers | 1 | 1 | 0 | 1 | 0 |" in text
