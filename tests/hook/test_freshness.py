"""A zero the scheduler may not have republished is `stale`, never idle (modeldrain/hook/freshness.py)."""

import math

import pytest

from modeldrain.hook.freshness import WITHOUT_HEARTBEAT, remembered, stale_zero
from modeldrain.hook.gauges import EngineKind
from modeldrain.hook.outcome import Read, ReadOutcome

RANKS = ((("tp_rank", "0"),), (("tp_rank", "1"),))


def beats(*values: float):
    """A heartbeat's series as the body gives them: one per scheduler rank, in body order."""
    return tuple(zip(RANKS, values))


def sglang_read(outcome=ReadOutcome.IDLE, heartbeat=beats(2.0), kind=EngineKind.SGLANG):
    return Read(outcome, 0.0, 0.01, kind=kind, heartbeat=heartbeat)


def test_a_zero_after_the_heartbeat_moved_is_trusted():
    assert stale_zero(beats(1.0), sglang_read(heartbeat=beats(2.0))) is None


@pytest.mark.parametrize("last, now, words", [
    (beats(2.0), beats(2.0), "has not advanced"),  # the scheduler inside a long forward pass
    (beats(3.0), beats(2.0), "has not advanced"),  # went backwards: a new process, whose gauges start anew
    (beats(1.0, 5.0), beats(2.0, 5.0), "has not advanced on every scheduler"),  # one rank still in its pass
    (beats(1.0), beats(2.0, 2.0), "2 against 1"),
    (beats(1.0), None, "is gone from the body"),
    (beats(1.0), beats(math.nan), "not a finite number"),  # NaN > 1.0 and NaN <= 1.0 are both false
    (beats(1.0), beats(math.inf), "not a finite number"),
    (None, beats(math.nan), "not a finite number"),  # even as a first sight: the next read compares with it
    (beats(-math.inf), beats(0.0), "not a finite number on the previous read"),  # 0 > -Inf: no proof either
    (beats(math.nan), beats(5.0), "not a finite number on the previous read"),
    (WITHOUT_HEARTBEAT, beats(7.0), "has appeared since the previous read"),
], ids=["still", "backwards", "one-rank-still", "series-changed", "vanished", "nan", "inf", "nan-first",
        "after-minus-inf", "after-nan", "appeared"])
def test_a_zero_that_may_be_stale_is_said_why(last, now, words):
    reason = stale_zero(last, sglang_read(heartbeat=now))
    assert reason is not None and words in reason and "sglang:scheduler_process_cpu_seconds_total" in reason


def test_only_an_idle_read_of_an_engine_with_a_heartbeat_is_judged():
    assert stale_zero(beats(2.0), sglang_read(ReadOutcome.BUSY, heartbeat=beats(2.0))) is None
    assert stale_zero(None, sglang_read(kind=EngineKind.VLLM, heartbeat=None)) is None


def test_the_readers_first_read_may_be_idle_since_only_the_second_of_two_must_be_newer():
    assert stale_zero(None, sglang_read(heartbeat=beats(2.0))) is None


def test_a_release_without_the_counter_keeps_the_two_reads_rule():
    # Never seen, not seen now: an older SGLang (docs/prestop.md says what it risks).
    assert stale_zero(None, sglang_read(heartbeat=None)) is None


def test_a_release_without_the_counter_keeps_the_two_reads_rule_after_a_read_without_it():
    assert stale_zero(WITHOUT_HEARTBEAT, sglang_read(heartbeat=None)) is None


def test_two_schedulers_are_compared_by_their_labels_not_their_place_in_the_body():
    """Issue 25 item 6: rank 0 frozen at 5.0, rank 1 moving; the body lists rank 1 first now.
    Compared by position, 5.0 -> 9.0 and 3.0 -> 5.0 both moved."""
    before = ((RANKS[0], 5.0), (RANKS[1], 3.0))
    swapped = ((RANKS[1], 9.0), (RANKS[0], 5.0))
    reason = stale_zero(before, sglang_read(heartbeat=swapped))
    assert reason is not None and "has not advanced on every scheduler" in reason
    both_moved = ((RANKS[1], 9.0), (RANKS[0], 6.0))
    assert stale_zero(before, sglang_read(heartbeat=both_moved)) is None


def test_a_rank_replaced_by_another_is_not_progress():
    reason = stale_zero(beats(1.0, 1.0), sglang_read(heartbeat=((RANKS[0], 2.0), ((("tp_rank", "2"),), 2.0))))
    assert reason is not None and "not the ones of the previous read" in reason


def test_a_complete_read_without_the_counter_is_remembered_as_such_and_a_failed_read_keeps_the_last():
    assert remembered(None, sglang_read(heartbeat=None)) == WITHOUT_HEARTBEAT
    assert remembered(beats(1.0), sglang_read(ReadOutcome.TIMEOUT, heartbeat=None)) == beats(1.0)
    assert remembered(None, sglang_read(kind=EngineKind.VLLM, heartbeat=None)) is None
    assert remembered(WITHOUT_HEARTBEAT, sglang_read(heartbeat=beats(3.0))) == beats(3.0)
