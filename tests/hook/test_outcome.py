"""What a read means: which outcomes end the drain, the three-way verdict, and its one rendering."""

import json

import pytest

from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.hook.outcome import Read, ReadOutcome, read_fields

UNMEASURABLE = {ReadOutcome.REFUSED, ReadOutcome.HTTP_ERROR, ReadOutcome.TLS_ERROR}


@pytest.mark.parametrize("outcome", list(ReadOutcome))
def test_only_nothing_to_measure_ends_the_drain(outcome):
    assert outcome.ends_drain is (outcome in UNMEASURABLE)
    expected = "idle" if outcome is ReadOutcome.IDLE else "unmeasurable" if outcome in UNMEASURABLE else "busy"
    assert outcome.verdict == expected


def test_complete_only_for_idle_and_busy():
    assert {o for o in ReadOutcome if Read(o, 0.0, 0.0).complete} == {ReadOutcome.IDLE, ReadOutcome.BUSY}


def test_one_rendering_of_a_read():
    read = Read(ReadOutcome.BUSY, 10.0, 0.0123, "3 in flight", gauges={"vllm:num_requests_running": 3.0},
                in_flight=3.0, kind=EngineKind.VLLM, role=Role.UNIFIED, http_status=200, body_bytes=47100)
    fields = read_fields(read)
    assert fields == {
        "outcome": "busy", "verdict": "busy", "complete": True, "idle": False, "in_flight": 3.0,
        "gauges": {"vllm:num_requests_running": 3.0}, "missing": [], "engine": "vllm", "role": "unified",
        "detail": "3 in flight", "http_status": 200, "body_bytes": 47100, "duration_ms": 12.3,
    }
    json.dumps(fields)  # JSON-ready as it is


def test_a_read_that_found_nothing_renders_nulls():
    fields = read_fields(Read(ReadOutcome.REFUSED, 0.0, 0.001, "connection refused"))
    assert fields["engine"] is None and fields["role"] is None and fields["in_flight"] is None
    assert fields["verdict"] == "unmeasurable" and fields["idle"] is False
