from modeldrain.sidecar.incarnation import Evidence, IncarnationTracker, Observation

UP = Observation(answered=True)
DOWN = Observation(answered=False)


def feed(tracker, *observations):
    return [tracker.observe(seq, obs) for seq, obs in enumerate(observations, 1)]


def test_first_process_is_zero_even_after_loading_refusals():
    # A native sidecar starts before its engine: refusals before the first answer are not a restart.
    states = feed(IncarnationTracker(), DOWN, DOWN, Observation(True, 100.0), UP)
    assert [s.value for s in states] == [0, 0, 0, 0]
    assert states[-1].evidence is None


def test_changed_start_time_bumps_once():
    states = feed(IncarnationTracker(), Observation(True, 100.0), Observation(True, 100.0),
                  Observation(True, 200.0), Observation(True, 200.0))
    assert [s.value for s in states] == [0, 0, 1, 1]
    assert states[2].evidence is Evidence.START_TIME_CHANGED and states[2].changed_at_seq == 3


def test_a_start_time_missing_from_some_reads_is_not_a_change():
    # A timeout or unparseable read carries no start time: that is not evidence.
    states = feed(IncarnationTracker(), Observation(True, 100.0), Observation(True, None), Observation(True, 100.0))
    assert states[-1].value == 0


def test_listener_away_and_back_bumps_once_even_with_a_new_start_time():
    states = feed(IncarnationTracker(), Observation(True, 100.0), DOWN, DOWN, Observation(True, 200.0), UP)
    assert [s.value for s in states] == [0, 0, 0, 1, 1]
    assert states[3].evidence is Evidence.START_TIME_CHANGED


def test_listener_back_without_start_time_is_its_own_evidence():
    # SGLang (prometheus multiprocess mode) serves no process_start_time_seconds.
    states = feed(IncarnationTracker(), UP, DOWN, UP, DOWN, UP)
    assert [s.value for s in states] == [0, 0, 1, 1, 2]
    assert states[-1].evidence is Evidence.LISTENER_RETURNED and states[-1].changed_at_seq == 5


def test_counter_going_backwards_bumps_and_restarts_the_baseline():
    served = lambda n: Observation(True, counters={"served": n})  # noqa: E731
    states = feed(IncarnationTracker(), served(10), served(12), served(1), served(3), served(2))
    assert [s.value for s in states] == [0, 0, 1, 1, 2]
    assert states[2].evidence is Evidence.COUNTER_WENT_BACKWARDS
