"""Each misbehaviour, seen by a plain http.client / urllib reader."""

from __future__ import annotations

import http.client
import math
import socket
import time
import urllib.error
import urllib.request

import pytest
from prometheus_client.parser import text_string_to_metric_families as parse_text

from emulation.engine_process import EngineProcess


def values(text: str, name: str) -> list[float]:
    """Values of the samples called `name`."""
    return [s.value for f in parse_text(text) for s in f.samples if s.name == name]


def connect(engine: EngineProcess, timeout_s: float) -> http.client.HTTPConnection:
    return http.client.HTTPConnection("127.0.0.1", engine.port, timeout=timeout_s)


def test_http500(calm_vllm):
    calm_vllm.misbehave("http500")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(calm_vllm.base_url + "/metrics", timeout=5)
    assert error.value.code == 500


def test_redirect_points_at_an_idle_decoy(calm_vllm):
    calm_vllm.misbehave("redirect")
    status, _, headers = calm_vllm.request("GET", "/metrics")
    assert status == 302 and headers["Location"] == "/elsewhere/metrics"
    followed = urllib.request.urlopen(calm_vllm.base_url + "/metrics", timeout=5)  # urllib follows
    assert followed.geturl().endswith("/elsewhere/metrics")
    assert values(followed.read().decode(), "vllm:num_requests_running") == [0.0]


def test_hang_never_answers(calm_vllm):
    calm_vllm.misbehave("hang")
    connection = connect(calm_vllm, 0.5)
    connection.request("GET", "/metrics")
    with pytest.raises(TimeoutError):
        connection.getresponse()
    connection.close()


def test_drip_sends_headers_then_a_byte_per_interval(calm_vllm):
    calm_vllm.misbehave("drip", interval_s=0.2)
    connection = connect(calm_vllm, 5)
    connection.request("GET", "/metrics")
    response = connection.getresponse()
    assert response.status == 200 and int(response.getheader("Content-Length")) > 40_000
    started_at = time.monotonic()
    assert response.read(3) == b"# H"
    assert time.monotonic() - started_at >= 0.35
    connection.close()


def test_slow_headers_drip_the_status_line(calm_vllm):
    calm_vllm.misbehave("slow-headers", interval_s=0.1)
    sock = socket.create_connection(("127.0.0.1", calm_vllm.port), timeout=5)
    sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    started_at = time.monotonic()
    received = b""
    while len(received) < 5:
        received += sock.recv(100)
    assert received.startswith(b"HTTP/") and time.monotonic() - started_at >= 0.3
    sock.close()


def test_garbage_is_not_an_exposition(calm_vllm):
    calm_vllm.misbehave("garbage")
    status, body = calm_vllm.get("/metrics")
    assert status == 200
    with pytest.raises(ValueError):
        list(parse_text(body.decode()))


@pytest.mark.parametrize("mode, check", [
    ("nan", math.isnan), ("negative", lambda v: v == -1.0), ("inf", lambda v: v == math.inf)])
def test_distorted_work_gauges(calm_vllm, mode, check):
    calm_vllm.misbehave(mode)
    text = calm_vllm.metrics_text()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting"):
        assert values(text, name) and all(check(v) for v in values(text, name))


def test_huge_body(calm_vllm):
    calm_vllm.misbehave("huge", size_mb=5)
    status, body = calm_vllm.get("/metrics", timeout_s=10)
    assert status == 200 and len(body) >= 5 * 1024 * 1024
    assert values(body.decode(), "vllm:num_requests_running") == [0.0]  # still a valid exposition


def test_missing_gauge(calm_vllm):
    calm_vllm.misbehave("missing")
    text = calm_vllm.metrics_text()
    assert not values(text, "vllm:num_requests_waiting") and values(text, "vllm:num_requests_running")
    calm_vllm.misbehave("missing", gauge="vllm:num_requests_running")
    assert not values(calm_vllm.metrics_text(), "vllm:num_requests_running")


def test_bad_control_requests_say_why(calm_vllm):
    status, body, _ = calm_vllm.request("POST", "/control/misbehave", {"mode": "explode"})
    assert status == 400 and b"unknown mode" in body
    status, body, _ = calm_vllm.request("POST", "/control/misbehave", {"mode": "huge", "size_mb": -1})
    assert status == 400 and b"size_mb" in body


def test_refuse_then_back():
    with EngineProcess("--kind", "vllm") as engine:
        in_flight = engine.connection(10)
        in_flight.request("POST", "/v1/completions", body=b'{"duration_s": 0.5}',
                          headers={"Content-Type": "application/json"})
        engine.misbehave("refuse", down_s=0.8)
        with pytest.raises(ConnectionRefusedError):
            engine.get("/metrics")
        assert in_flight.getresponse().status == 200  # established connections carry on
        time.sleep(0.6)
        assert engine.get("/metrics")[0] == 200


def test_restart_is_a_fresh_process():
    with EngineProcess("--kind", "vllm") as engine:
        engine.request("POST", "/v1/completions", {"duration_s": 0.0})
        before = engine.metrics_text()
        assert values(before, "vllm:request_success_total")[0] == 1.0
        in_flight = engine.connection(10)
        in_flight.request("POST", "/v1/completions", body=b'{"duration_s": 5.0}',
                          headers={"Content-Type": "application/json"})
        time.sleep(0.2)
        engine.misbehave("restart", down_s=0.5)
        with pytest.raises(http.client.RemoteDisconnected):
            in_flight.getresponse()  # a dying process answers nothing
        with pytest.raises(ConnectionRefusedError):
            engine.get("/metrics")
        time.sleep(0.6)
        after = engine.metrics_text()
        assert values(after, "process_start_time_seconds")[0] > values(before, "process_start_time_seconds")[0]
        assert values(after, "vllm:request_success_total")[0] == 0.0
        stats = engine.stats()
        assert stats["incarnation"] == 2 and stats["aborted"] == 1 and stats["completed"] == 1
