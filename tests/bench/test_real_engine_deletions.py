"""bench/engines/deletions.py's figures as RESULTS.md renders them, and its usage errors."""

from __future__ import annotations

import pytest

from bench import report
from bench.engines import deletions


def run(strategy: str, lag: float | None) -> dict:
    return {"strategy": strategy, "seed": 7, "completed": 12, "cut": 0 if strategy != "no hook" else 8,
            "rejected": 0, "refused": 0, "sigterm_at_s": 8.2, "sigkill": False, "engine_exit_s": 10.3,
            "last_request_done_s": 7.0, "held_idle_s": 3.3, "return_lag_s": lag, "hook_exit_code": 0}


def test_the_section_shows_every_deletion_and_the_lags_median():
    part = {"command": "python -m bench.engines.deletions --repeats 2", "engine": "vLLM 0.32.0", "wall_s": 300.0,
            "load_average_at_end": 1.5, "runs": [run("prestop", 1.1), run("prestop", 1.3), run("no hook", None)],
            "return_lag_median_s": 1.2, "return_lag_range_s": [1.1, 1.3]}
    text = "\n".join(report._real_engines_section(part))
    assert "| prestop | 12 | 0 | 0 | 0 | no | 8.20 | 10.30 | 3.30 | 1.10 |" in text
    assert "| no hook | 12 | 8 |" in text and "median 1.20 s (1.10-1.30) over 2 real deletions" in text


def test_a_repeat_count_below_one_is_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exited:
        deletions.main(["--repeats", "0"])
    assert exited.value.code == 2 and "--repeats must be at least 1" in capsys.readouterr().err
