"""Each outcome class of the hook, as /v1/work reports it, from a real misbehaving engine."""

import time

import pytest

from emulation.engine_process import EngineProcess
from emulation.raw_server import RawServer, canned
from modeldrain.sidecar.sampler import Evidence, IncarnationTracker, Observation, RunTracker

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


def test_sglang_without_enable_metrics_says_why_nothing_can_be_measured():
    # Issue 26: SGLang serves /metrics only with --enable-metrics; FastAPI answers the route 404.
    reply = b'HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 22\r\n\r\n{"detail":"Not Found"}'
    with RawServer(canned(reply)) as listener, SidecarProcess("--port", str(listener.port), "--engine", "sglang") as s:
        body = s.work()
    assert body["read"]["verdict"] == "unmeasurable" and body["read"]["http_status"] == 404
    assert "--enable-metrics" in body["read"]["detail"], body["read"]


def test_a_vllm_never_served_in_multiprocess_mode_reads_idle():
    # Issue 26: --api-server-count 2 before any request: the work gauges declared with no series.
    with EngineProcess("--kind", "vllm", "--multiprocess") as engine, SidecarProcess("--port", str(engine.port)) as s:
        body = s.work()
    assert body["read"]["outcome"] == "idle" and body["read"]["in_flight"] == 0, body["read"]
    assert "multiprocess" in body["read"]["detail"]


def test_sglang_pipeline_parallel_is_held_with_the_rule_in_words():
    series = "".join(f'sglang:{n}{{engine_type="unified",tp_rank="0",pp_rank="{r}"}} 0\n'
                     for n in ("num_running_reqs", "num_queue_reqs") for r in "01").encode()
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(series), series)
    with RawServer(canned(reply)) as listener, SidecarProcess("--port", str(listener.port)) as s:
        body = s.work()
    assert body["read"]["verdict"] == "busy" and "32158" in body["read"]["detail"], body["read"]


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


# --- which process answered: the incarnation tracker (pure) ---

UP = Observation(answered=True)
DOWN = Observation(answered=False)


def feed(tracker, *observations):
    return [tracker.observe(seq, obs) for seq, obs in enumerate(observations, 1)]


def test_first_process_is_zero_even_after_loading_refusals():
    # A native sidecar starts before its engine: refusals before the first answer are not a restart.
    states = feed(IncarnationTracker(), DOWN, DOWN, Observation(True, 100.0), UP)
    assert [s.value for s in states] == [0, 0, 0, 0]
    assert states[-1].evidence is None


def test_changed_start_time_bumps_once():
    states = feed(IncarnationTracker(), Observation(True, 100.0), Observation(True, 100.0),
                  Observation(True, 200.0), Observation(True, 200.0))
    assert [s.value for s in states] == [0, 0, 1, 1]
    assert states[2].evidence is Evidence.START_TIME_CHANGED and states[2].changed_at_seq == 3


def test_a_start_time_missing_from_some_reads_is_not_a_change():
    # A timeout or unparseable read carries no start time: that is not evidence.
    states = feed(IncarnationTracker(), Observation(True, 100.0), Observation(True, None), Observation(True, 100.0))
    assert states[-1].value == 0


def test_listener_away_and_back_bumps_once_even_with_a_new_start_time():
    states = feed(IncarnationTracker(), Observation(True, 100.0), DOWN, DOWN, Observation(True, 200.0), UP)
    assert [s.value for s in states] == [0, 0, 0, 1, 1]
    assert states[3].evidence is Evidence.START_TIME_CHANGED


def test_listener_back_without_start_time_is_its_own_evidence():
    # SGLang (prometheus multiprocess mode) serves no process_start_time_seconds.
    states = feed(IncarnationTracker(), UP, DOWN, UP, DOWN, UP)
    assert [s.value for s in states] == [0, 0, 1, 1, 2]
    assert states[-1].evidence is Evidence.LISTENER_RETURNED and states[-1].changed_at_seq == 5


def test_counter_going_backwards_bumps_and_restarts_the_baseline():
    served = lambda n: Observation(True, counters={"served": n})  # noqa: E731
    states = feed(IncarnationTracker(), served(10), served(12), served(1), served(3), served(2))
    assert [s.value for s in states] == [0, 0, 1, 1, 2]
    assert states[2].evidence is Evidence.COUNTER_WENT_BACKWARDS


# --- where the idle run began: the run tracker (pure) ---

def test_a_run_begins_at_its_first_idle_read_and_ends_at_any_other():
    tracker = RunTracker()
    seen = [tracker.observe(seq, idle=idle, incarnation=0)
            for seq, idle in [(1, False), (2, True), (3, True), (5, True), (6, False), (7, True)]]
    assert seen == [None, 2, 2, 2, None, 7]  # seq 4 went to nobody: the run still holds across it


def test_a_new_engine_incarnation_starts_a_new_run_even_when_idle():
    tracker = RunTracker()
    assert tracker.observe(1, idle=True, incarnation=0) == 1
    assert tracker.observe(2, idle=True, incarnation=0) == 1
    assert tracker.observe(3, idle=True, incarnation=1) == 3
    assert tracker.observe(4, idle=True, incarnation=1) == 3
