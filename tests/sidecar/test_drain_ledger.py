"""Every drain the sidecar knows of: counted once each, by outcome, whatever order the hook's two
messages arrive in; a hook that never says how it ended is counted `unreported` after its grace."""

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from modeldrain.hook import sidecar_report
from modeldrain.hook.events import EventLog
from modeldrain.sidecar.drain_ledger import MAX_OPEN_HOOK_DRAINS, UNREPORTED_SLACK_S, DrainLedger, Via
from modeldrain.sidecar.metrics import SidecarMetrics

A, B = "0123456789abcdef", "fedcba9876543210"


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def ledger():
    metrics = SidecarMetrics()
    clock = Clock()
    ledger = DrainLedger(metrics, EventLog("drain-sidecar", started_at=0.0), clock)
    ledger.clock, ledger.metrics = clock, metrics
    return ledger


def value(ledger, name, **labels):
    for family in text_string_to_metric_families(generate_latest(ledger.metrics.registry).decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return sample.value
    raise KeyError(name, labels)


def finished(drain_id, outcome="idle", **fields):
    return sidecar_report.finished_message(drain_id, outcome=outcome, exit_code=0, elapsed_s=fields.get("elapsed_s", 7.0),
                                           held_after_last_busy_s=fields.get("held", 6.0),
                                           in_flight=fields.get("in_flight", 0.0))


def test_a_hooks_drain_is_counted_once_and_marks_the_member_draining(ledger):
    assert ledger.draining is None
    assert ledger.hook_event(sidecar_report.started_message(A, 30.0)) == "started"
    assert ledger.draining is not None and ledger.draining.via is Via.HOOK
    assert ledger.hook_event(sidecar_report.started_message(A, 30.0)) == "already counted"
    assert ledger.in_progress(Via.HOOK) == 1
    assert ledger.hook_event(finished(A)) == "finished"
    assert ledger.hook_event(finished(A)) == "already counted"
    assert value(ledger, "modeldrain_drains_started_total", via="hook") == 1
    assert value(ledger, "modeldrain_drains_total", outcome="idle", via="hook") == 1
    assert value(ledger, "modeldrain_drain_held_after_last_busy_seconds_sum", via="hook") == 6.0
    assert value(ledger, "modeldrain_drains_in_progress", via="hook") == 0


def test_an_end_before_its_start_is_counted_once(ledger):
    """The start goes out on a thread nobody waits on: it may arrive after the end."""
    ledger.hook_event(finished(A))
    assert ledger.hook_event(sidecar_report.started_message(A, 30.0)) == "already counted"
    assert value(ledger, "modeldrain_drains_started_total", via="hook") == 1
    assert value(ledger, "modeldrain_drains_total", outcome="idle", via="hook") == 1
    assert ledger.in_progress(Via.HOOK) == 0


def test_a_deadline_counts_the_work_it_cut(ledger):
    ledger.hook_event(sidecar_report.started_message(A, 30.0))
    ledger.hook_event(finished(A, "deadline", in_flight=3.0, held=25.0))
    ledger.hook_event(sidecar_report.started_message(B, 30.0))
    ledger.hook_event(finished(B, "idle", in_flight=0.0))
    assert value(ledger, "modeldrain_drain_in_flight_at_deadline_sum", via="hook") == 3.0
    assert value(ledger, "modeldrain_drain_in_flight_at_deadline_count", via="hook") == 1


def test_a_hook_that_never_says_how_it_ended_is_counted_unreported_after_its_grace(ledger):
    ledger.hook_event(sidecar_report.started_message(A, 30.0))
    ledger.clock.now += 30.0 + UNREPORTED_SLACK_S - 0.1
    assert ledger.in_progress(Via.HOOK) == 1
    ledger.clock.now += 0.2
    assert ledger.in_progress(Via.HOOK) == 0
    assert value(ledger, "modeldrain_drains_total", outcome="unreported", via="hook") == 1
    assert ledger.hook_event(finished(A)) == "already counted"  # too late: counted once


def test_local_spam_cannot_grow_the_open_hooks(ledger):
    for n in range(MAX_OPEN_HOOK_DRAINS + 5):
        ledger.hook_event(sidecar_report.started_message(f"{n:016x}", 30.0))
    assert ledger.in_progress(Via.HOOK) == MAX_OPEN_HOOK_DRAINS
    assert value(ledger, "modeldrain_drains_total", outcome="unreported", via="hook") == 5


def test_drain_calls_are_counted_apart_from_hooks(ledger):
    ledger.call_arrived()
    ledger.call_started()
    assert ledger.draining is not None and ledger.draining.via is Via.DRAIN_CALL
    assert ledger.in_progress(Via.DRAIN_CALL) == 1
    ledger.call_finished("abandoned", held_after_last_busy_s=None, in_flight=None)
    assert value(ledger, "modeldrain_drains_total", outcome="abandoned", via="drain_call") == 1
    ledger.hook_event(sidecar_report.started_message(A, 30.0))
    assert ledger.draining.via is Via.DRAIN_CALL  # the first word stays


@pytest.mark.parametrize("message", [
    None, [], {"event": "started", "drain": A}, {"event": "started", "drain": A, "grace_s": 0},
    {"event": "started", "drain": A, "grace_s": True}, {"event": "started", "drain": "ABCDEF0123456789", "grace_s": 30},
    {"event": "finished", "drain": A}, {"event": "finished", "drain": A, "outcome": "unreported"},
    {"event": "finished", "drain": A, "outcome": "idle", "in_flight": float("nan")},
    {"event": "finished", "drain": A, "outcome": "idle", "exit_code": "0"},
    {"event": "finished", "drain": A, "outcome": "idle", "grace_s": None},
    {"event": "other", "drain": A},
])
def test_what_is_not_a_hook_event_is_refused_and_counts_nothing(ledger, message):
    with pytest.raises(ValueError):
        ledger.hook_event(message)
    assert ledger.draining is None
    assert value(ledger, "modeldrain_drains_started_total", via="hook") == 0


def test_fields_a_newer_hook_adds_are_ignored(ledger):
    assert ledger.hook_event({**sidecar_report.started_message(A, 30.0), "node": "n1"}) == "started"
