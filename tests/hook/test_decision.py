"""The drain rules with an injected clock: when to read, when to stop, and why."""

from dataclasses import replace

import pytest

from modeldrain.hook.decision import (
    DrainOutcome,
    DrainPlan,
    DrainState,
    ExitReserve,
    Finish,
    ReadAt,
    after_read,
    exit_reserve_for,
    next_step,
    reserve_after_read,
)
from modeldrain.hook.gauges import Role
from modeldrain.hook.outcome import Read, ReadOutcome

T0 = 1000.0


def plan(grace_s=30.0, route_wait_s=5.0, exit_reserve_s=5.0, interval_s=1.0, read_timeout_s=2.0,
         busy_interval_s=1.0):
    return DrainPlan.build(started_at=T0, grace_s=grace_s, route_wait_s=route_wait_s,
                           exit_reserve=ExitReserve(exit_reserve_s, "test"), interval_s=interval_s,
                           busy_interval_s=busy_interval_s, read_timeout_s=read_timeout_s)


def read(outcome, at, in_flight=None, detail="d", role=None, duration_s=0.01):
    return Read(outcome, started_at=at, duration_s=duration_s, detail=detail, in_flight=in_flight, role=role)


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


def test_busy_reads_come_faster_and_the_confirming_read_a_second_after_the_first_idle_one():
    p = plan(busy_interval_s=0.25)
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 5.0, 3))
    assert next_step(p, s, now=T0 + 5.01).at == T0 + 5.25
    s, _ = after_read(s, read(ReadOutcome.IDLE, T0 + 5.25, 0))  # the last request just ended
    assert next_step(p, s, now=T0 + 5.26).at == T0 + 6.25  # not 5.5: the zero must last a second
    s, fin = after_read(s, read(ReadOutcome.IDLE, T0 + 6.25, 0))
    assert fin is not None and fin.outcome is DrainOutcome.IDLE


def test_a_zero_that_load_counted_from_arrival_is_confirmed_at_the_busy_spacing():
    """vLLM's only API server's /load counts a request from its arrival: its zero covers the moment
    the gauges miss, so the confirming read comes at the busy spacing, not a second later."""
    p = plan(busy_interval_s=0.25)
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 5.0, 3))
    counted = Read(ReadOutcome.IDLE, started_at=T0 + 5.25, duration_s=0.01, in_flight=0, counted_from_arrival=True)
    s, _ = after_read(s, counted)
    assert next_step(p, s, now=T0 + 5.26).at == T0 + 5.5
    s, fin = after_read(s, read(ReadOutcome.IDLE, T0 + 5.5, 0))
    assert fin is not None and fin.outcome is DrainOutcome.IDLE
    # Never sooner than the busy spacing, nor than the confirming gap where reads are slower.
    s, _ = after_read(DrainState(), counted)
    assert next_step(plan(busy_interval_s=1.0), s, now=T0 + 5.26).at == T0 + 6.25


def test_a_busy_read_from_load_alone_is_followed_sooner_but_within_the_engines_share():
    """/load costs the API server a fraction of a scrape: after a busy read that was /load alone the
    next comes LOAD_BUSY_POLL_INTERVAL_S later, unless that read took long (the share rule)."""
    p = plan(busy_interval_s=0.25)
    counted = Read(ReadOutcome.BUSY, started_at=T0 + 5.0, duration_s=0.003, in_flight=2, counted_from_arrival=True)
    s, _ = after_read(DrainState(), counted)
    assert next_step(p, s, now=T0 + 5.01).at == pytest.approx(T0 + 5.1)
    slow, _ = after_read(DrainState(), replace(counted, duration_s=0.02))  # 5 % of the engine: 0.4 s
    assert next_step(p, slow, now=T0 + 5.03).at == pytest.approx(T0 + 5.4)
    # A busy scrape keeps the busy spacing; a --busy-interval shorter than 0.1 s holds for /load too.
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 5.0, 2, duration_s=0.003))
    assert next_step(p, s, now=T0 + 5.01).at == T0 + 5.25
    s, _ = after_read(DrainState(), counted)
    assert next_step(plan(busy_interval_s=0.05), s, now=T0 + 5.01).at == pytest.approx(T0 + 5.06)


def test_an_engine_answering_badly_is_not_hurried():
    p = plan(busy_interval_s=0.25)
    for outcome in (ReadOutcome.TIMEOUT, ReadOutcome.INCOMPLETE, ReadOutcome.RESET, ReadOutcome.CONNECT_ERROR):
        s, _ = after_read(DrainState(), read(outcome, T0 + 5.0))
        assert next_step(p, s, now=T0 + 5.01).at == T0 + 6.0, outcome


def test_a_busy_interval_longer_than_the_interval_is_capped_by_it():
    assert plan(interval_s=0.2, busy_interval_s=0.25).busy_interval_s == 0.2


def test_a_single_zero_between_busy_reads_restarts_the_confirmation():
    p = plan(busy_interval_s=0.25)
    s, _ = after_read(DrainState(), read(ReadOutcome.IDLE, T0 + 5.0, 0))
    s, _ = after_read(s, read(ReadOutcome.BUSY, T0 + 6.0, 1))
    s, _ = after_read(s, read(ReadOutcome.IDLE, T0 + 6.25, 0))
    assert s.idle_streak == 1 and s.first_idle_at == T0 + 6.25
    assert next_step(p, s, now=T0 + 6.3).at == T0 + 7.25


@pytest.mark.parametrize("role, seconds", [
    (None, 5.0), (Role.UNIFIED, 5.0), (Role.PREFILL, 20.0), (Role.DECODE, 20.0),
])
def test_exit_reserve_by_role(role, seconds):
    reserve = exit_reserve_for(role, "its command line")
    assert reserve.seconds == seconds and not reserve.explicit
    if seconds == 20.0:
        assert f"SGLang {role.value} (its command line)" in reserve.reason


def test_a_split_role_seen_in_the_metrics_grows_the_reserve_once_unless_it_was_given():
    p = plan(grace_s=45)
    assert p.deadline_at == T0 + 40
    grown = reserve_after_read(p.exit_reserve, read(ReadOutcome.IDLE, T0 + 5, 0, role=Role.DECODE))
    assert grown is not None and grown.seconds == 20.0 and "from its metrics" in grown.reason
    p2 = p.with_exit_reserve(grown)
    assert p2.deadline_at == T0 + 25 and p2.first_read_at == T0 + 5
    assert reserve_after_read(grown, read(ReadOutcome.IDLE, T0 + 6, 0, role=Role.DECODE)) is None
    assert reserve_after_read(p.exit_reserve, read(ReadOutcome.IDLE, T0 + 5, 0, role=Role.UNIFIED)) is None
    given = ExitReserve(5.0, "--exit-reserve", explicit=True)
    assert reserve_after_read(given, read(ReadOutcome.IDLE, T0 + 5, 0, role=Role.PREFILL)) is None


def test_a_split_role_at_the_default_grace_returns_by_g_minus_20():
    p = plan(grace_s=30, exit_reserve_s=20)
    assert p.deadline_at == T0 + 10 and p.first_read_at == T0 + 5
    short = plan(grace_s=15, exit_reserve_s=20)
    assert short.deadline_at == T0 and isinstance(next_step(short, DrainState(), now=T0), Finish)


@pytest.mark.parametrize("duration_s, spacing_s", [
    (0.005, 0.25),  # vLLM's ~47 KB exposition: four reads a second
    (0.025, 0.5),  # a read of 25 ms: every 0.5 s, so scraping takes at most 5% of the engine
    (0.060, 1.0),  # ~500 KB: no faster than the normal interval
    (1.5, 1.5),  # a read longer than the interval is followed at once
])
def test_reads_while_busy_are_spaced_by_what_they_cost_the_engine(duration_s, spacing_s):
    p = plan(busy_interval_s=0.25)
    s, _ = after_read(DrainState(), read(ReadOutcome.BUSY, T0 + 5.0, 3, duration_s=duration_s))
    assert next_step(p, s, now=T0 + 5.0 + duration_s).at == pytest.approx(T0 + 5.0 + spacing_s)


def test_a_refusal_after_the_engine_answered_is_the_engine_gone_not_a_failure():
    answered = Read(ReadOutcome.IDLE, T0 + 5.0, 0.01, in_flight=0.0, http_status=200)
    s, _ = after_read(DrainState(), answered)
    s, fin = after_read(s, read(ReadOutcome.REFUSED, T0 + 6.0, detail="connection refused"))
    assert fin.outcome is DrainOutcome.ENGINE_GONE and fin.outcome.exit_code == 0
    assert "answered before and is gone now" in fin.reason
    # Never answered (a wrong port, a dead engine): still nothing to measure, exit 11.
    s, fin = after_read(DrainState(), read(ReadOutcome.REFUSED, T0 + 5.0, detail="connection refused"))
    assert fin.outcome is DrainOutcome.UNMEASURABLE
    # An HTTP error or TLS failure after answers is not the engine gone: still exit 11.
    s, _ = after_read(DrainState(), answered)
    s, fin = after_read(s, read(ReadOutcome.HTTP_ERROR, T0 + 6.0))
    assert fin.outcome is DrainOutcome.UNMEASURABLE


def test_a_leader_that_never_answered_is_unknown_waited_on_and_unreachable_at_the_deadline():
    """Issue 21: a wrong host or port refuses from the first read; that is not a leader that left."""
    s = DrainState()
    for at in (T0 + 5, T0 + 6, T0 + 7):
        s, finish = after_read(s, read(ReadOutcome.REFUSED, at, detail="the leader's drain-sidecar: connection refused"), following_leader=True)
        assert finish is None
    assert isinstance(next_step(plan(), s, T0 + 8, following_leader=True), ReadAt)
    fin = next_step(plan(), s, T0 + 25.0, following_leader=True)
    assert isinstance(fin, Finish) and fin.outcome is DrainOutcome.LEADER_UNREACHABLE
    assert "never answered as a drain-sidecar in 3 reads" in fin.reason and fin.at == T0 + 25
    assert DrainOutcome.LEADER_UNREACHABLE.exit_code == 12
    # The same reads of the local engine still end the drain at once (nothing to measure).
    _, finish = after_read(DrainState(), read(ReadOutcome.REFUSED, T0 + 5))
    assert finish is not None and finish.outcome is DrainOutcome.UNMEASURABLE


def test_a_leader_that_answered_and_then_refuses_is_gone():
    answered = Read(ReadOutcome.BUSY, T0 + 5, 0.01, "leader: 2 in flight", in_flight=2.0, leader_answered=True)
    s, finish = after_read(DrainState(), answered, following_leader=True)
    assert finish is None and s.leader_answered
    s, finish = after_read(s, read(ReadOutcome.UNAVAILABLE, T0 + 6), following_leader=True)  # a 401 between
    assert finish is None and s.leader_answered
    _, finish = after_read(s, read(ReadOutcome.REFUSED, T0 + 7, detail="the leader's drain-sidecar: connection refused"), following_leader=True)
    assert finish is not None and finish.outcome is DrainOutcome.LEADER_GONE
    # A leader that answered and then left: the deadline, if it came first, is the ordinary one.
    fin = next_step(plan(), s, T0 + 25.0, following_leader=True)
    assert isinstance(fin, Finish) and fin.outcome is DrainOutcome.DEADLINE
