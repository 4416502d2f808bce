"""bench/fleet/rollout.py: the Deployment rules' event simulation, on hand-computable cases."""

from __future__ import annotations

import pytest

from bench.fleet.deletion import Outcome
from bench.fleet.rollout import Policy, roll, scale_down


def _outcome(exit_s: float, held_s: float = 1.0, cut: int = 0, failed: int = 0) -> Outcome:
    return Outcome(sigterm_at_s=0.0, exited_at_s=exit_s, completed=0, cut=cut, failed=failed,
                   held_idle_s=held_s, sigkilled=False)


def test_without_surge_each_drain_adds_to_the_rollout() -> None:
    # N (drain + start-up): 3 × (10 + 100); the replacement waits for the old replica's accelerator.
    totals = roll(Policy(3), lambda i: _outcome(10.0), lambda i: 100.0)
    assert totals.wall_s == 330.0
    assert totals.deletions == 3


def test_one_spare_accelerator_for_the_surge_still_waits_each_drain_out() -> None:
    # new 0 on the spare (0–100); old 0 deleted at 100, exits at 110; new 1 starts then, and so on.
    assert roll(Policy(3, max_surge=1, max_unavailable=0, spare_accelerators=1),
                lambda i: _outcome(10.0), lambda i: 100.0).wall_s == 330.0


def test_with_two_spare_accelerators_the_drain_overlaps_the_next_start_up() -> None:
    # Each start-up begins at the previous one's ready; only the last drain shows: 3 × 100 + 10.
    totals = roll(Policy(3, max_surge=1, max_unavailable=0, spare_accelerators=2),
                  lambda i: _outcome(10.0), lambda i: 100.0, keep_log=True)
    assert totals.wall_s == 310.0
    assert [(t, what, i) for t, what, i in totals.log if what in ("start", "delete")] == [
        (0.0, "start", 0), (100.0, "delete", 0), (100.0, "start", 1), (200.0, "delete", 1),
        (200.0, "start", 2), (300.0, "delete", 2)]


def test_events_are_taken_in_time_order_and_a_tie_in_scheduling_order() -> None:
    # Drains of 5, 50, 5 s; start-ups 20 s. Every logged time is non-decreasing; the replacement of
    # replica 1 starts exactly when it exits (55 + 25 = 80), not before.
    exits = [5.0, 50.0, 5.0]
    totals = roll(Policy(3), lambda i: _outcome(exits[i]), lambda i: 20.0, keep_log=True)
    times = [t for t, _, _ in totals.log]
    assert times == sorted(times)
    assert (75.0, "old exited", 1) in totals.log and (75.0, "start", 1) in totals.log
    assert totals.log.index((75.0, "old exited", 1)) < totals.log.index((75.0, "start", 1))
    assert totals.wall_s == (5 + 20) + (50 + 20) + (5 + 20)


def test_max_unavailable_two_deletes_two_at_once() -> None:
    # Four replicas, two at a time: two rounds of (10 + 100).
    totals = roll(Policy(4, max_surge=0, max_unavailable=2), lambda i: _outcome(10.0), lambda i: 100.0,
                  keep_log=True)
    assert totals.wall_s == 220.0
    assert [t for t, what, _ in totals.log if what == "delete"] == [0.0, 0.0, 110.0, 110.0]


def test_the_ready_count_never_drops_below_n_minus_max_unavailable() -> None:
    n, unavailable = 5, 1
    totals = roll(Policy(n, max_surge=0, max_unavailable=unavailable), lambda i: _outcome(7.0),
                  lambda i: 30.0, keep_log=True)
    ready = n
    for _, what, _ in totals.log:
        ready += {"delete": -1, "new ready": 1}.get(what, 0)
        assert ready >= n - unavailable


def test_the_deletions_figures_are_summed() -> None:
    totals = roll(Policy(3), lambda i: _outcome(10.0, held_s=2.5, cut=i, failed=1), lambda i: 100.0)
    assert (totals.held_idle_s, totals.cut, totals.failed) == (7.5, 0 + 1 + 2, 3)


def test_a_scale_down_deletes_together_and_ends_with_the_slowest() -> None:
    exits = [3.0, 9.0, 4.0, 1.0]
    totals = scale_down(8, 4, lambda i: _outcome(exits[i], held_s=exits[i]))
    assert (totals.wall_s, totals.held_idle_s, totals.deletions) == (9.0, 17.0, 4)


@pytest.mark.parametrize("kwargs, message", [
    ({"replicas": 0}, "at least one replica"),
    ({"replicas": 3, "max_surge": 0, "max_unavailable": 0}, "both be 0"),
    ({"replicas": 3, "max_surge": 1, "max_unavailable": 0}, "spare accelerator"),
    ({"replicas": 3, "max_surge": -1}, "negative"),
])
def test_a_policy_kubernetes_would_refuse_is_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Policy(**kwargs)


def test_a_scale_down_goes_down() -> None:
    with pytest.raises(ValueError, match="fewer"):
        scale_down(4, 4, lambda i: _outcome(1.0))
