"""drain-sidecar's /v1/work on real engines: idle when nothing runs, busy while requests run."""

from __future__ import annotations

import json
import time

import pytest

from emulation.load import LoadGenerator, UniformDurations
from engines.servers import completion_body
from tests.sidecar.sidecar_process import SidecarProcess

pytestmark = pytest.mark.engines

# Long requests, so that the reads during the load land while they run.
LONG_REQUESTS = UniformDurations(12.0, 12.0)
CONCURRENCY = 4
# How long the gauges may take to count requests already sent: vLLM's after its API server
# (0.1-1.3 s measured), SGLang's after its tokenizer manager and its next stats tick (up to 3.5 s
# measured at load 15, docs/engines.md); the bound is for a loaded machine.
COUNTED_WITHIN_S = 10.0


def work(sidecar: SidecarProcess) -> dict:
    status, body, _ = sidecar.request("GET", "/v1/work")
    assert status == 200, body
    return json.loads(body)["read"]


def reads_idle_then_busy(engine, kind: str) -> None:
    with SidecarProcess("--port", str(engine.port), "--pod-name", "p", "--pod-namespace", "n",
                        "--pod-uid", "u") as sidecar:
        idle = work(sidecar)
        assert idle["engine"] == kind and idle["complete"] and idle["idle"] and idle["verdict"] == "idle", idle
        load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=LONG_REQUESTS, seed=1,
                             max_requests=CONCURRENCY, request_body=completion_body(engine.kind)).start()
        deadline_at = time.monotonic() + COUNTED_WITHIN_S
        while (busy := work(sidecar))["in_flight"] != CONCURRENCY and time.monotonic() < deadline_at:
            time.sleep(0.2)
        assert busy["verdict"] == "busy" and not busy["idle"] and busy["in_flight"] == CONCURRENCY, busy
        assert load.tally().in_flight == CONCURRENCY, "the requests ended before the read: nothing measured"
        tally = load.wait(timeout_s=60)
        assert tally.completed == CONCURRENCY, tally.summary()
        # The last response is out: the gauges may lag it by a tick, never by many.
        deadline_at = time.monotonic() + 10
        while not (after := work(sidecar))["idle"] and time.monotonic() < deadline_at:
            time.sleep(0.2)
        assert after["idle"] and after["verdict"] == "idle", after


def test_the_sidecar_reads_a_real_vllm_idle_then_busy_then_idle(vllm):
    reads_idle_then_busy(vllm, "vllm")


def test_the_sidecar_reads_a_real_sglang_idle_then_busy_then_idle(sglang):
    reads_idle_then_busy(sglang, "sglang")
