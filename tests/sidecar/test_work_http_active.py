"""/v1/work on an SGLang whose requests only its HTTP gauge shows (the tokenizer manager's window,
a decode server waiting on the prefill side): busy, as the hook reads it. A real sidecar process
reading a real socket that serves the real scrape, its HTTP gauge's series set by the test."""

from __future__ import annotations

import json

from emulation.raw_server import RawServer, canned, http_response
from tests.conftest import SCRAPES

from .sidecar_process import SidecarProcess

IDLE = (SCRAPES / "sglang-0.5.23-cpu-metrics-idle.txt").read_text()
GENERATE_IDLE = 'sglang:http_requests_active{endpoint="/generate",method="POST"} 0.0\n'
HEARTBEAT = 'tp_rank="0"} 5.109299374\n'  # the scheduler's heartbeat counter's value in the scrape


def serving(text: str):
    return canned(http_response(text.encode()))


def work(sidecar: SidecarProcess) -> dict:
    status, body, _ = sidecar.request("GET", "/v1/work")
    assert status == 200, body
    return json.loads(body)["read"]


def test_requests_only_the_http_gauge_counts_read_busy_then_idle_once_they_leave():
    assert GENERATE_IDLE in IDLE
    window = IDLE.replace(GENERATE_IDLE, GENERATE_IDLE.replace("0.0", "32.0"))
    with RawServer(serving(window)) as engine, \
            SidecarProcess("--port", str(engine.port), "--pod-name", "p", "--pod-namespace", "n", "--pod-uid", "u") \
            as sidecar:
        busy = work(sidecar)
        assert busy["engine"] == "sglang" and busy["complete"] and busy["verdict"] == "busy", busy
        assert busy["in_flight"] == 32 and busy["gauges"]["sglang:http_requests_active"] == 32
        assert busy["gauges"]["sglang:num_running_reqs"] == 0 and busy["gauges"]["sglang:num_queue_reqs"] == 0
        # The requests are gone, the scheduler's heartbeat moved (a zero newer than the read before:
        # modeldrain/hook/freshness.py); the scrape's own /metrics series still reads 1.
        assert HEARTBEAT in IDLE
        engine.set(serving(IDLE.replace(HEARTBEAT, HEARTBEAT.replace("5.109299374", "6.109299374"))))
        idle = work(sidecar)
        assert idle["verdict"] == "idle" and idle["idle"] and idle["gauges"]["sglang:http_requests_active"] == 0, idle
