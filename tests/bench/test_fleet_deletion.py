"""bench/fleet/deletion.py: one deletion's rules on hand-written requests, and the pools it draws from."""

from __future__ import annotations

import random

import pytest

from bench.fleet import deletion as model
from bench.fleet.deletion import Request, Timings
from bench.fleet.loads import Load, mix
from bench.fleet.measured import Measured, MissingMeasurement, from_results
from bench.fleet.strategies import Hook, Strategy
from bench.fleet.verdict import Row, judge
from emulation.load import UniformDurations
from modeldrain.hook.constants import EXIT_RESERVE_S, ROUTE_WAIT_S

TIMINGS = Timings(route_lag_s=1.0, prestop_quiet_return_s=1.05, prestop_last_return_s=1.2, abort_exit_lag_s=2.0,
                  teardown_idle_s=4.3, teardown_after_drain_s=7.0)
# In flight at the delete: one ends at 3 s, one at 18 s; one sent at 0.5 s ends at 4 s.
REQUESTS = [Request(-2.0, 3.0), Request(-1.0, 18.0), Request(0.5, 4.0)]

NO_HOOK = Strategy("no hook", 30.0, Hook.NONE)
SLEEP_5 = Strategy("sleep 5", 30.0, Hook.SLEEP, sleep_s=5.0)
PRESTOP = Strategy("prestop", 30.0, Hook.PRESTOP)
KSERVE = Strategy("kserve", 60.0, Hook.SLEEP, sleep_s=15.0, shutdown_timeout_s=40.0)


def test_no_hook_cuts_what_runs_fails_what_comes_after_and_is_held_to_g_while_those_clients_wait() -> None:
    out = model.delete(NO_HOOK, REQUESTS, TIMINGS)
    # vLLM answers the aborted requests nothing; their clients (no router timeout here) wait on, so
    # it stays until kubelet's SIGKILL at G, as the real one did.
    assert (out.sigterm_at_s, out.exited_at_s, out.sigkilled) == (0.0, 30.0, True)
    assert (out.completed, out.cut, out.failed) == (0, 2, 1)
    assert out.held_idle_s == 30.0


def test_an_aborted_engine_leaves_once_the_router_gives_up_on_the_last_request_it_answered_nothing() -> None:
    waiting = [model.request(-2.0, 60.0, timeout_s=10.0), model.request(-1.0, 60.0, timeout_s=10.0)]
    out = model.delete(NO_HOOK, waiting, TIMINGS)
    assert (out.exited_at_s, out.sigkilled, out.cut) == (9.0 + 2.0, False, 2)  # the last gives up at 9 s


def test_sleep_5_completes_what_ends_by_5_and_cuts_the_rest() -> None:
    out = model.delete(SLEEP_5, REQUESTS, TIMINGS)
    assert (out.sigterm_at_s, out.exited_at_s, out.completed, out.cut, out.failed) == (5.0, 30.0, 2, 1, 0)
    assert out.sigkilled  # the 18 s request's client still waits at G
    assert out.held_idle_s == pytest.approx(30.0 - 4.0)


def test_prestop_returns_after_the_last_request_and_cuts_nothing() -> None:
    out = model.delete(PRESTOP, REQUESTS, TIMINGS)
    assert out.sigterm_at_s == pytest.approx(18.0 + 1.2)
    assert out.exited_at_s == pytest.approx(18.0 + 1.2 + 2.0)
    assert (out.completed, out.cut, out.failed) == (3, 0, 0)
    assert out.held_idle_s == pytest.approx(3.2)


def test_an_idle_prestop_waits_its_route_wait_then_its_quiet_return() -> None:
    out = model.delete(PRESTOP, [], TIMINGS)
    assert out.sigterm_at_s == pytest.approx(ROUTE_WAIT_S + 1.05)


def test_work_that_ends_within_the_route_wait_draws_the_quiet_return_and_later_work_the_last_return() -> None:
    within = model.delete(PRESTOP, [model.Request(-1.0, ROUTE_WAIT_S - 0.5)], TIMINGS)
    assert within.sigterm_at_s == pytest.approx(ROUTE_WAIT_S + 1.05)
    past = model.delete(PRESTOP, [model.Request(-1.0, ROUTE_WAIT_S + 0.5)], TIMINGS)
    assert past.sigterm_at_s == pytest.approx(ROUTE_WAIT_S + 0.5 + 1.2)


def test_prestop_returns_at_g_minus_the_reserve_and_the_long_request_is_cut() -> None:
    out = model.delete(PRESTOP, [Request(-1.0, 40.0)], TIMINGS)
    assert out.sigterm_at_s == 30.0 - EXIT_RESERVE_S
    assert (out.cut, out.completed) == (1, 0)


def test_a_shutdown_timeout_drains_then_tears_down() -> None:
    # SIGTERM at 15; the 18 s request finishes in the drain; then 7 s of teardown: exit at 25.
    out = model.delete(KSERVE, REQUESTS, TIMINGS)
    assert (out.sigterm_at_s, out.exited_at_s) == (15.0, 25.0)
    assert (out.completed, out.cut, out.failed, out.held_idle_s) == (3, 0, 0, 7.0)


def test_a_shutdown_timeout_that_finds_nothing_running_tears_down_from_sigterm_and_sooner() -> None:
    # Everything ended by 4 s; SIGTERM at 15 finds nothing: vLLM's shorter teardown, from SIGTERM.
    out = model.delete(KSERVE, [Request(-2.0, 3.0), Request(0.5, 4.0)], TIMINGS)
    assert (out.sigterm_at_s, out.exited_at_s, out.completed) == (15.0, 15.0 + 4.3, 2)
    assert out.held_idle_s == pytest.approx(15.0 + 4.3 - 4.0)


def test_a_shutdown_timeout_fails_what_outlasts_it_and_kubelet_kills_at_g() -> None:
    # A 100 s request: the drain ends at 15 + 40 = 55 with a 500; teardown would end at 62 > G = 60.
    out = model.delete(KSERVE, [Request(-1.0, 100.0)], TIMINGS)
    assert (out.failed, out.cut, out.exited_at_s, out.sigkilled) == (1, 0, 60.0, True)


def test_a_sleep_at_least_g_is_killed_at_g() -> None:
    out = model.delete(Strategy("sleep 40", 30.0, Hook.SLEEP, sleep_s=40.0), [], TIMINGS)
    assert out.sigterm_at_s == 30.0
    assert out.exited_at_s == 30.0 + 2.0  # kubelet's minimum stop grace after a hook, then the abort lag


def test_the_requests_drawn_are_those_a_delete_touches() -> None:
    load = Load("t", 2.0, UniformDurations(1.0, 3.0))
    touched = model.requests(load, 1.5, random.Random(4))
    assert touched and all(r.ends_s > 0 and r.arrives_s < 1.5 for r in touched)
    assert model.requests(Load("idle", 0.0, UniformDurations(1.0, 3.0)), 1.5, random.Random(4)) == []


def test_the_same_seed_draws_the_same_deletion() -> None:
    from bench.fleet.part import deletion_outcomes

    measured = Measured((2.0, 2.2), (4.3, 4.4), (7.0, 7.4), (1.0, 1.1), (1.1, 1.3), (0.5, 2.0), ())
    load = Load("mixed", 0.6, mix(0.1))
    assert deletion_outcomes(6, load, 9, measured, (PRESTOP,)) == deletion_outcomes(6, load, 9, measured, (PRESTOP,))


def test_missing_parts_of_the_results_are_named() -> None:
    with pytest.raises(MissingMeasurement, match="'drain'"):
        from_results({"configurations": {"cells": []}})
    with pytest.raises(MissingMeasurement, match="abort exit"):
        from_results({"drain": {"cells": [], "settings": {"route_lag_range_s": [0.5, 2.0]}},
                      "configurations": {"cells": []}})


def test_the_pools_are_the_cells_measured_quantities() -> None:
    cells = [{"strategy": "prestop", "scenario": "steady short", "sigterm_at_s": 6.3, "engine_exited_at_s": 8.4,
              "last_completed_at_s": 3.0, "hook_outcome": "idle", "sigkill_at_s": None, "cut": 0},
             {"strategy": "prestop", "scenario": "mixed ≤20 s", "sigterm_at_s": 14.5, "engine_exited_at_s": 16.6,
              "last_completed_at_s": 13.2, "hook_outcome": "idle", "sigkill_at_s": None, "cut": 0},
             {"strategy": "no hook", "scenario": "steady short", "sigterm_at_s": 0.0, "engine_exited_at_s": 2.2,
              "last_completed_at_s": None, "hook_outcome": None, "sigkill_at_s": None, "cut": 4},
             {"strategy": "no hook", "scenario": "hung engine", "sigterm_at_s": 0.0, "engine_exited_at_s": 30.0,
              "last_completed_at_s": None, "hook_outcome": None, "sigkill_at_s": 30.0, "cut": 7}]
    family = {"family": "shutdown timeout", "strategy": "sleep 5 + --shutdown-timeout 20", "sigkill_at_s": None}
    teardowns = [{**family, "scenario": "idle", "sigterm_at_s": 5.0, "engine_exited_at_s": 9.3,
                  "last_completed_at_s": None, "failed": 0},
                 # SIGTERM found work; its last request ended at 16 s: the teardown counts from there.
                 {**family, "scenario": "mixed ≤20 s", "sigterm_at_s": 5.0, "engine_exited_at_s": 23.1,
                  "last_completed_at_s": 16.0, "failed": 0},
                 # ...but not where the timeout ended the drain with requests still running.
                 {**family, "scenario": "long > G−5", "sigterm_at_s": 5.0, "engine_exited_at_s": 30.0,
                  "last_completed_at_s": 6.0, "failed": 3},
                 # ...nor a deletion without the flag.
                 {**family, "strategy": "sleep 5", "scenario": "mixed ≤20 s", "sigterm_at_s": 5.0,
                  "engine_exited_at_s": 6.0, "last_completed_at_s": 5.5, "failed": 0}]
    measured = from_results({"drain": {"cells": cells, "settings": {"route_lag_range_s": [0.5, 2.0]}},
                             "configurations": {"cells": teardowns}})
    assert measured.abort_exit_lag_s == (2.1, 2.1)  # nothing running at SIGTERM; the hung one gives none
    assert measured.prestop_quiet_return_s == (round(6.3 - ROUTE_WAIT_S, 3),)  # quiet by the route wait's end
    assert measured.prestop_last_return_s == (1.3,)  # after the last request, which ended past it
    assert measured.teardown_idle_s == (4.3,)
    assert measured.teardown_after_drain_s == (7.1,)


def test_the_target_is_met_only_when_prestop_is_lower_in_every_seed() -> None:
    clean = ([0, 0], [0, 0])
    rows = [Row("prestop", [10.0, 11.0], [1.0, 1.0], *clean), Row("sleep G−5", [12.0, 13.0], [2.0, 2.0], *clean),
            Row("no hook", [5.0, 5.0], [0.5, 0.5], [3, 4], [0, 1])]
    assert judge(rows)[0]
    tied = [Row("prestop", [10.0, 14.0], [1.0, 1.0], *clean), Row("sleep G−5", [12.0, 13.0], [2.0, 2.0], *clean)]
    met, text = judge(tied)
    assert not met and "rollout time against sleep G−5: tie" in text
    lossy = [Row("prestop", [10.0, 11.0], [1.0, 1.0], [2, 2], [0, 0]), Row("sleep G−5", [12.0, 13.0], [2.0, 2.0], *clean)]
    met, text = judge(lossy)
    assert not met and "prestop cuts 2" in text


def test_the_router_gives_up_at_its_timeout_and_prestop_sees_the_engine_quiet() -> None:
    # A 200 s request sent at -5 s is given up at 115 s (a 120 s router timeout): cut, and prestop
    # returns after it instead of at G - 5 = 125.
    given_up = model.request(-5.0, 200.0, 120.0)
    assert (given_up.ends_s, given_up.abandoned) == (115.0, True)
    out = model.delete(Strategy("prestop 130", 130.0, Hook.PRESTOP), [given_up], TIMINGS)
    assert out.sigterm_at_s == pytest.approx(115.0 + 1.2)
    assert (out.completed, out.cut) == (0, 1)
    assert out.held_idle_s == pytest.approx(115.0 + 1.2 + 2.0)  # nothing completed: idle from the delete


def test_a_drain_counts_a_request_given_up_meanwhile_as_cut() -> None:
    out = model.delete(KSERVE, [model.request(-100.0, 150.0, 120.0)], TIMINGS)  # given up at 20 s, mid-drain
    assert (out.completed, out.cut, out.failed, out.exited_at_s) == (0, 1, 0, 20.0 + 7.0)


def test_the_real_engine_pools_are_its_real_vllm_deletions_and_the_emulators_where_it_has_none() -> None:
    from bench.fleet.measured import from_real_engine_matrix

    def cell(strategy: str, scenario: str, sigterm: float, exited: float, last: float | None, **kw) -> dict:
        return {"backend": "real", "engine": "vllm", "strategy": strategy, "scenario": scenario,
                "sigterm_at_s": sigterm, "engine_exited_at_s": exited, "last_completed_at_s": last, "cut": 0,
                "failed": 0, "hook_outcome": "idle" if strategy.startswith("prestop") else None,
                "sigkill_at_s": None, "error": None, **kw}

    cells = [cell("prestop", "idle", 6.05, 6.45, None),
             cell("no hook", "steady short", 0.0, 0.37, None),
             cell("sleep 5 + --shutdown-timeout 20", "idle", 5.0, 9.8, None),
             cell("no hook", "wrong port", 0.0, 30.1, None, sigkill_at_s=30.0),  # SIGKILLed: no figure
             cell("prestop", "idle", 6.05, 9.0, None, backend="emulator"),  # the twin: not the real engine
             cell("prestop", "idle", 6.05, 9.0, None, engine="sglang")]
    fallback = Measured((2.0,), (4.3,), (7.0,), (1.0,), (1.2,), (0.5, 2.0), ())
    real = from_real_engine_matrix({"real_engine_matrix": {"cells": cells}}, fallback)
    assert real.abort_exit_lag_s == (0.4, 0.37)
    assert real.teardown_idle_s == (4.8,)
    assert real.prestop_quiet_return_s == (round(6.05 - ROUTE_WAIT_S, 3),)
    # No deletion drained work under the flag, none returned after a request past the route wait.
    assert (real.teardown_after_drain_s, real.prestop_last_return_s) == ((7.0,), (1.2,))
    assert "teardown after drain: the emulator's" in "; ".join(real.sources)
    assert "abort exit lag: 2 real vLLM deletions" in real.sources
