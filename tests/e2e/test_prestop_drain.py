"""The real prestop against the emulated engine over real sockets: every row of the contract."""

from __future__ import annotations

import threading
import time

import pytest

from emulation.engine_process import EngineProcess, free_port
from tests.engine_work import send_requests

from .prestop_run import FAST, FAST_DEADLINE_S, run_prestop


@pytest.fixture
def vllm():
    with EngineProcess("--kind", "vllm") as engine:
        yield engine


def test_idle_replica_returns_about_6s_after_exec_with_real_defaults(vllm):
    run = run_prestop("--port", str(vllm.port), "--engine", "vllm")
    assert run.code == 0, run.stderr
    fin = run.finished
    assert fin["event"] == "drain_finished" and fin["outcome"] == "idle" and fin["reads"] == 2
    assert fin["in_flight"] == 0
    assert 5.9 <= fin["elapsed_s"] <= 7.0 and 5.9 <= run.elapsed_s <= 7.5
    started = run.event("drain_started")
    assert started["first_read_s"] == 5.0 and started["deadline_s"] == 25.0


def test_busy_then_idle_waits_for_the_work(vllm):
    threads = send_requests(vllm, 4, duration_s=3.0)
    t0 = time.monotonic()
    run = run_prestop(*FAST, "--grace", "30", "--port", str(vllm.port))
    assert run.code == 0, run.stderr
    for t in threads:
        t.join(5)
    assert vllm.stats()["completed"] == 4
    busy = [e for e in run.events if e.get("outcome") == "busy"]
    assert busy and busy[0]["in_flight"] == 4
    # Returned after the work finished (~3 s), one idle read later, not at the deadline.
    assert 3.0 <= time.monotonic() - t0 <= 8.0
    assert run.finished["outcome"] == "idle"


def test_busy_past_the_deadline_returns_at_g_minus_5_never_later(vllm):
    send_requests(vllm, 2, duration_s=60)
    run = run_prestop("--route-wait", "1", "--grace", "9", "--port", str(vllm.port))
    assert run.code == 10, run.stderr
    fin = run.finished
    assert fin["outcome"] == "deadline" and fin["in_flight"] == 2
    assert "2 in flight" in fin["reason"]
    assert 4.0 <= fin["elapsed_s"] <= 4.3
    assert run.elapsed_s <= 4.5


def test_refused_ends_at_once_after_the_route_wait():
    run = run_prestop(*FAST, "--port", str(free_port()), "--engine", "vllm")
    assert run.code == 11
    assert run.finished["outcome"] == "unmeasurable" and "refused" in run.finished["reason"]
    # "At once": after the 1 s route wait, not at the 3 s deadline. The margin is what a loaded
    # 2-core CI worker adds to a refused connect (1.506 s measured there).
    assert 1.0 <= run.finished["elapsed_s"] <= FAST_DEADLINE_S - 0.5


@pytest.mark.parametrize("mode", ["http500", "redirect"])
def test_http_error_and_redirect_end_at_once(vllm, mode):
    vllm.misbehave(mode)
    run = run_prestop(*FAST, "--port", str(vllm.port))
    assert run.code == 11, run.stderr
    assert run.finished["outcome"] == "unmeasurable"
    assert "HTTP 5" in run.finished["reason"] or "HTTP 3" in run.finished["reason"]


def test_https_expected_but_engine_speaks_plain_http(vllm):
    run = run_prestop(*FAST, "--port", str(vllm.port), "--scheme", "https")
    assert run.code == 11, run.stderr
    assert "TLS" in run.finished["reason"]


@pytest.mark.parametrize("mode, outcome", [
    ("hang", "timeout"),
    ("drip", "timeout"),
    ("slow-headers", "timeout"),
    ("garbage", "incomplete"),
    ("nan", "invalid_value"),
    ("negative", "invalid_value"),
    ("inf", "invalid_value"),
    ("huge", "too_large"),
    ("missing", "incomplete"),
])
def test_unreadable_engine_counts_as_busy_until_the_deadline(vllm, mode, outcome):
    vllm.misbehave(mode)
    run = run_prestop(*FAST, "--port", str(vllm.port), "--engine", "vllm")
    assert run.code == 10, run.stderr
    states = [e["outcome"] for e in run.events if e["event"] == "read_state"]
    assert states == [outcome]
    assert run.finished["outcome"] == "deadline" and "unknown" in run.finished["reason"]
    # Never later than the deadline, even when a read is mid-drip at the deadline.
    assert FAST_DEADLINE_S <= run.finished["elapsed_s"] <= FAST_DEADLINE_S + 0.3


def test_missing_gauge_is_named(vllm):
    vllm.misbehave("missing", gauge="vllm:num_requests_waiting")
    run = run_prestop(*FAST, "--port", str(vllm.port))
    state = run.event("read_state")
    assert state["missing"] == ["vllm:num_requests_waiting"]


def test_recovering_engine_drains_idle(vllm):
    vllm.misbehave("hang")
    # Hung well past the route wait (1 s) and a slow hook start on a loaded machine (2 s was not
    # always: the first read then found it recovered), so the first read times out.
    threading.Timer(4.0, vllm.misbehave, args=("none",)).start()
    run = run_prestop("--route-wait", "1", "--grace", "30", "--port", str(vllm.port), "--read-timeout", "0.5")
    assert run.code == 0
    outcomes = [e["outcome"] for e in run.events if e["event"] == "read_state"]
    assert outcomes[0] == "timeout" and outcomes[-1] == "idle" and set(outcomes) == {"timeout", "idle"}
