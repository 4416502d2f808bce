"""Parsing real scrapes: the gauge sets, summing series, detection, and what counts as bad."""

import pytest

from hook.exposition import ExpositionError, measure, parse
from hook.gauges import (
    ALL_WORK_METRIC_NAMES,
    EngineKind,
    Role,
    gauge_set,
)


def load(fixtures_dir, name):
    return (fixtures_dir / name).read_bytes()


def test_vllm_fixtures_idle_and_busy(fixtures_dir):
    idle = parse(load(fixtures_dir, "vllm-0.32.0-cpu-metrics-idle.txt"))
    busy = parse(load(fixtures_dir, "vllm-0.32.0-cpu-metrics-busy.txt"))
    assert idle.kind is EngineKind.VLLM and busy.kind is EngineKind.VLLM
    assert idle.process_start_time == pytest.approx(1.79595940043e9)
    m = measure(busy, gauge_set(EngineKind.VLLM))
    # 16 running + 32 waiting; waiting_by_reason (which repeats waiting) is not added.
    assert m.gauges == {"vllm:num_requests_running": 16.0, "vllm:num_requests_waiting": 32.0}
    assert m.in_flight == 48 and not m.missing and not m.invalid
    assert measure(idle, gauge_set(EngineKind.VLLM)).in_flight == 0


def test_sglang_fixtures_roles_from_engine_type(fixtures_dir):
    unified = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-busy.txt"))
    prefill = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-prefill-idle.txt"))
    decode = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-decode-idle.txt"))
    assert (unified.kind, unified.sglang_role) == (EngineKind.SGLANG, Role.UNIFIED)
    assert prefill.sglang_role is Role.PREFILL and decode.sglang_role is Role.DECODE
    assert unified.process_start_time is None  # multiprocess mode
    assert measure(unified, gauge_set(EngineKind.SGLANG)).in_flight == 28
    m = measure(prefill, gauge_set(EngineKind.SGLANG, Role.PREFILL))
    assert m.in_flight == 0 and not m.missing and len(m.gauges) == 4


def test_decode_that_served_nothing_is_an_incomplete_envelope(fixtures_dir):
    decode = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-decode-idle.txt"))
    m = measure(decode, gauge_set(EngineKind.SGLANG, Role.DECODE))
    assert set(m.missing) == {
        "sglang:num_running_reqs", "sglang:num_queue_reqs",
        "sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs",
    }


def test_every_series_is_summed_across_dp_engines():
    body = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="m"} 0.0
vllm:num_requests_waiting{engine="1",model_name="m"} 4.0
"""
    m = measure(parse(body), gauge_set(EngineKind.VLLM))
    assert m.gauges == {"vllm:num_requests_running": 5.0, "vllm:num_requests_waiting": 4.0}


def test_legacy_prefill_name_satisfies_the_envelope():
    body = b"""sglang:num_running_reqs{engine_type="prefill",tp_rank="0"} 0
sglang:num_queue_reqs{engine_type="prefill",tp_rank="0"} 0
sglang:num_prefill_prealloc_queue_reqs{engine_type="prefill",tp_rank="0"} 2
sglang:num_prefill_inflight_queue_reqs{engine_type="prefill",tp_rank="0"} 1
"""
    m = measure(parse(body), gauge_set(EngineKind.SGLANG, Role.PREFILL))
    assert not m.missing and m.in_flight == 3


@pytest.mark.parametrize("value", ["NaN", "+Inf", "-1"])
def test_negative_nan_and_infinite_values_are_invalid(value):
    body = f"vllm:num_requests_running{{engine=\"0\"}} {value}\nvllm:num_requests_waiting{{engine=\"0\"}} 0\n"
    m = measure(parse(body.encode()), gauge_set(EngineKind.VLLM))
    assert m.invalid == ("vllm:num_requests_running",) and m.in_flight is None


def test_openmetrics_is_parsed_by_its_own_grammar():
    body = b"""# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 1.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0"} 2.0
# EOF
"""
    e = parse(body, "application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert measure(e, gauge_set(EngineKind.VLLM)).in_flight == 3


@pytest.mark.parametrize("body", [
    b"vllm:num_requests_running{engine=\"0\" 1\n",  # unterminated labels
    b"vllm:num_requests_running{engine=\"0\"} one\n",  # not a number
    b"\xff\xfe\x00garbage",  # not UTF-8
])
def test_unparseable_wanted_lines_raise(body):
    with pytest.raises(ExpositionError):
        parse(body)


def test_only_wanted_families_are_parsed():
    # A malformed line of a family we never read does not make the read unparseable.
    body = b"vllm:some_histogram_bucket{le=oops} 1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"
    m = measure(parse(body), gauge_set(EngineKind.VLLM))
    assert m.in_flight == 0


def test_a_label_value_naming_a_gauge_is_not_that_gauge():
    body = b'other_metric{note="vllm:num_requests_running 5"} 1\nvllm:num_requests_running 0\nvllm:num_requests_waiting 0\n'
    assert measure(parse(body), gauge_set(EngineKind.VLLM)).in_flight == 0


def test_body_naming_both_engines_leaves_kind_to_the_caller():
    body = b"vllm:num_requests_running 0\nsglang:num_running_reqs 0\n"
    assert parse(body).kind is None


def test_large_exposition_is_filtered_before_parsing(fixtures_dir):
    base = load(fixtures_dir, "vllm-0.32.0-cpu-metrics-busy.txt")
    # ~500 KB: the busy scrape's histogram lines repeated under other model names.
    hist = b"\n".join(l for l in base.splitlines() if b"_bucket{" in l)
    padding = b"\n".join(hist.replace(b'model_name="tiny"', b'model_name="lora-%d"' % i) for i in range(60))
    body = padding + b"\n" + base
    assert len(body) > 500_000
    m = measure(parse(body), gauge_set(EngineKind.VLLM))
    assert m.in_flight == 48


def test_openmetrics_with_escaped_sample_names_reads_as_the_gauges():
    # prometheus-client 0.26's OpenMetrics output: TYPE lines keep ':', sample names get '_'.
    body = b"""# HELP vllm:num_requests_running Running.
# TYPE vllm:num_requests_running gauge
vllm_num_requests_running{engine="0",model_name="tiny"} 2.0
# HELP vllm:num_requests_waiting Waiting.
# TYPE vllm:num_requests_waiting gauge
vllm_num_requests_waiting{engine="0",model_name="tiny"} 1.0
# EOF
"""
    e = parse(body, "application/openmetrics-text; version=1.0.0; charset=utf-8")
    assert e.kind is EngineKind.VLLM
    assert measure(e, gauge_set(EngineKind.VLLM)).in_flight == 3


def test_restart_counters_are_read_for_incarnation_evidence(fixtures_dir):
    vllm = parse(load(fixtures_dir, "vllm-0.32.0-cpu-metrics-busy.txt"))
    sglang = parse(load(fixtures_dir, "sglang-0.5.23-cpu-metrics-idle.txt"))
    assert set(vllm.restart_counters) == {"vllm:request_success_total"}
    assert sglang.restart_counters == {"sglang:num_requests_total": 1.0}
