"""The one definition of work: which gauges each engine and role sums, named once."""

import pytest

from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES, GAUGE_SETS, EngineKind, Role, gauge_set


def test_every_gauge_name_is_in_the_filter():
    for gauges in GAUGE_SETS.values():
        assert gauges.metric_names <= ALL_WORK_METRIC_NAMES


def test_vllm_has_no_disaggregation_role():
    assert gauge_set(EngineKind.VLLM, Role.DECODE).role is Role.UNIFIED


def test_vllm_counts_running_and_waiting_but_not_waiting_by_reason():
    names = {g.name for g in gauge_set(EngineKind.VLLM).required}
    assert names == {"vllm:num_requests_running", "vllm:num_requests_waiting"}


def test_vllm_v0_swapped_requests_count_where_exported():
    # V0 (vllm/engine/metrics.py) preempts requests to CPU memory and counts them in neither gauge.
    swapped = [g for g in gauge_set(EngineKind.VLLM).gauges if g.name == "vllm:num_requests_swapped"]
    assert swapped and swapped[0].optional


def test_the_pre_5357_prefill_transfer_queue_spelling_counts():
    inflight = next(g for g in gauge_set(EngineKind.SGLANG, Role.PREFILL).gauges
                    if g.name == "sglang:num_prefill_inflight_queue_reqs")
    assert "sglang:num_prefill_infight_queue_reqs" in inflight.names and not inflight.optional


@pytest.mark.parametrize("role, extra", [
    (Role.UNIFIED, set()),
    (Role.PREFILL, {"sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs"}),
    (Role.DECODE, {"sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs"}),
])
def test_sglang_roles_add_their_queues(role, extra):
    gauges = gauge_set(EngineKind.SGLANG, role)
    assert {g.name for g in gauges.required} == {"sglang:num_running_reqs", "sglang:num_queue_reqs"} | extra
    # The grammar queue holds structured-output requests outside num_queue_reqs, the HTTP gauge the
    # requests no scheduler gauge counts yet: read by every role, required by none (SGLang releases
    # before them, and a decode server before its first stats tick, do not export them).
    assert {g.name for g in gauges.gauges if g.optional} == {"sglang:num_grammar_queue_reqs",
                                                             "sglang:http_requests_active"}


def test_the_gauges_that_hold_no_request_of_their_own_are_not_read():
    # num_decode_host_receive_queue_reqs is a subset of the transfer queue (counted twice if read);
    # num_paused_reqs and num_retracted_reqs count events per stats tick, not queues;
    # num_decode_deferred_kv_release_reqs are aborted transfers whose client already has its answer.
    for name in ("sglang:num_decode_host_receive_queue_reqs", "sglang:num_paused_reqs",
                 "sglang:num_retracted_reqs", "sglang:num_decode_deferred_kv_release_reqs"):
        assert name not in ALL_WORK_METRIC_NAMES


def test_the_renamed_prefill_gauge_is_one_gauge_with_two_names():
    bootstrap = next(g for g in gauge_set(EngineKind.SGLANG, Role.PREFILL).gauges
                     if g.name == "sglang:num_prefill_bootstrap_queue_reqs")
    assert bootstrap.names == ("sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_prealloc_queue_reqs")
