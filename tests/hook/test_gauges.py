"""The one definition of work: which gauges each engine and role sums, named once."""

import pytest

from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES, GAUGE_SETS, EngineKind, Role, gauge_set


def test_every_gauge_name_is_in_the_filter():
    for gauges in GAUGE_SETS.values():
        assert gauges.metric_names <= ALL_WORK_METRIC_NAMES


def test_vllm_has_no_disaggregation_role():
    assert gauge_set(EngineKind.VLLM, Role.DECODE).role is Role.UNIFIED


def test_vllm_counts_running_and_waiting_but_not_waiting_by_reason():
    names = {g.name for g in gauge_set(EngineKind.VLLM).gauges}
    assert names == {"vllm:num_requests_running", "vllm:num_requests_waiting"}


@pytest.mark.parametrize("role, extra", [
    (Role.UNIFIED, set()),
    (Role.PREFILL, {"sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_inflight_queue_reqs"}),
    (Role.DECODE, {"sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs"}),
])
def test_sglang_roles_add_their_queues(role, extra):
    names = {g.name for g in gauge_set(EngineKind.SGLANG, role).gauges}
    assert names == {"sglang:num_running_reqs", "sglang:num_queue_reqs"} | extra


def test_the_renamed_prefill_gauge_is_one_gauge_with_two_names():
    bootstrap = next(g for g in gauge_set(EngineKind.SGLANG, Role.PREFILL).gauges
                     if g.name == "sglang:num_prefill_bootstrap_queue_reqs")
    assert bootstrap.names == ("sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_prefill_prealloc_queue_reqs")
