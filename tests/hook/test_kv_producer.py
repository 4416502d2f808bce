"""A vLLM KV producer's zero stands only after vLLM's send lease: the rule alone, then through the
reader over a real loopback socket serving a producer's exposition."""

from dataclasses import replace

import pytest

from emulation.raw_server import canned, http_response
from modeldrain.hook.constants import KV_PRODUCER_HOLD_S
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import RELEASE_RULES, EngineKind
from modeldrain.hook.kv_producer import FINISHED_COUNTER, ParkedSends
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import EngineReader
from modeldrain.hook.release_trust import start_words
from modeldrain.hook.settings import ReadConfig

PRODUCER = "kv_role=kv_producer, NixlConnector"
HOLD_S = 60.0


def vllm_read(outcome: ReadOutcome, at: float, finished: float | None) -> Read:
    counters = {FINISHED_COUNTER: finished} if finished is not None else {}
    return Read(outcome, at, 0.01, in_flight=0.0 if outcome is ReadOutcome.IDLE else 2.0, kind=EngineKind.VLLM,
                restart_counters=counters)


def test_an_idle_read_inside_the_hold_after_a_busy_one_is_held_and_stands_after_it():
    sends = ParkedSends(PRODUCER, HOLD_S)
    assert sends.observe(vllm_read(ReadOutcome.BUSY, 100.0, 2)) is None
    held = sends.observe(vllm_read(ReadOutcome.IDLE, 101.0, 2))
    assert held is not None and PRODUCER in held and "59.0 s left" in held
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 159.0, 2)) is not None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 160.0, 2)) is None


def test_a_request_that_finished_between_two_reads_starts_the_hold_again():
    # Never read busy: the counter moving is the only sign a request finished and parked its blocks.
    sends = ParkedSends(PRODUCER, HOLD_S)
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 0.0, 0)) is None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 10.0, 1)) is not None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 69.0, 1)) is not None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 70.0, 1)) is None


def test_a_producer_that_has_finished_nothing_has_nothing_parked():
    sends = ParkedSends(PRODUCER, HOLD_S)
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 0.0, 0)) is None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 1.0, 0)) is None


@pytest.mark.parametrize("finished", [5.0, None, float("nan")], ids=["served before the first read", "no counter",
                                                                      "NaN counter"])
def test_when_the_last_request_ended_is_unknown_the_hold_counts_from_the_first_read(finished):
    sends = ParkedSends(PRODUCER, HOLD_S)
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 0.0, finished)) is not None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 59.9, finished)) is not None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 60.0, finished)) is None


def test_a_read_that_got_no_body_says_nothing_of_the_counter():
    sends = ParkedSends(PRODUCER, HOLD_S)
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 0.0, 0)) is None
    assert sends.observe(Read(ReadOutcome.TIMEOUT, 1.0, 2.0, kind=EngineKind.VLLM)) is None
    assert sends.observe(vllm_read(ReadOutcome.IDLE, 3.0, 0)) is None


def test_the_hold_follows_vllms_longest_fixed_send_lease_and_the_rule_says_it():
    assert KV_PRODUCER_HOLD_S == 480.0  # VLLM_NIXL_ / VLLM_MOONCAKE_ABORT_REQUEST_TIMEOUT's default
    rule = RELEASE_RULES["vllm_kv_producer"]
    assert f"{KV_PRODUCER_HOLD_S:g} s" in rule.summary and f"{KV_PRODUCER_HOLD_S:g} s" in rule.words
    words = start_words(EngineHint(kind=EngineKind.VLLM, kv_producer=PRODUCER))
    assert len(words) == 1 and PRODUCER in words[0] and "480 s" in words[0]
    assert start_words(EngineHint(kind=EngineKind.VLLM)) == ()


# A vLLM 0.32 producer's exposition after it served: both work gauges at 0 (its requests have left
# them after their prefill), the request counter at 3. NixlConnector adds only histograms and
# failure counters (vllm:nixl_*): nothing that counts the blocks it keeps for the decoder.
SERVED = (b"# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\"} 0\n"
          b"# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine=\"0\"} 0\n"
          b"# TYPE vllm:request_success_total counter\nvllm:request_success_total{engine=\"0\",finished_reason=\"length\"} 3\n"
          b"# TYPE vllm:nixl_num_kv_expired_reqs counter\nvllm:nixl_num_kv_expired_reqs{engine=\"0\"} 0\n")
NEVER_SERVED = SERVED.replace(b"finished_reason=\"length\"} 3", b"finished_reason=\"length\"} 0")


def reader_for(target, kv_producer):
    hint = EngineHint(kind=EngineKind.VLLM, kv_producer=kv_producer)
    return EngineReader(ReadConfig(target=target, hint=hint, read_timeout_s=1.0, max_body_bytes=1 << 20))


def test_the_reader_holds_a_producer_that_has_served_and_reads_the_same_body_idle_elsewhere(serve):
    target = serve(canned(http_response(SERVED)))
    held = reader_for(target, PRODUCER).read(1.0)
    assert held.outcome is ReadOutcome.INCOMPLETE and held.in_flight == 0
    assert "KV producer (kv_role=kv_producer, NixlConnector)" in held.detail and "480 s" in held.detail
    assert reader_for(replace(target), None).read(1.0).outcome is ReadOutcome.IDLE  # a unified or consumer vLLM


def test_the_reader_reads_a_producer_that_has_served_nothing_idle(serve):
    reader = reader_for(serve(canned(http_response(NEVER_SERVED))), PRODUCER)
    assert reader.read(1.0).outcome is ReadOutcome.IDLE
    assert reader.read(1.0).outcome is ReadOutcome.IDLE
