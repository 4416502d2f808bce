"""The fleet's pools from its own deletions run alone (bench/fleet/solo.py): each quantity from the
deletions that show it, none from a deletion that was SIGKILLed or failed."""

from __future__ import annotations

import pytest

from bench.fleet.measured import MissingMeasurement
from bench.fleet.solo import KINDS, pools
from modeldrain.hook.constants import ROUTE_WAIT_S


def deletion(kind: str, sigterm: float, exited: float, last: float | None, *, cut: int = 0,
             outcome: str | None = "idle", sigkill: float | None = None) -> dict:
    return {"kind": kind, "sigterm_at_s": sigterm, "engine_exited_at_s": exited, "last_completed_at_s": last,
            "cut": cut, "failed": 0, "hook_outcome": outcome, "sigkill_at_s": sigkill, "error": None}


DELETIONS = [
    deletion("prestop, idle", 6.05, 8.13, None),
    deletion("prestop, steady short", 6.06, 8.14, 3.9),
    deletion("prestop, mixed ≤20 s", 15.3, 17.4, 14.1),
    deletion("no hook, --shutdown-timeout, idle", 0.0, 4.3, None, outcome=None),
    deletion("no hook, --shutdown-timeout, idle", 0.0, 30.0, None, outcome=None, sigkill=30.0),  # no exit to draw
    deletion("no hook, --shutdown-timeout, steady short", 0.0, 9.9, 2.8, outcome=None),
    deletion("prestop, idle", 6.1, 8.2, None, outcome="deadline"),  # not drained: none of its figures
]


def test_each_pool_holds_the_quantity_of_the_deletions_that_show_it() -> None:
    measured = pools(DELETIONS)
    assert measured.prestop_quiet_return_s == (round(6.05 - ROUTE_WAIT_S, 3), round(6.06 - ROUTE_WAIT_S, 3))
    assert measured.prestop_last_return_s == (1.2,)
    assert measured.abort_exit_lag_s == (2.08, 2.08, 2.1)  # after prestop's drains: nothing running
    assert measured.teardown_idle_s == (4.3,)  # the SIGKILLed one gives none
    assert measured.teardown_after_drain_s == (7.1,)  # from the last request's end


def test_a_pool_left_empty_is_named() -> None:
    with pytest.raises(MissingMeasurement, match="return after the last request"):
        pools([d for d in DELETIONS if d["kind"] != "prestop, mixed ≤20 s"])
    with pytest.raises(MissingMeasurement, match="teardown after a drain of work"):
        pools([d for d in DELETIONS if not d["kind"].endswith("steady short") or d["kind"].startswith("prestop")])


def test_every_kind_is_a_load_the_drain_matrix_defines() -> None:
    from bench.drains.quality import SCENARIOS_BY_NAME

    assert {k.scenario for k in KINDS} <= set(SCENARIOS_BY_NAME)
