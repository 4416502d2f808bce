"""A zero the scheduler may not have republished is `stale`, never idle (modeldrain/hook/freshness.py)."""

import pytest

from modeldrain.hook.freshness import stale_zero
from modeldrain.hook.gauges import EngineKind
from modeldrain.hook.outcome import Read, ReadOutcome


def sglang_read(outcome=ReadOutcome.IDLE, heartbeat=(2.0,), kind=EngineKind.SGLANG):
    return Read(outcome, 0.0, 0.01, kind=kind, heartbeat=heartbeat)


def test_a_zero_after_the_heartbeat_moved_is_trusted():
    assert stale_zero((1.0,), sglang_read(heartbeat=(2.0,))) is None


@pytest.mark.parametrize("last, now, words", [
    ((2.0,), (2.0,), "has not advanced"),  # the scheduler inside a long forward pass
    ((3.0,), (2.0,), "has not advanced"),  # went backwards: a new process, whose gauges start anew
    ((1.0, 5.0), (2.0, 5.0), "has not advanced on every scheduler"),  # one rank still in its pass
    ((1.0,), (2.0, 2.0), "2 series against 1"),
    ((1.0,), None, "is gone from the body"),
], ids=["still", "backwards", "one-rank-still", "series-changed", "vanished"])
def test_a_zero_that_may_be_stale_is_said_why(last, now, words):
    reason = stale_zero(last, sglang_read(heartbeat=now))
    assert reason is not None and words in reason and "sglang:scheduler_process_cpu_seconds_total" in reason


def test_only_an_idle_read_of_an_engine_with_a_heartbeat_is_judged():
    assert stale_zero((2.0,), sglang_read(ReadOutcome.BUSY, heartbeat=(2.0,))) is None
    assert stale_zero(None, sglang_read(kind=EngineKind.VLLM, heartbeat=None)) is None


def test_the_readers_first_read_may_be_idle_since_only_the_second_of_two_must_be_newer():
    assert stale_zero(None, sglang_read(heartbeat=(2.0,))) is None


def test_a_release_without_the_counter_keeps_the_two_reads_rule():
    # Never seen, not seen now: an older SGLang (docs/prestop.md says what it risks).
    assert stale_zero(None, sglang_read(heartbeat=None)) is None
