"""Where the current run of idle reads began: broken by any read that is not idle, or by a new engine."""

from modeldrain.sidecar.idle_run import IdleRunTracker


def test_a_run_begins_at_its_first_idle_read_and_ends_at_any_other():
    tracker = IdleRunTracker()
    seen = [tracker.observe(seq, idle=idle, incarnation=0)
            for seq, idle in [(1, False), (2, True), (3, True), (5, True), (6, False), (7, True)]]
    assert seen == [None, 2, 2, 2, None, 7]  # seq 4 went to nobody: the run still holds across it


def test_a_new_engine_incarnation_starts_a_new_run_even_when_idle():
    tracker = IdleRunTracker()
    assert tracker.observe(1, idle=True, incarnation=0) == 1
    assert tracker.observe(2, idle=True, incarnation=0) == 1
    assert tracker.observe(3, idle=True, incarnation=1) == 3
    assert tracker.observe(4, idle=True, incarnation=1) == 3
