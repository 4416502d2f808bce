"""bench/engines/lifecycle.py's arithmetic: what a row says about a signal, from samples and the client's clock."""

from bench.engines.lifecycle import COUNTED, ClientRequest, Sample, Scenario, gauges_of, summarize

RUNNING, WAITING = COUNTED["vllm"]


def test_a_row_measures_rise_uncounted_fall_and_the_zero_while_requests_were_out():
    records = [ClientRequest(sent_at=10.0, done_at=13.0), ClientRequest(sent_at=10.0, done_at=14.0)]
    samples = [
        Sample(10.0, {RUNNING: 0, WAITING: 0}, 2),   # both out, the gauges see neither: 2 uncounted
        Sample(10.5, {RUNNING: 0, WAITING: 0}, 2),
        Sample(11.0, {RUNNING: 1, WAITING: 1}, 2),   # counted 1.0 s after the last send
        Sample(13.5, {RUNNING: 1, WAITING: 0}, 1),
        Sample(14.2, {RUNNING: 0, WAITING: 0}, 0),   # zero 0.2 s after the last response
    ]
    row = summarize("vllm", "vllm", Scenario("s", "", lambda i: ("/", {}), count=2), records, samples, True)
    assert (row.rise_s, row.load_rise_s) == (1.0, 0.0)
    assert (row.max_uncounted, row.max_load_uncounted) == (2, 0)
    assert (row.fall_s, row.load_fall_s) == (0.2, 0.2)
    assert row.zero_while_out_s == 1.0  # 10.0-11.0: both out, the gauges at zero
    assert row.max_by_gauge == {RUNNING: 1, WAITING: 1, "/load": 2}


def test_gauges_are_summed_over_their_series_and_other_names_ignored():
    body = (b'vllm:num_requests_running{engine="0"} 2.0\nvllm:num_requests_running{engine="1"} 3.0\n'
            b'vllm:num_requests_waiting_by_reason{reason="capacity"} 7.0\n# HELP x\n')
    assert gauges_of(body, COUNTED["vllm"]) == {RUNNING: 5.0}


def test_the_split_role_bench_counts_the_http_gauge_of_the_generation_routes_alone() -> None:
    from bench.engines.split_roles import http_active_generation

    body = (b'sglang:http_requests_active{endpoint="/v1/completions",method="POST"} 3.0\n'
            b'sglang:http_requests_active{endpoint="/metrics",method="GET"} 1.0\n'  # the scrape reading it
            b'sglang:http_requests_active{method="POST",endpoint="/generate"} 2\n'
            b'sglang:num_running_reqs{endpoint="/generate"} 7\n')  # another gauge's series
    assert http_active_generation(body) == 5.0
