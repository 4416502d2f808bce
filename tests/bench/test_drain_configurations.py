"""The drain-configuration families (bench/drains/configurations.py): their cells, the numbers each
deletion yields, and one deletion of every family run for real and rendered."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.drains import leader_worker, return_lag, shutdown_timeout, split_roles
from bench.drains import report as report_configurations
from bench.drains.configurations import all_cells
from bench.drains.deletion import (
    RouterLoad,
    TailRequests,
    delete_under_load,
    engine,
    prestop_argv,
    route_lag_s,
    seed_of,
)
from bench.paths import PRESTOP_CONSOLE_SCRIPT
from bench.pool import run_jobs
from bench.tables import Judged, killed, verdict
from emulation.load import SHORT_REQUESTS, UniformDurations
from modeldrain.hook.constants import SPLIT_ROLE_EXIT_RESERVE_S


def test_tail_requests_are_drawn_to_end_in_their_window_after_the_delete():
    load = RouterLoad(3.0, tail=TailRequests(3, (11.0, 13.0)))
    assert load.tail_durations() == UniformDurations(14.0, 16.0)  # sent as the 3 s warm-up starts
    assert RouterLoad(3.0).tail_durations() is None


def test_every_family_has_cells_in_a_quick_run_and_more_in_a_full_one():
    quick = [*all_cells(None, quick=True), *return_lag.cells(None, quick=True)]
    full = [*all_cells(None, quick=False), *return_lag.cells(None, quick=False)]
    families = {split_roles.FAMILY, leader_worker.FAMILY, shutdown_timeout.FAMILY, return_lag.FAMILY}
    assert {c.key()["family"] for c in quick} == families == {c.key()["family"] for c in full}
    assert len(quick) < len(full) / 5
    # The return lag is a timing: its deletions are not among those the big pool runs together.
    assert return_lag.FAMILY not in {c.key()["family"] for c in all_cells(None, quick=False)}
    # Paired: every strategy of a scenario runs every repeat.
    keys = [c.key() for c in full]
    assert len({tuple(sorted(k.items())) for k in keys}) == len(keys)
    assert len(return_lag.cells(None, quick=False)) == 2 * return_lag.REPEATS[0] + return_lag.IDLE_REPEATS[0]


def test_the_split_role_windows_put_the_last_work_where_the_reserve_decides():
    """G − 19…G − 17: SIGTERM at G − 20 sees an empty queue at its first check (G − 16), so the engine
    leaves by G − 1; a hook that waits for idle returns after G − 19 and leaves under 19 s."""
    windows = {s.name: s.load(30.0).tail for s in split_roles.SCENARIOS if s.load(30.0).tail is not None}
    saved = windows["work ends G−19…G−17"]
    assert saved is not None and saved.ends_after_delete_s == (11.0, 13.0)
    assert 30.0 - SPLIT_ROLE_EXIT_RESERVE_S + 4.0 > saved.ends_after_delete_s[1]


def test_a_sigkill_counts_against_a_strategy_in_the_paired_verdict():
    ours = [{"repeat": r, "sigkill_at_s": None} for r in range(2)]
    theirs = [{"repeat": r, "sigkill_at_s": 30.1} for r in range(2)]
    judged = [Judged(killed, True, "SIGKILL", False)]
    assert verdict(ours, theirs, judged) == "**better:** SIGKILL 0 vs 1"
    assert verdict(theirs, ours, judged) == "**worse:** SIGKILL 1 vs 0"
    assert verdict(ours, ours, judged) == "tie"


def test_a_draining_vllm_tells_rejected_new_requests_from_failed_running_ones():
    """vLLM --shutdown-timeout: a request arriving while it drains gets HTTP 500 (rejected), one still
    running when the timeout runs out gets HTTP 500 too (failed)."""
    seed = next(s for s in range(100) if route_lag_s(s, (1.5, 2.0)) > 1.8)
    load = RouterLoad(1.0, rate_per_s=8.0, durations=SHORT_REQUESTS, tail=TailRequests(1, (8.0, 9.0)),
                      route_lag_range_s=(1.5, 2.0))
    with engine("--kind", "vllm", "--shutdown-timeout", "1", "--drain-teardown-s", "0.5") as vllm:
        deletion = delete_under_load(vllm, load, seed, 15.0)  # no hook: SIGTERM at the delete
    summary = deletion.summary()
    assert summary["failed"] >= 1  # the tail request, cut off by the 1 s timeout
    assert summary["rejected_new"] >= 1  # the router sent for > 1.8 s into the drain
    assert summary["cut"] == 0 and summary["sigkill_at_s"] is None
    # the 1 s timeout, then the 0.5 s teardown; a loaded test machine adds up to ~1 s (2.38 s seen at load 4)
    assert 1.0 <= summary["engine_exited_at_s"] <= 2.5


@pytest.mark.slow
def test_one_deletion_of_each_family_runs_and_renders():
    scenarios = {s.name: s for s in split_roles.SCENARIOS}
    slow_router = next(s for s in shutdown_timeout.SCENARIOS if s.name == "slow router")
    # A repeat whose router lag outlasts `sleep 5` by a second: its late requests meet a draining vLLM.
    late = next(r for r in range(50) if route_lag_s(seed_of(shutdown_timeout.FAMILY, slow_router.name, r),
                                                      slow_router.load(30.0).route_lag_range_s) > 6.0)
    cells = [
        split_roles.Cell("decode", 30.0, scenarios["idle, never served"], split_roles.Strategy.PRESTOP, 0),
        leader_worker.Cell(leader_worker.SCENARIOS[1], leader_worker.WorkerHook.FOLLOWS_LEADER, 0),
        shutdown_timeout.Cell(30.0, slow_router, shutdown_timeout.Strategy.SLEEP_5_TIMEOUT_20, late),
        return_lag.Cell("busy", return_lag.Cadence.NEW, 0),
    ]
    runners = {split_roles.Cell: split_roles.run, leader_worker.Cell: leader_worker.run,
               shutdown_timeout.Cell: shutdown_timeout.run, return_lag.Cell: return_lag.run}
    split, pair, timeout, lag = run_jobs(cells, lambda c: runners[type(c)](c, PRESTOP_CONSOLE_SCRIPT), workers=4)
    assert [r["error"] for r in (split, pair, timeout, lag)] == [None] * 4

    # A decode server that has served nothing shows no gauges: prestop holds it to G − 20 (the role
    # reserve, from its engine_type label), and the engine leaves before G, unkilled.
    assert split["hook_exit_reserve_s"] == SPLIT_ROLE_EXIT_RESERVE_S and split["hook_exit_code"] == 10
    # (G − 20 = 10 s, not G − 5 = 25: a second of slack for a loaded machine still tells them apart)
    assert split["sigterm_at_s"] == pytest.approx(10.0, abs=1.0) and split["sigkill_at_s"] is None
    assert 25.0 < split["engine_exited_at_s"] < 30.5  # unkilled (sigkill_at_s None): a loaded exit may end at G
    # The worker following its leader is stopped after the leader's last request, none still running.
    assert pair["worker_sigterm_after_last_request_s"] > 0 and pair["leader_in_flight_at_worker_sigterm"] == 0
    assert pair["worker_hook_outcome"] in ("idle", "leader_gone") and pair["cut"] == 0
    # sleep 5 + --shutdown-timeout 20 with a router slower than the sleep: HTTP 500s to the late requests.
    assert timeout["sigterm_at_s"] == pytest.approx(5.0, abs=0.3) and timeout["rejected_new"] >= 1
    # Two idle reads at least 1 s apart after the last end: the lag is over 1 s, and well under 2.
    assert 1.0 <= lag["lag_s"] < 2.0 and lag["hook_outcome"] == "idle"

    part = {"settings": {"jobs": 4, "lag_jobs": 2, "quick": True, "repeats": {"split roles": 1}},
            "cells": [split, pair, timeout, lag], "cpu": {"wall_s": 30.0}}
    text = "\n".join(report_configurations.render(part))
    assert "| decode | idle, never served | prestop |" in text
    assert "| busy leader | prestop --follow-leader |" in text
    assert "| slow router | sleep 5 + --shutdown-timeout 20 |" in text
    assert "| busy | --busy-interval 0.25 | 1 |" in text
    assert "4 deletions, 3 of them 4 at a time, then the 1 return-lag ones (a timing) 2 at a time" in text



def test_every_prestop_a_cell_runs_is_blind_to_this_machines_processes(tmp_path):
    argv = prestop_argv(tmp_path / "prestop", 30.0, "--port", "1")
    root = Path(argv[argv.index("--proc-root") + 1])
    assert root.is_dir() and not any(root.iterdir())
    assert argv[:5] == [str(tmp_path / "prestop"), "--grace", "30", "--port", "1"] and "--quiet" in argv
