"""Each outcome class of the hook, as /v1/work reports it, from a real misbehaving engine."""

import time

import pytest

from emulation.engine_process import EngineProcess
from emulation.raw_server import RawServer, canned
from .sidecar_process import SidecarProcess, kill_now

# mode (and its parameters) -> (outcome, verdict, complete)
MISBEHAVIOURS = {
    "http500": ({}, "http_error", "unmeasurable"),
    "redirect": ({}, "http_error", "unmeasurable"),
    "hang": ({}, "timeout", "busy"),
    "drip": ({}, "timeout", "busy"),
    "slow-headers": ({}, "timeout", "busy"),
    # An HTML error page holds no line of a work family: the hook reads every gauge missing.
    "garbage": ({}, "incomplete", "busy"),
    "nan": ({}, "invalid_value", "busy"),
    "negative": ({}, "invalid_value", "busy"),
    "inf": ({}, "invalid_value", "busy"),
    "huge": ({"size_mb": 2}, "too_large", "busy"),  # over the fixture's 1 MiB cap
    "missing": ({}, "incomplete", "busy"),
}


@pytest.mark.parametrize("mode", list(MISBEHAVIOURS))
def test_misbehaving_engine(sidecar, vllm_engine, mode):
    params, outcome, verdict = MISBEHAVIOURS[mode]
    vllm_engine.misbehave(mode, **params)
    try:
        body = sidecar.work()
    finally:
        vllm_engine.misbehave("none")
    assert body["read"]["outcome"] == outcome, body["read"]
    assert body["read"]["verdict"] == verdict
    assert body["read"]["complete"] is False and body["read"]["idle"] is False
    if mode == "missing":
        assert body["read"]["missing"] == ["vllm:num_requests_waiting"]
        assert body["read"]["gauges"] == {"vllm:num_requests_running": 0.0}
        assert body["read"]["in_flight"] == 0
    if outcome == "http_error":
        assert body["read"]["http_status"] in (500, 302)
    if outcome in ("timeout", "invalid_value"):
        assert body["read"]["in_flight"] is None
    assert sidecar.get_json("/readyz")[0] == 200  # a broken engine never makes the sidecar unready
    assert sidecar.work()["read"]["outcome"] == "idle"


def _read_until(sidecar, predicate, timeout_s=5.0):
    deadline_at = time.monotonic() + timeout_s
    while True:
        body = sidecar.work()
        if predicate(body) or time.monotonic() > deadline_at:
            return body
        time.sleep(0.05)


def test_refused_and_back_bumps_incarnation(sidecar, vllm_engine):
    before = sidecar.work()["engine"]["incarnation"]
    vllm_engine.misbehave("refuse", down_s=1.0)
    refused = _read_until(sidecar, lambda b: b["read"]["outcome"] == "refused")
    assert refused["read"]["verdict"] == "unmeasurable" and refused["read"]["complete"] is False
    assert refused["read"]["engine"] == "vllm"  # from --engine, even when nothing answers
    assert refused["engine"]["incarnation"] == before
    back = _read_until(sidecar, lambda b: b["read"]["outcome"] != "refused")
    assert back["read"]["outcome"] == "idle"
    assert back["engine"]["incarnation"] == before + 1
    assert back["engine"]["incarnation_evidence"] == "listener_returned"
    assert back["engine"]["incarnation_changed_at_seq"] == back["read"]["seq"]


def test_restart_unseen_by_any_read_bumps_incarnation_by_start_time(sidecar, vllm_engine):
    first = sidecar.work()
    vllm_engine.misbehave("restart", down_s=0.2)
    deadline_at = time.monotonic() + 5
    while True:  # wait for the new process, asking the emulator itself, not the sidecar
        assert time.monotonic() < deadline_at, "the emulator did not restart"
        try:
            if vllm_engine.stats()["start_time"] != first["engine"]["process_start_time"]:
                break
        except OSError:
            pass  # down: the restart is under way
        time.sleep(0.05)
    after = sidecar.work()
    assert after["engine"]["process_start_time"] != first["engine"]["process_start_time"]
    assert after["engine"]["incarnation"] == first["engine"]["incarnation"] + 1
    assert after["engine"]["incarnation_evidence"] == "start_time_changed"
    assert sidecar.work()["engine"]["incarnation"] == after["engine"]["incarnation"]  # once per restart


def test_tls_handshake_failure(vllm_engine):
    # The engine serves plain HTTP; a sidecar told https fails the handshake.
    with SidecarProcess("--port", str(vllm_engine.port), "--scheme", "https", "--engine", "vllm") as s:
        body = s.work()
    assert body["read"]["outcome"] == "tls_error"
    assert body["read"]["verdict"] == "unmeasurable"


@pytest.mark.parametrize("reply, outcome", [
    (b"", "reset"),  # accepted, then closed with no response
    (b"SSH-2.0-OpenSSH_9.6\r\n\r\n", "unparseable"),  # not HTTP at all
    (b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n\xff\xfe\xfd\xfc", "unparseable"),  # not UTF-8
])
def test_listeners_that_are_not_a_metrics_endpoint(reply, outcome):
    with RawServer(canned(reply)) as listener, SidecarProcess("--port", str(listener.port), "--engine", "sglang") as s:
        body = s.work()
    assert body["read"]["outcome"] == outcome, body["read"]
    assert body["read"]["verdict"] == "busy"
    assert body["read"]["engine"] == "sglang"


def test_sglang_decode_before_its_first_request_is_incomplete_and_restart_without_start_time():
    with EngineProcess("--kind", "sglang", "--role", "decode") as engine, \
            SidecarProcess("--port", str(engine.port)) as s:
        body = s.work()
        assert body["read"]["engine"] == "sglang" and body["read"]["role"] == "decode"
        assert body["read"]["outcome"] == "incomplete" and body["read"]["complete"] is False
        assert body["engine"]["process_start_time"] is None  # prometheus multiprocess mode
        assert len(body["read"]["missing"]) == 4
        engine.request("POST", "/v1/completions", {"duration_s": 0.05})
        body = _read_until(s, lambda b: b["read"]["complete"])
        assert body["read"]["outcome"] == "idle" and body["read"]["missing"] == []
        before = body["engine"]["incarnation"]
        engine.misbehave("restart", down_s=1.0)
        _read_until(s, lambda b: b["read"]["outcome"] == "refused")
        back = _read_until(s, lambda b: b["read"]["outcome"] != "refused")
        assert back["engine"]["incarnation"] == before + 1
        assert back["engine"]["incarnation_evidence"] == "listener_returned"
        assert back["read"]["outcome"] == "incomplete"  # a fresh decode process: no gauges yet
        kill_now(engine)
