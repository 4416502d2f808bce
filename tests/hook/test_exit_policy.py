"""When prestop hands an SGLang server's drain to SGLang itself (modeldrain/hook/exit_policy.py), and the loop
that does it (modeldrain/hook/drain.py) with an injected clock, reader and /health."""

import time
from dataclasses import replace

import pytest

from modeldrain.hook.decision import DrainOutcome
from modeldrain.hook.drain import run_drain
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.exit_policy import ExitPolicy, policy_after_health, policy_before_health
from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.gauges import EngineKind, Role
from tests.hook import test_drain
from tests.hook.test_drain import BUSY3, IDLE, T0, FakeClock, ScriptedEngine, config

logged = test_drain.logged  # the drain tests' log fixture, used here too

SGLANG = EngineHint(kind=EngineKind.SGLANG, role=Role.UNIFIED, source="cmdline", node_rank=0, force_shutdown=False)


def test_an_sglang_server_whose_sigterm_drains_is_followed_once_its_health_says_200():
    assert policy_before_health(SGLANG, following_leader=False) is None
    choice = policy_after_health(200)
    assert choice.policy is ExitPolicy.FOLLOW_ENGINE_DRAIN and "/health 200" in choice.reason


@pytest.mark.parametrize("hint, words", [
    (EngineHint(kind=EngineKind.VLLM, source="cmdline"), "vLLM's SIGTERM aborts"),
    (EngineHint(), "not known before the first read"),
    (EngineHint(kind=EngineKind.SGLANG, source="flag", node_rank=0, force_shutdown=True), "SGL_FORCE_SHUTDOWN is set"),
    (EngineHint(kind=EngineKind.SGLANG, source="flag", node_rank=0), "environment could not be read"),
    (EngineHint(kind=EngineKind.SGLANG, source="flag", force_shutdown=False), "--node-rank is not known"),
    (EngineHint(kind=EngineKind.SGLANG, source="cmdline", node_rank=1, force_shutdown=False), "--node-rank 1: a worker"),
    (EngineHint(kind=EngineKind.SGLANG, source="cmdline", node_rank=0, force_shutdown=False,
                port_unknown="its command line is cut"), "port is not known (its command line is cut)"),
], ids=["vllm", "unknown", "force-shutdown", "environ-unread", "rank-unknown", "rank-1", "port-unknown"])
def test_every_unknown_or_unsafe_fact_keeps_the_full_drain(hint, words):
    choice = policy_before_health(hint, following_leader=False)
    assert choice is not None and choice.policy is ExitPolicy.FULL_DRAIN and words in choice.reason


def test_a_worker_following_its_leader_keeps_its_rules():
    choice = policy_before_health(SGLANG, following_leader=True)
    assert choice is not None and choice.policy is ExitPolicy.FULL_DRAIN


@pytest.mark.parametrize("status, detail, words", [(503, "", "answered 503"), (None, "connection refused", "did not answer")])
def test_a_server_not_healthy_before_sigterm_keeps_the_full_drain(status, detail, words):
    choice = policy_after_health(status, detail)
    assert choice.policy is ExitPolicy.FULL_DRAIN and words in choice.reason and "force-exits" in choice.reason


class Health:
    def __init__(self, *statuses):
        self.statuses = list(statuses)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
        return status, "" if status is not None else "connection refused"


def run(logged, health, hint=SGLANG, script=(BUSY3,)):
    log, events = logged
    clock = FakeClock(T0)
    engine = ScriptedEngine(clock, list(script))
    engine.kind = EngineKind.SGLANG
    result = run_drain(config(hint=hint, grace_s=30.0), T0, log, read=engine, clock=clock, health=health)
    return result, engine, events()


def test_the_hook_returns_at_the_route_waits_end_whatever_the_gauges_say(logged):
    health = Health(200)
    result, engine, events = run(logged, health)  # the engine reads busy forever: not read at all
    assert result.outcome is DrainOutcome.ENGINE_DRAINS and result.outcome.exit_code is ExitCode.OK
    assert result.elapsed_s == pytest.approx(5.0) and result.reads == 0 and engine.calls == []
    assert health.calls == 1  # once, beside the route wait
    started = events[0]
    assert started["event"] == "drain_started" and started["exit_policy"] == "follow_engine_drain"
    assert "SGL_FORCE_SHUTDOWN unset" in started["exit_policy_reason"] and "/health 200" in result.reason


def test_a_server_unhealthy_at_the_route_waits_end_is_drained_in_full_and_it_is_said(logged):
    result, engine, events = run(logged, Health(503))
    assert result.outcome is DrainOutcome.DEADLINE and engine.calls  # polled to the deadline
    changed = [e for e in events if e["event"] == "exit_policy_changed"]
    assert len(changed) == 1 and changed[0]["exit_policy"] == "full_drain" and "503" in changed[0]["exit_policy_reason"]


def test_a_health_read_without_an_answer_by_the_route_waits_end_keeps_the_full_drain(logged):
    def slow():
        time.sleep(0.5)  # the fake clock's route wait passes at once: this answers too late
        return 200, ""
    result, _, events = run(logged, slow)
    assert result.outcome is DrainOutcome.DEADLINE
    changed = [e for e in events if e["event"] == "exit_policy_changed"]
    assert len(changed) == 1 and "no answer by the route wait's end" in changed[0]["exit_policy_reason"]


def test_vllm_is_drained_in_full_without_a_health_read(logged):
    health = Health(200)
    result, _, events = run(logged, health, hint=EngineHint(kind=EngineKind.VLLM, source="cmdline"))
    assert result.outcome is DrainOutcome.DEADLINE and health.calls == 0
    assert events[0]["exit_policy"] == "full_drain" and "vLLM" in events[0]["exit_policy_reason"]


def test_an_sglang_server_beside_another_engine_is_polled_not_handed_its_own_drain(logged):
    """Its own SIGTERM drain serves its requests, not the other engine's (issue 25: read each)."""
    log, events = logged
    clock = FakeClock(T0)
    engine = ScriptedEngine(clock, [IDLE])
    engine.kind = EngineKind.SGLANG
    base = config(hint=SGLANG, grace_s=30.0)
    two = replace(base, read=replace(base.read, others=(base.read,)))
    health = Health(200)
    result = run_drain(two, T0, log, read=engine, clock=clock, health=health)
    assert result.outcome is DrainOutcome.IDLE and health.calls == 0
    started = events()[0]
    assert started["exit_policy"] == "full_drain" and "2 engine listeners" in started["exit_policy_reason"]
