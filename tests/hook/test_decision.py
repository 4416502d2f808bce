"""The drain rules with an injected clock: when to read, when to stop, and why."""

from hook.decision import DrainOutcome, DrainPlan, DrainState, Finish, ReadAt, after_read, next_step
from hook.outcome import Read, ReadOutcome

T0 = 1000.0


def plan(grace_s=30.0, route_wait_s=5.0, exit_reserve_s=5.0, interval_s=1.0, read_timeout_s=2.0):
    return DrainPlan.build(started_at=T0, grace_s=grace_s, route_wait_s=route_wait_s, exit_reserve_s=exit_reserve_s,
                           interval_s=interval_s, read_timeout_s=read_timeout_s)


def read(outcome, at, in_flight=None, detail="d"):
    return Read(outcome, started_at=at, duration_s=0.01, detail=detail, in_flight=in_flight)


def test_first_read_waits_out_the_route_wait_whatever_happens():
    step = next_step(plan(), DrainState(), now=T0)
    assert step == ReadAt(at=T0 + 5.0, timeout_s=2.0)


def test_deadline_is_grace_minus_exit_reserve_from_exec():
    assert plan(grace_s=30).deadline_at == T0 + 25
    assert plan(grace_s=3600).deadline_at == T0 + 3595


def test_idle_replica_returns_after_two_idle_reads_about_6s():
    p, s = plan(), DrainState()
    step = next_step(p, s, T0)
    s, fin = after_read(s, read(ReadOutcome.IDLE, step.at, 0))
    assert fin is None and s.idle_streak == 1
    step = next_step(p, s, step.at + 0.01)
    assert step.at == T0 + 6.0
    s, fin = after_read(s, read(ReadOutcome.IDLE, step.at, 0))
    assert fin.outcome is DrainOutcome.IDLE and fin.outcome.exit_code == 0
    assert s.reads == 2


def test_idle_streak_resets_on_anything_not_idle():
    s = DrainState()
    for outcome in (ReadOutcome.BUSY, ReadOutcome.INCOMPLETE, ReadOutcome.TIMEOUT, ReadOutcome.UNPARSEABLE,
                    ReadOutcome.INVALID_VALUE, ReadOutcome.TOO_LARGE, ReadOutcome.RESET):
        s, fin = after_read(s, read(ReadOutcome.IDLE, T0, 0))
        assert fin is None
        s, fin = after_read(s, read(outcome, T0 + 1))
        assert fin is None and s.idle_streak == 0, outcome


def test_refused_http_error_and_tls_end_at_once():
    for outcome in (ReadOutcome.REFUSED, ReadOutcome.HTTP_ERROR, ReadOutcome.TLS_ERROR):
        s, fin = after_read(DrainState(), read(outcome, T0 + 5, detail="why"))
        assert fin.outcome is DrainOutcome.UNMEASURABLE and fin.outcome.exit_code == 11
        assert "why" in fin.reason


def test_reads_keep_a_fixed_cadence_from_their_start():
    p = plan()
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 5.0, 3))
    assert next_step(p, s, now=T0 + 5.4).at == T0 + 6.0
    # A read that took longer than the interval is followed at once.
    assert next_step(p, s, now=T0 + 6.7).at == T0 + 6.7


def test_read_timeout_is_capped_by_the_time_left():
    p = plan(grace_s=30)
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 23.5, 1))
    step = next_step(p, s, now=T0 + 24.5)
    assert step == ReadAt(at=T0 + 24.5, timeout_s=0.5)


def test_deadline_finishes_at_the_deadline_never_later():
    p = plan(grace_s=30)
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 24.2, 7))
    fin = next_step(p, s, now=T0 + 25.3)
    assert isinstance(fin, Finish) and fin.outcome is DrainOutcome.DEADLINE
    assert fin.at == T0 + 25 and fin.outcome.exit_code == 10
    assert "7 in flight" in fin.reason


def test_deadline_reason_says_when_work_was_unknown():
    s, _ = after_read(DrainState(), read(ReadOutcome.TIMEOUT, T0 + 24.5, detail="read timed out"))
    fin = next_step(plan(), s, now=T0 + 25.0)
    assert "unknown" in fin.reason and "timeout" in fin.reason


def test_grace_shorter_than_route_wait_finishes_without_reading():
    p = plan(grace_s=8, route_wait_s=5, exit_reserve_s=5)
    assert p.deadline_at == T0 + 3 and p.first_read_at == T0 + 3
    fin = next_step(p, DrainState(), now=T0)
    assert isinstance(fin, Finish) and fin.at == T0 + 3
    assert "before the first read" in fin.reason
