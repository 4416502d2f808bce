"""Load through the router makes the work gauges rise and fall; the router tallies every outcome."""

from __future__ import annotations

import socket
import threading
import time

from prometheus_client.parser import text_string_to_metric_families as parse_text

from emulation.engine_process import EngineProcess
from emulation.load import LoadGenerator, MixedDurations, RequestOutcome, UniformDurations


def gauges(engine: EngineProcess, *names: str) -> dict[str, float]:
    """Each named gauge summed over its series; absent ones are missing from the answer."""
    families = {f.name: f for f in parse_text(engine.metrics_text())}
    return {n: sum(s.value for s in families[n].samples) for n in names if n in families}


def test_vllm_running_and_waiting_rise_and_fall():
    with EngineProcess("--kind", "vllm", "--max-running", "2") as engine:
        names = ("vllm:num_requests_running", "vllm:num_requests_waiting")
        assert gauges(engine, *names) == {names[0]: 0.0, names[1]: 0.0}
        load = LoadGenerator(engine.base_url, concurrency=5, durations=UniformDurations(0.6, 0.6),
                             max_requests=5).start()
        time.sleep(0.3)
        assert gauges(engine, *names) == {names[0]: 2.0, names[1]: 3.0}
        tally = load.wait(timeout_s=10)
        assert (tally.completed, tally.cut, tally.in_flight) == (5, 0, 0)
        assert gauges(engine, *names) == {names[0]: 0.0, names[1]: 0.0}
        families = {f.name: f for f in parse_text(engine.metrics_text())}
        success = {s.labels["finished_reason"]: s.value for s in families["vllm:request_success"].samples
                   if s.name.endswith("_total")}
        assert success["stop"] == 5.0
        assert engine.stats()["completed"] == 5


def test_sglang_prefill_shows_work_in_its_queues():
    """2.5 s requests, one slot: bootstrap 0-0.5 s, run 0.5-2 s (the second waits), KV out 2-2.5 s."""
    with EngineProcess("--kind", "sglang", "--role", "prefill", "--max-running", "1") as engine:
        bootstrap, queue, running, inflight = (
            "sglang:num_prefill_bootstrap_queue_reqs", "sglang:num_queue_reqs", "sglang:num_running_reqs",
            "sglang:num_prefill_inflight_queue_reqs")
        load = LoadGenerator(engine.base_url, concurrency=2, durations=UniformDurations(2.5, 2.5),
                             max_requests=2).start()
        started_at = time.monotonic()

        def read_at(at_s: float) -> dict[str, float]:
            time.sleep(max(0.0, started_at + at_s - time.monotonic()))
            return gauges(engine, bootstrap, queue, running, inflight)

        assert read_at(0.25) == {bootstrap: 2.0, queue: 0.0, running: 0.0, inflight: 0.0}
        assert read_at(1.25) == {bootstrap: 0.0, queue: 1.0, running: 1.0, inflight: 0.0}
        assert read_at(2.25) == {bootstrap: 0.0, queue: 0.0, running: 1.0, inflight: 1.0}
        assert load.wait(timeout_s=10).completed == 2


def test_sglang_decode_gauges_appear_after_first_run():
    with EngineProcess("--kind", "sglang", "--role", "decode") as engine:
        assert "sglang:num_running_reqs" not in engine.metrics_text()
        load = LoadGenerator(engine.base_url, concurrency=1, durations=UniformDurations(1.0, 1.0),
                             max_requests=1).start()
        time.sleep(0.05)  # in prealloc: nothing published yet
        assert "sglang:num_running_reqs" not in engine.metrics_text()
        time.sleep(0.4)
        now = gauges(engine, "sglang:num_running_reqs", "sglang:num_decode_prealloc_queue_reqs")
        assert now == {"sglang:num_running_reqs": 1.0, "sglang:num_decode_prealloc_queue_reqs": 0.0}
        load.wait(timeout_s=10)


def test_rate_mode_is_seeded_and_streams_complete():
    with EngineProcess("--kind", "vllm") as engine:
        durations = MixedDurations(((0.5, 0.1, 0.2), (0.5, 0.2, 0.3)))
        load = LoadGenerator(engine.base_url, rate_per_s=20, durations=durations, seed=3, stream=True).start()
        time.sleep(0.6)
        tally = load.wait(timeout_s=10)
        assert tally.completed == tally.sent > 3
        again = LoadGenerator(engine.base_url, rate_per_s=20, durations=durations, seed=3, max_requests=5).start()
        first = [r.duration_s for r in sorted(tally.records, key=lambda r: r.index)][:5]
        assert [r.duration_s for r in sorted(again.wait(10).records, key=lambda r: r.index)] == first


def test_refused_when_nothing_listens():
    with EngineProcess("--kind", "vllm") as engine:
        url = engine.base_url
    tally = LoadGenerator(url, concurrency=1, max_requests=2).start().wait(timeout_s=10)
    assert tally.refused == 2 and {r.outcome for r in tally.records} == {RequestOutcome.REFUSED}


def _one_structured_request(engine: EngineProcess, grammar_s: float, duration_s: float) -> threading.Thread:
    thread = threading.Thread(target=engine.request, args=("POST", "/v1/completions",
                                                           {"duration_s": duration_s, "grammar_s": grammar_s}),
                              kwargs={"timeout_s": 30}, daemon=True)
    thread.start()
    return thread


def test_sglang_shows_a_request_waiting_for_its_grammar_in_the_grammar_queue_only():
    # As the real SGLang 0.5.23 does (docs/engines.md, "structured"): the grammar manager holds it,
    # outside waiting_queue, until its grammar is compiled.
    with EngineProcess("--kind", "sglang") as engine:
        names = ("sglang:num_grammar_queue_reqs", "sglang:num_queue_reqs", "sglang:num_running_reqs")
        thread = _one_structured_request(engine, grammar_s=1.5, duration_s=1.0)
        time.sleep(0.5)
        assert gauges(engine, *names) == {names[0]: 1.0, names[1]: 0.0, names[2]: 0.0}
        time.sleep(1.5)
        assert gauges(engine, *names) == {names[0]: 0.0, names[1]: 0.0, names[2]: 1.0}
        thread.join(10)


def test_vllm_counts_a_request_compiling_its_grammar_as_waiting():
    with EngineProcess("--kind", "vllm") as engine:
        names = ("vllm:num_requests_waiting", "vllm:num_requests_running")
        thread = _one_structured_request(engine, grammar_s=1.5, duration_s=0.5)
        time.sleep(0.5)
        assert gauges(engine, *names) == {names[0]: 1.0, names[1]: 0.0}
        thread.join(10)


def test_the_router_gives_up_at_its_timeout_not_at_the_next_whole_second():
    """aiohttp rounds a deadline of 5 s or more up to the loop clock's next whole second; the bench's
    router must not, since an aborting vLLM stays exactly until its clients give up. The request is
    sent just after a whole second of the monotonic clock (asyncio's), where rounding costs ~0.9 s."""
    timeout_s = 5.0
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts, never answers
        port = silent.getsockname()[1]
        while not 0.02 <= time.monotonic() % 1.0 <= 0.06:
            time.sleep(0.005)
        tally = LoadGenerator(f"http://127.0.0.1:{port}", concurrency=1, max_requests=1,
                              request_timeout_s=timeout_s).start().wait(timeout_s=timeout_s + 5)
    (record,) = tally.records
    assert record.outcome is RequestOutcome.CUT and record.detail == "no full response in time"
    assert timeout_s <= record.ended_at - record.started_at < timeout_s + 0.6, record  # rounded: ~0.9 s late
