"""SGLang's HTTP gauge, `sglang:http_requests_active`: every route's series counts but the few that
hold no work (the scrape itself, probes, info). Over the real scrapes and hostile variants of
them, each read also by the oracle (prometheus-client's own parse, tests/hook/metrics_oracle.py).
"""

from __future__ import annotations

import re
import time

import pytest

from modeldrain.hook.engine import EngineHint
from modeldrain.hook.gauges import (
    SGLANG_HTTP_ACTIVE,
    SGLANG_HTTP_ACTIVE_GAUGE,
    SGLANG_NOT_WORK_ROUTES,
    EngineKind,
    Role,
    gauge_set,
)
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.reader import classify_body

from .metrics_oracle import oracle_series, oracle_verdict

TEXT = "text/plain; version=0.0.4"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
IDLE = "sglang-0.5.23-cpu-metrics-idle.txt"
BUSY = "sglang-0.5.23-cpu-metrics-busy.txt"
PREFILL_IDLE = "sglang-0.5.23-cpu-metrics-prefill-idle.txt"
DECODE_IDLE = "sglang-0.5.23-cpu-metrics-decode-idle.txt"
HTTP_SERIES = re.compile(r"^sglang:http_requests_active\{.*\n", re.MULTILINE)
HTTP_FAMILY = re.compile(r"^# (?:HELP|TYPE) sglang:http_requests_active .*\n|^sglang:http_requests_active\{.*\n",
                         re.MULTILINE)
TYPE_LINE = "# TYPE sglang:http_requests_active gauge\n"


def scrape(fixtures_dir, name: str) -> str:
    return (fixtures_dir / name).read_text()


def with_series(text: str, *lines: str) -> bytes:
    """The scrape with its HTTP gauge's series replaced by `lines` (after its TYPE line)."""
    assert TYPE_LINE in text
    text = HTTP_SERIES.sub("", text)
    return text.replace(TYPE_LINE, TYPE_LINE + "".join(line + "\n" for line in lines)).encode()


def read(body: bytes, role: Role = Role.UNIFIED, content_type: str = TEXT) -> Read:
    """The reader's verdict, checked against the oracle's wherever the oracle accepts the body and the
    reader gives a definite answer (it may refuse what the oracle reads: never the other way)."""
    hint = EngineHint(kind=EngineKind.SGLANG, role=role, source="flag")
    base = Read(ReadOutcome.INCOMPLETE, 0.0, 0.0, kind=EngineKind.SGLANG, role=role)
    got = classify_body(base, body, content_type, hint, deadline_at=time.monotonic() + 30)
    series = oracle_series(body, content_type)
    if got.outcome is ReadOutcome.IDLE:
        assert series is not None and oracle_verdict(series, EngineKind.SGLANG, role).status == "idle"
    if series is not None and got.outcome is not ReadOutcome.UNPARSEABLE:
        verdict = oracle_verdict(series, EngineKind.SGLANG, role)
        expected = {"idle": ReadOutcome.IDLE, "busy": ReadOutcome.BUSY, "incomplete": ReadOutcome.INCOMPLETE,
                    "invalid": ReadOutcome.INVALID_VALUE}[verdict.status]
        assert got.outcome is expected, (got.outcome, got.detail, verdict)
        if expected is ReadOutcome.BUSY:
            assert got.in_flight == verdict.in_flight
    return got


def test_every_role_reads_it_and_none_requires_it():
    for role in Role:
        gauges = gauge_set(EngineKind.SGLANG, role)
        assert SGLANG_HTTP_ACTIVE in gauges.gauges and SGLANG_HTTP_ACTIVE not in gauges.required
    assert SGLANG_HTTP_ACTIVE not in gauge_set(EngineKind.VLLM).gauges


def test_the_deny_list_names_the_scrape_the_probes_and_the_info_routes_and_no_generation_route():
    assert {"/metrics", "/health", "/health_generate", "/model_info", "/server_info", "/v1/models"} \
        <= SGLANG_NOT_WORK_ROUTES
    for route in ("/generate", "/v1/completions", "/v1/chat/completions", "/v1/embeddings", "/encode"):
        assert SGLANG_HTTP_ACTIVE.holds_work({"endpoint": route, "method": "POST"})


def test_the_real_idle_scrape_reads_idle_though_its_own_scrape_counts_1(fixtures_dir):
    text = scrape(fixtures_dir, IDLE)
    assert 'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1.0' in text
    got = read(text.encode())
    assert got.outcome is ReadOutcome.IDLE and got.gauges[SGLANG_HTTP_ACTIVE_GAUGE] == 0


def test_the_real_busy_scrape_counts_each_request_once(fixtures_dir):
    # 4 running + 24 queued, and /generate 28: the same requests, so 28 in flight, not 56.
    got = read(scrape(fixtures_dir, BUSY).encode())
    assert got.outcome is ReadOutcome.BUSY and got.gauges[SGLANG_HTTP_ACTIVE_GAUGE] == 28
    assert got.in_flight == 28


def test_the_prefill_scrape_reads_idle(fixtures_dir):
    assert read(scrape(fixtures_dir, PREFILL_IDLE).encode(), Role.PREFILL).outcome is ReadOutcome.IDLE


def test_a_release_without_the_gauge_still_reads_complete(fixtures_dir):
    body = HTTP_FAMILY.sub("", scrape(fixtures_dir, IDLE)).encode()
    assert b"http_requests_active" not in body
    got = read(body)
    assert got.outcome is ReadOutcome.IDLE and not got.missing and SGLANG_HTTP_ACTIVE_GAUGE not in got.gauges
    busy = HTTP_FAMILY.sub("", scrape(fixtures_dir, BUSY)).encode()
    assert read(busy).in_flight == 28  # the scheduler's gauges alone


def test_only_routes_that_hold_no_work_non_zero_reads_idle(fixtures_dir):
    lines = [f'sglang:http_requests_active{{endpoint="{route}",method="GET"}} 3.0'
             for route in sorted(SGLANG_NOT_WORK_ROUTES)]
    got = read(with_series(scrape(fixtures_dir, IDLE), *lines))
    assert got.outcome is ReadOutcome.IDLE and got.in_flight == 0


@pytest.mark.parametrize("series", [
    'sglang:http_requests_active{endpoint="/generate",method="POST"} 1.0',
    'sglang:http_requests_active{endpoint="/v1/chat/completions",method="POST"} 1.0',
    # A route nobody listed (a later release's, an unmatched path): work, the safe side.
    'sglang:http_requests_active{endpoint="/v2/something_new",method="POST"} 1.0',
    # A series without the route label: nothing says it holds no work.
    'sglang:http_requests_active{method="GET"} 1.0',
    'sglang:http_requests_active 1.0',
    # Near misses of a denied route: not that route.
    'sglang:http_requests_active{endpoint="/metrics ",method="GET"} 1.0',
    'sglang:http_requests_active{endpoint="/Metrics",method="GET"} 1.0',
    'sglang:http_requests_active{endpoint="\\/metrics",method="GET"} 1.0',
    'sglang:http_requests_active{endpoint="/metrics\\n",method="GET"} 1.0',
    'sglang:http_requests_active{endpoint="/metrics\u200b",method="GET"} 1.0',
    'sglang:http_requests_active{endpoint="/metrics\\"",method="GET"} 1.0',
    # The route label under another name ('Endpoint') is another label.
    'sglang:http_requests_active{Endpoint="/metrics",method="GET"} 1.0',
], ids=lambda s: s[len("sglang:http_requests_active"):])
def test_work_on_any_other_route_reads_busy_while_the_scheduler_gauges_read_0(fixtures_dir, series):
    body = with_series(scrape(fixtures_dir, IDLE), 'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1.0',
                       series)
    got = read(body)
    assert got.outcome is ReadOutcome.BUSY and got.in_flight == 1, got.detail


def test_a_quoted_label_name_is_the_label_itself(fixtures_dir):
    # The text format's quoted label name is the same label: the scrape's series, still not work.
    body = with_series(scrape(fixtures_dir, IDLE), 'sglang:http_requests_active{"endpoint"="/metrics",method="GET"} 1.0')
    assert read(body).outcome is ReadOutcome.IDLE


def test_a_series_with_the_route_label_twice_is_unparseable(fixtures_dir):
    body = with_series(scrape(fixtures_dir, IDLE),
                       'sglang:http_requests_active{endpoint="/generate",endpoint="/metrics",method="POST"} 1.0')
    assert oracle_series(body, TEXT) is None
    assert read(body).outcome is ReadOutcome.UNPARSEABLE


def test_a_series_given_twice_counts_both_in_text_and_is_refused_in_openmetrics(fixtures_dir):
    twice = ['sglang:http_requests_active{endpoint="/generate",method="POST"} 0.0',
             'sglang:http_requests_active{endpoint="/generate",method="POST"} 2.0']
    got = read(with_series(scrape(fixtures_dir, IDLE), *twice))
    assert got.outcome is ReadOutcome.BUSY and got.in_flight == 2
    om = ("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0.0\n"
          "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 0.0\n"
          "# TYPE sglang:http_requests_active gauge\n" + "\n".join(twice) + "\n# EOF\n").encode()
    assert read(om, content_type=OPENMETRICS).outcome is not ReadOutcome.IDLE


def test_openmetrics_escaped_name_counts_too():
    body = ("# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs 0.0\n"
            "# TYPE sglang:num_queue_reqs gauge\nsglang:num_queue_reqs 0.0\n"
            "# TYPE sglang_http_requests_active gauge\n"
            'sglang_http_requests_active{endpoint="/metrics",method="GET"} 1.0\n'
            'sglang_http_requests_active{endpoint="/generate",method="POST"} 5.0\n# EOF\n').encode()
    got = read(body, content_type=OPENMETRICS)
    assert got.outcome is ReadOutcome.BUSY and got.in_flight == 5


@pytest.mark.parametrize("value", ["-1.0", "NaN", "+Inf"])
def test_a_broken_value_on_a_route_that_holds_no_work_is_still_invalid(fixtures_dir, value):
    body = with_series(scrape(fixtures_dir, IDLE), f'sglang:http_requests_active{{endpoint="/metrics",method="GET"}} {value}')
    assert read(body).outcome is ReadOutcome.INVALID_VALUE


def test_a_counter_typed_http_gauge_is_refused(fixtures_dir):
    # The one TYPE a work gauge may have (modeldrain/hook/work_names.py) holds for this one too.
    body = scrape(fixtures_dir, IDLE).replace(TYPE_LINE, "# TYPE sglang:http_requests_active counter\n").encode()
    assert read(body).outcome is ReadOutcome.UNPARSEABLE


def test_the_http_gauge_in_disguise_is_refused(fixtures_dir):
    text = scrape(fixtures_dir, IDLE)
    body = text + 'sglang:http_requests_active\u200b{endpoint="/generate",method="POST"} 4.0\n'
    assert read(body.encode()).outcome is ReadOutcome.UNPARSEABLE


def test_a_decode_server_holding_requests_its_queues_do_not_show_reads_busy(fixtures_dir):
    # The 7.31 s of docs/engines.md: a decode server's scheduler gauges all 0 (its families as a
    # served decode server publishes them), 8 requests in its /generate handlers.
    text = scrape(fixtures_dir, PREFILL_IDLE).replace('engine_type="prefill"', 'engine_type="decode"')
    body = with_series(text, 'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1.0',
                       'sglang:http_requests_active{endpoint="/generate",method="POST"} 8.0')
    got = read(body, Role.DECODE)
    assert got.outcome is ReadOutcome.BUSY and got.in_flight == 8


def test_a_decode_server_that_has_served_nothing_stays_incomplete(fixtures_dir):
    # Its HTTP gauge alone is no complete read: the required scheduler gauges are missing.
    body = with_series(scrape(fixtures_dir, DECODE_IDLE),
                       'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1.0')
    got = read(body, Role.DECODE)
    assert got.outcome is ReadOutcome.INCOMPLETE and "sglang:num_running_reqs" in got.missing
