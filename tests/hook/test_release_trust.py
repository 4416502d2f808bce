"""Issue 26: what each release and configuration counts as work, and where a zero proves nothing."""

import time

import pytest

from modeldrain.hook.engine import EngineHint, hint_from_argv
from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import classify_body
from modeldrain.hook.release_trust import start_words

VLLM = EngineHint(kind=EngineKind.VLLM, source="flag")


def classify(body: str, hint: EngineHint = EngineHint()) -> Read:
    base = Read(ReadOutcome.INCOMPLETE, time.monotonic(), 0.0, http_status=200)
    return classify_body(base, body.encode(), "text/plain; version=0.0.4", hint, deadline_at=time.monotonic() + 10)


def declared(name: str) -> str:
    return f"# HELP {name} Number of requests.\n# TYPE {name} gauge\n"


# What vLLM 0.32 with --api-server-count 2 serves before its first request (prometheus multiprocess
# mode): the work gauges declared with no series, counters at 0, no process_* families.
NEVER_SERVED = (declared("vllm:num_requests_running") + declared("vllm:num_requests_waiting")
                + "# HELP vllm:request_success_total Count of successfully processed requests.\n"
                  "# TYPE vllm:request_success_total counter\n"
                  'vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 0.0\n'
                  "# HELP vllm:cache_config_info Information of the LLMEngine CacheConfig\n"
                  "# TYPE vllm:cache_config_info gauge\n"
                  'vllm:cache_config_info{block_size="16",engine="0"} 1.0\n')


@pytest.mark.parametrize("hint", [EngineHint(), VLLM], ids=["detected", "told"])
def test_a_never_served_multiprocess_vllm_reads_idle(hint):
    read = classify(NEVER_SERVED, hint)
    assert read.outcome is ReadOutcome.IDLE and read.in_flight == 0
    assert "multiprocess" in read.detail and read.missing == ()


@pytest.mark.parametrize("change, why", [
    (lambda b: b + "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e9\n", "single-process"),
    (lambda b: b.replace('finished_reason="stop",model_name="tiny"} 0.0', 'finished_reason="stop"} 3.0'),
     "after 3 requests"),
    (lambda b: b.split("# HELP vllm:request_success_total")[0] + "# TYPE x counter\nx_total 0\n", "no vllm:request"),
    # Cut right after the declarations: the body ends on a declaration, whose samples may be cut.
    (lambda b: b.split("# HELP vllm:request_success_total")[0], "incomplete"),
    (lambda b: b.replace(declared("vllm:num_requests_waiting"), ""), "incomplete"),
])
def test_declared_but_unset_reads_zero_only_on_the_evidence(change, why):
    read = classify(change(NEVER_SERVED), VLLM)
    assert read.outcome is ReadOutcome.INCOMPLETE and why in read.detail, read.detail


def test_the_last_family_declared_is_never_unset():
    body = declared("vllm:num_requests_running") + NEVER_SERVED.replace(declared("vllm:num_requests_running"), "")
    body = body.replace(declared("vllm:num_requests_waiting"), "") + declared("vllm:num_requests_waiting")
    read = classify(body, VLLM)
    assert read.outcome is ReadOutcome.INCOMPLETE and "vllm:num_requests_waiting" in read.missing


def test_an_sglang_gauge_declared_without_series_is_missing():
    body = (declared("sglang:num_running_reqs") + declared("sglang:num_queue_reqs")
            + "# TYPE sglang:num_requests_total counter\nsglang:num_requests_total 0\n")
    assert classify(body).outcome is ReadOutcome.INCOMPLETE


def test_vllm_v0_swapped_requests_are_work():
    body = ('vllm:num_requests_running{engine="0"} 0\nvllm:num_requests_waiting{engine="0"} 0\n'
            'vllm:num_requests_swapped{engine="0"} 2\n')
    read = classify(body)
    assert read.outcome is ReadOutcome.BUSY and read.in_flight == 2


def test_the_pre_5357_prefill_transfer_queue_counts():
    body = "".join(f'sglang:{n}{{engine_type="prefill",tp_rank="0"}} {v}\n' for n, v in [
        ("num_running_reqs", 0), ("num_queue_reqs", 0), ("num_prefill_prealloc_queue_reqs", 0),
        ("num_prefill_infight_queue_reqs", 4)])
    read = classify(body, EngineHint(kind=EngineKind.SGLANG, role=Role.PREFILL, source="flag"))
    assert read.outcome is ReadOutcome.BUSY and read.in_flight == 4


def vllm_engines(*engines: str, value: int = 0) -> str:
    return "".join(f'vllm:{n}{{engine="{e}",model_name="tiny"}} {value}\n'
                   for n in ("num_requests_running", "num_requests_waiting") for e in engines)


def test_data_parallel_engines_are_summed():
    assert classify(vllm_engines("0", "1", value=1)).in_flight == 4
    assert classify(vllm_engines("0", "1")).outcome is ReadOutcome.IDLE


@pytest.mark.parametrize("argv, engines", [
    (None, ("1",)),  # before vllm#21257: only the last engine core's series
    (["vllm", "serve", "m", "--data-parallel-size", "2"], ("1",)),
    (["vllm", "serve", "m", "-dp", "4"], ("0", "1", "2")),
])
def test_data_parallel_with_an_engines_series_absent_never_reads_idle(argv, engines):
    hint = hint_from_argv(argv) if argv else EngineHint()
    assert hint is not None
    read = classify(vllm_engines(*engines), hint)
    assert read.outcome is ReadOutcome.INCOMPLETE
    assert "21257" in read.detail and "0.10.1" in read.detail and "held" in read.detail


def test_an_external_balancers_one_rank_reads_idle():
    hint = hint_from_argv(["vllm", "serve", "m", "-dp", "4", "--data-parallel-rank", "3"])
    assert hint is not None and hint.data_parallel_engines == 1
    assert classify(vllm_engines("3"), hint).outcome is ReadOutcome.IDLE


def sglang_pp(*ranks: str) -> str:
    return "".join(f'sglang:{n}{{engine_type="unified",tp_rank="0",pp_rank="{r}"}} 0\n'
                   for n in ("num_running_reqs", "num_queue_reqs") for r in ranks)


def test_sglang_pipeline_parallel_never_reads_idle():
    read = classify(sglang_pp("0", "1"))
    assert read.outcome is ReadOutcome.INCOMPLETE and "32158" in read.detail and "--pp-size" in read.detail
    hint = hint_from_argv(["python", "-m", "sglang.launch_server", "--pp-size", "2"])
    assert hint is not None and hint.pipeline_parallel_size == 2
    assert classify(sglang_pp("0"), hint).outcome is ReadOutcome.INCOMPLETE
    assert classify(sglang_pp("0")).outcome is ReadOutcome.IDLE


def test_drain_started_says_what_the_argv_already_tells():
    pp = hint_from_argv(["python", "-m", "sglang.launch_server", "--pp-size", "2"])
    dp = hint_from_argv(["vllm", "serve", "m", "--data-parallel-size", "2"])
    assert pp is not None and dp is not None
    assert any("32158" in w for w in start_words(pp)) and any("21257" in w for w in start_words(dp))
    assert start_words(hint_from_argv(["vllm", "serve", "m"]) or EngineHint()) == ()


def test_an_engine_core_that_has_not_stepped_is_known_by_its_counter():
    # Multiprocess mode: engine 1 has run nothing (its gauges unset), but its logger made its counter.
    counter = "".join(f'vllm:request_success_total{{engine="{e}",finished_reason="stop"}} 0\n' for e in "01")
    hint = hint_from_argv(["vllm", "serve", "m", "-dp", "2"])
    assert hint is not None
    assert classify(vllm_engines("0") + counter, hint).outcome is ReadOutcome.IDLE
    # Before vllm#21257 the counter, too, is the last engine's only.
    last_only = 'vllm:request_success_total{engine="1",finished_reason="stop"} 0\n'
    assert classify(vllm_engines("1") + last_only, hint).outcome is ReadOutcome.INCOMPLETE
