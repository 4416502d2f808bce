"""bench/engines/configurations.py's --merge figures as RESULTS.md renders them: each real deletion
beside its emulator twin, issue 26's targets judged, the twins' disagreements, and its usage errors
(synthetic rows; the real ones need the engine tier)."""

from __future__ import annotations

import pytest

from bench import report
from bench.engines import configurations
from bench.engines import configurations_report as section


def row(configuration: str, backend: str, *, idle: bool = False, repeat: int = 0, lag: float = 0.4,
        returned: float = 9.0, cut: int = 0, exit_code: int = 0, outcome: str = "idle") -> dict:
    out = {"backend": backend, "configuration": configuration, "flags": configuration.split(), "idle": idle,
           "repeat": repeat, "seed": 7 + repeat, "start_s": 50.0 if backend == "real" else None,
           "hook_exit_code": exit_code, "outcome": outcome, "hook_return_s": returned, "engine_exit_code": 0,
           "sigkill": False, "idle_details": [], "load_average": 3.0,
           "seconds_per_token": 0.0042 if backend == "real" and not idle else None}
    if not idle:
        out.update(completed=12, cut=cut, rejected=0, refused=0, other=0, last_request_done_s=returned - lag,
                   return_lag_s=lag)
    return out


def part(rows: list[dict]) -> dict:
    return {"command": "python -m bench.engines.configurations --merge --repeats 3", "engine": "vLLM 0.32.0",
            "grace_s": 30, "route_lag_s": 3.0, "concurrency": 8, "durations_s": [6.0, 9.0], "repeats": 3,
            "wall_s": 1200.0, "load_average_after_real": 4.2, "load_average_at_end": 3.1, "rows": rows}


LOAD = "--enable-server-load-tracking"
API = "--api-server-count 2"


def test_each_real_deletion_is_shown_beside_its_twin_and_the_targets_are_judged():
    rows = [row(LOAD, "real", repeat=i, lag=lag) for i, lag in enumerate((0.47, -0.05, 0.62))]
    rows += [row(LOAD, "emulator", repeat=i, lag=0.3) for i in range(3)]
    rows += [row(LOAD, "real", idle=True, repeat=i, returned=5.3) for i in range(2)]
    rows += [row(API, "real", idle=True, repeat=0, returned=6.04), row(API, "emulator", idle=True, returned=6.0)]
    text = "\n".join(section.render(part(rows)))
    assert f"| `{LOAD}` | 1 | 12/0/0/0 | 12/0/0/0 | 8.53 | 8.70 | 9.00 | 9.00 | 0.47 | 0.30 | 0 idle | 0 idle |" in text
    assert "median **0.470 s** over 3 deletions (0.470, -0.050, 0.620; target ≤ 0.5 s, nothing cut): **met**" in text
    assert "5.300, 5.300 s after the delete (exit 0, 0; target ≤ 5.5 s, exit 0): **met**" in text
    assert "6.040 s after the delete (exit 0; target ≤ 6.5 s, exit 0): **met**" in text
    assert "outcome, a SIGKILL on one side): none." in text
    assert "its speed measured just before its load (8 requests at once): 4.2–4.2 ms a token" in text
    # The merged part is rendered into RESULTS.md, after the emulator's tables.
    results = {"meta": {"command": "python -m bench.run", "finished": "now", "wall_s": 60.0, "nproc": 2,
                        "cpu_model": "cpu", "python": "3.11", "platform": "linux"}, section.PART: part(rows)}
    assert "## Real vLLM serving configurations beside the emulator" in report.render(results)


def test_a_target_missed_or_a_twin_unlike_its_real_deletion_is_said():
    rows = [row(LOAD, "real", repeat=0, lag=0.9), row(LOAD, "emulator", repeat=0, lag=0.3, cut=2),
            row(API, "real", idle=True, returned=25.1, exit_code=10, outcome="deadline"),
            row(API, "emulator", idle=True, returned=6.0)]
    text = "\n".join(section.render(part(rows)))
    assert "median **0.900 s** over 1 deletions" in text and text.count("**not met**") == 2
    assert f"{LOAD}, repeat 1: requests lost real 0, emulated 2" in text
    assert (f"{API} (never served), repeat 1: the hook ended 10 deadline on the real engine, 0 idle on the "
            "emulator") in text


@pytest.mark.parametrize("argv, said", [(["--repeats", "0"], "--repeats must be at least 1"),
                                        (["--merge", "--idle"], "--merge runs every configuration")])
def test_usage_errors_are_one_line(argv, said, capsys):
    with pytest.raises(SystemExit) as exited:
        configurations.main(argv)
    assert exited.value.code == 2 and said in capsys.readouterr().err


def test_merge_deletes_every_configuration_the_real_tier_tests_and_the_never_served_ones():
    from tests.engines.test_configurations import CONFIGURATIONS as TESTED

    assert set(map(tuple, configurations.CONFIGURATIONS.values())) == set(TESTED.values())
    assert set(configurations.IDLE_CONFIGURATIONS) <= set(configurations.CONFIGURATIONS)
