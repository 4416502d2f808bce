"""bench/fleet/real_roll.py's simulation of the roll it ran: each deletion's own requests replayed
through the model, only the timing pools drawn."""

from __future__ import annotations

import pytest

from bench.fleet import real_roll
from bench.fleet.measured import Measured
from bench.fleet.real_roll import RealRoll, replayed, simulate_same
from bench.fleet.strategies import Hook, Strategy

SLEEP_5 = Strategy("sleep 5", 30.0, Hook.SLEEP, sleep_s=5.0)
# One value a pool: the simulation is then the rules alone, worked out by hand below.
POOLS = Measured(abort_exit_lag_s=(0.5,), teardown_idle_s=(4.3,), teardown_after_drain_s=(7.0,),
                 prestop_quiet_return_s=(1.05,), prestop_last_return_s=(1.2,), route_lag_range_s=(0.5, 2.0),
                 sources=("synthetic",))
# In flight at the delete, answered at 1.1 s; sent at 0.5 s (asked 3 s), answered at 3.6 s: the
# emulator's own overhead makes it later than asked, and the replay keeps what the router saw.
REQUESTS = [[-1.0, 2.0, 1.1, "completed"], [0.5, 3.0, 3.6, "completed"]]


def roll_of(requests: list[list], held_idle_s: float, wall_s: float) -> RealRoll:
    deletion = {"engine_exited_at_s": 5.5, "held_idle_s": 1.9, "cut": 0, "completed": 2, "route_lag_s": 1.0,
                "sigterm_at_s": 5.0, "last_completed_at_s": 3.6, "requests": requests}
    return RealRoll("sleep 5", real_roll.REPLICAS, wall_s, held_idle_s, 0, 0, (1.0,),
                    tuple(dict(deletion) for _ in range(real_roll.REPLICAS)))


def test_a_completed_request_is_replayed_as_it_ran_and_any_other_as_the_router_asked_it() -> None:
    completed, cut = replayed([[0.5, 3.0, 3.6, "completed"], [-2.0, 60.0, 5.0, "cut"]], timeout_s=10.0)
    assert (completed.arrives_s, completed.ends_s, completed.abandoned) == (0.5, 3.6, False)
    assert (cut.arrives_s, cut.ends_s, cut.abandoned) == (-2.0, 8.0, True)  # the router gives up at 10 s


def test_the_replayed_roll_is_the_rules_on_its_own_requests() -> None:
    # Each deletion: SIGTERM at 5, exit 0.5 s later, 1.9 s after the last answer; 6 × (5.5 + 1.0) s.
    sim = simulate_same(roll_of(REQUESTS, held_idle_s=6 * 1.9, wall_s=6 * 6.5), SLEEP_5, POOLS, seeds=3)
    assert sim["held_idle_s"] == pytest.approx([6 * 1.9] * 3)
    assert sim["wall_s"] == pytest.approx([6 * 6.5] * 3)
    assert sim["lost"] == [0, 0, 0]
    assert sim["held_idle_within"] and sim["wall_within"] and sim["lost_within"]
    assert len(sim["fresh_arrivals"]["held_idle_s"]) == 3


def test_a_real_roll_held_longer_than_its_requests_allow_falls_outside() -> None:
    sim = simulate_same(roll_of(REQUESTS, held_idle_s=6 * 1.9 + 1.0, wall_s=6 * 6.5), SLEEP_5, POOLS, seeds=3)
    assert not sim["held_idle_within"] and sim["wall_within"]


def test_a_roll_recorded_without_its_requests_is_refused_by_name() -> None:
    bare = roll_of(REQUESTS, 0.0, 0.0)
    bare = RealRoll(**{**bare.__dict__, "deletions": tuple({k: v for k, v in d.items() if k != "requests"}
                                                           for d in bare.deletions)})
    with pytest.raises(ValueError, match="lack their lag and requests"):
        simulate_same(bare, SLEEP_5, POOLS, seeds=1)
