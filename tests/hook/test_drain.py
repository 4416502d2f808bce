"""The drain loop with an injected clock and reader: when it reads, what it logs, what it returns."""

import json
import os

import pytest

from modeldrain.hook.decision import DrainOutcome
from modeldrain.hook.drain import PROGRESS_LOG_INTERVAL_S, run_drain
from modeldrain.hook.engine import EngineHint
from modeldrain.hook.events import EventLog
from modeldrain.hook.gauges import EngineKind, Role
from modeldrain.hook.outcome import Read, ReadOutcome
from modeldrain.hook.settings import DrainConfig, ReadConfig
from modeldrain.hook.target import Target

T0 = 5000.0
READ_TAKES_S = 0.01


class FakeClock:
    def __init__(self, now: float):
        self.t = now

    def now(self) -> float:
        return self.t

    def sleep_until(self, at: float) -> None:
        self.t = max(self.t, at)


class ScriptedEngine:
    """Answers each read with the next (outcome, in_flight) of a script; the last repeats forever."""

    def __init__(self, clock: FakeClock, script):
        self.clock = clock
        self.script = list(script)
        self.calls: list[tuple[float, float]] = []  # (started at, timeout given)

    def __call__(self, timeout_s):
        self.calls.append((self.clock.t, timeout_s))
        outcome, in_flight = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        started = self.clock.t
        self.clock.t += READ_TAKES_S
        return Read(outcome, started, READ_TAKES_S, detail=f"{outcome.value} {in_flight}", in_flight=in_flight,
                    kind=self.kind, role=self.role)

    role = Role.UNIFIED
    kind = EngineKind.VLLM


def config(grace_s=30.0, warnings=(), busy_interval_s=1.0, exit_reserve_s=None, hint=None, grace_given=True,
           leader=None):
    read = ReadConfig(target=Target("http", 8000, "/metrics"),
                      hint=hint or EngineHint(kind=EngineKind.VLLM, source="flag"),
                      read_timeout_s=2.0, max_body_bytes=1 << 20, warnings=tuple(warnings))
    return DrainConfig(read=read, leader=leader, grace_s=grace_s, route_wait_s=5.0, exit_reserve_s=exit_reserve_s,
                       interval_s=1.0,
                       busy_interval_s=busy_interval_s, grace_given=grace_given)


@pytest.fixture
def logged():
    r, w = os.pipe()
    os.set_blocking(r, False)
    log = EventLog("prestop", started_at=T0, stream_fd=w)

    def events():
        data = b""
        while True:
            try:
                chunk = os.read(r, 1 << 16)
            except BlockingIOError:
                break
            data += chunk
        return [json.loads(line) for line in data.decode().splitlines()]

    yield log, events
    log.close()
    os.close(r)
    os.close(w)


def drain(script, logged, role=Role.UNIFIED, **kwargs):
    log, events = logged
    clock = FakeClock(T0)
    engine = ScriptedEngine(clock, script)
    engine.role = role
    result = run_drain(config(**kwargs), T0, log, read=engine, clock=clock)
    return result, engine, events()


IDLE = (ReadOutcome.IDLE, 0.0)
BUSY3 = (ReadOutcome.BUSY, 3.0)


def test_idle_replica_returns_after_route_wait_and_two_reads(logged):
    result, engine, events = drain([IDLE], logged)
    assert result.outcome is DrainOutcome.IDLE and result.reads == 2
    assert [at - T0 for at, _ in engine.calls] == [5.0, 6.0]  # the route wait, then the 1 s interval
    assert result.elapsed_s == pytest.approx(6.0 + READ_TAKES_S)
    names = [e["event"] for e in events]
    assert names == ["drain_started", "read_state"]  # one line per change, not one per read
    started = events[0]
    assert (started["first_read_s"], started["deadline_s"], started["target"]) == (5.0, 25.0,
                                                                                 "http://127.0.0.1:8000/metrics")
    assert events[1]["outcome"] == "idle" and events[1]["reads"] == 1 and events[1]["verdict"] == "idle"


def test_busy_then_idle_logs_progress_at_most_every_interval(logged):
    script = [BUSY3] * 3 + [(ReadOutcome.BUSY, 2.0)] * 3 + [(ReadOutcome.BUSY, 1.0)] * 6 + [IDLE, IDLE]
    result, engine, events = drain(script, logged)
    assert result.outcome is DrainOutcome.IDLE and result.reads == 14
    states = [(e["event"], e.get("in_flight"), e["reads"]) for e in events if e["event"] in ("read_state", "progress")]
    # Reads are 1 s apart from t = 5 s. The count drops to 2 at read 4, but a change is logged at most
    # every PROGRESS_LOG_INTERVAL_S: at read 6 (5 s after read 1), then the drop to 1 at read 11.
    assert PROGRESS_LOG_INTERVAL_S == 5.0
    assert states == [("read_state", 3.0, 1), ("progress", 2.0, 6), ("progress", 1.0, 11), ("read_state", 0.0, 13)]


def test_a_single_zero_between_busy_reads_does_not_end_the_drain(logged):
    result, _, _ = drain([BUSY3, IDLE, BUSY3, IDLE, IDLE], logged)
    assert result.outcome is DrainOutcome.IDLE and result.reads == 5


def test_busy_until_the_deadline_returns_at_g_minus_5_with_reads_bounded_by_it(logged):
    result, engine, _ = drain([BUSY3], logged, grace_s=30.0)
    assert result.outcome is DrainOutcome.DEADLINE
    assert result.elapsed_s == pytest.approx(25.0)
    assert result.in_flight == 3.0 and "3 in flight" in result.reason
    for at, timeout_s in engine.calls:
        assert at + timeout_s <= T0 + 25.0 + 1e-9  # no read may outlast the deadline
    assert engine.calls[-1][1] < 2.0  # the last one got only the time left


def test_nothing_to_measure_ends_at_once(logged):
    result, engine, events = drain([(ReadOutcome.REFUSED, None)], logged)
    assert result.outcome is DrainOutcome.UNMEASURABLE and result.reads == 1
    assert result.elapsed_s == pytest.approx(5.0 + READ_TAKES_S)
    assert events[-1]["outcome"] == "refused" and events[-1]["verdict"] == "unmeasurable"


def test_config_warnings_and_an_unadmitted_grace_are_logged_as_warnings(logged):
    _, _, events = drain([IDLE], logged, grace_s=10.0, warnings=["annotation prometheus.io/port ignored: x"])
    warnings = [e for e in events if e["event"] == "config_warning"]
    assert [w["level"] for w in warnings] == ["warning", "warning"]
    assert "prometheus.io/port" in warnings[0]["message"]
    assert "--grace 10 is outside the 15-3600 s" in warnings[1]["message"]


def test_the_unadmitted_grace_warning_names_the_document_it_comes_from(logged):
    _, _, events = drain([IDLE], logged, grace_s=10.0)
    (warning,) = [e for e in events if e["event"] == "config_warning"]
    assert "the ModelDeployment operator's shutdown documentation admits (restated in modeldrain's " \
           "docs/requirements.md)" in warning["message"]


def test_a_grace_not_given_is_said_at_start(logged):
    _, _, events = drain([IDLE], logged, grace_given=False)
    assert events[0]["event"] == "drain_started" and events[0]["grace_source"] == "assumed (--grace not given)"
    (warning,) = [e for e in events if e["event"] == "config_warning"]
    assert warning["message"].startswith("--grace not given: assuming 30 s.")
    assert "terminationGracePeriodSeconds" in warning["message"]
    _, _, given = drain([IDLE], logged)
    assert given[0]["grace_source"] == "--grace" and not [e for e in given if e["event"] == "config_warning"]


def test_a_worker_following_its_leader_is_not_warned_about_the_local_engine(logged):
    from modeldrain.hook.leader import LeaderConfig

    leader = LeaderConfig(Target("http", 8490, "/v1/work", host="leader.example"), None, "--follow-leader")
    _, _, events = drain([IDLE], logged, leader=leader,
                         warnings=["engine not detected and no port given: using vLLM's default port"])
    assert not [e for e in events if e["event"] == "config_warning"]
    _, _, own = drain([IDLE], logged, warnings=["engine not detected and no port given: using vLLM's default port"])
    assert [e["message"] for e in own if e["event"] == "config_warning"] == [
        "engine not detected and no port given: using vLLM's default port"]


def test_a_first_read_of_something_not_an_engine_is_a_warning(logged):
    log, events = logged
    clock = FakeClock(T0)
    detail = "this is not an engine's /metrics: it looks like drain-sidecar's own (modeldrain_sidecar_* metrics)"

    def misplaced(timeout_s):
        clock.t += READ_TAKES_S
        return Read(ReadOutcome.INCOMPLETE, clock.t, READ_TAKES_S, detail=detail)

    run_drain(config(grace_s=15.0), T0, log, read=misplaced, clock=clock)
    logged_events = events()
    warnings = [e["message"] for e in logged_events if e["event"] == "config_warning"]
    assert warnings == [detail]  # once, at the first read, not at every read
    (first,) = [e for e in logged_events if e["event"] == "read_state"]
    assert first["detail"] == detail and first["in_flight"] is None


def test_an_admitted_grace_gives_no_warning(logged):
    _, _, events = drain([IDLE], logged, grace_s=3600.0)
    assert not [e for e in events if e["event"] == "config_warning"]


def test_busy_reads_at_the_busy_interval_find_the_end_of_work_sooner(logged):
    script = [BUSY3] * 8 + [IDLE, IDLE]
    result, engine, _ = drain(script, logged, busy_interval_s=0.25)
    starts = [round(at - T0, 2) for at, _ in engine.calls]
    assert starts == [5.0, 5.25, 5.5, 5.75, 6.0, 6.25, 6.5, 6.75, 7.0, 8.0]
    assert result.outcome is DrainOutcome.IDLE
    assert result.elapsed_s == pytest.approx(8.0 + READ_TAKES_S)  # 1 s after the first zero, not 2


def test_a_split_role_known_at_start_returns_by_g_minus_20(logged):
    hint = EngineHint(kind=EngineKind.SGLANG, role=Role.DECODE, source="cmdline")
    result, _, events = drain([BUSY3], logged, role=Role.DECODE, grace_s=30.0, hint=hint)
    assert result.outcome is DrainOutcome.DEADLINE and result.elapsed_s == pytest.approx(10.0)
    started = events[0]
    assert started["exit_reserve_s"] == 20.0 and started["deadline_s"] == 10.0
    assert "SGLang decode (its command line) needs up to ~20 s" in started["exit_reserve_reason"]


def test_a_split_role_seen_only_in_the_metrics_moves_the_deadline(logged):
    hint = EngineHint(kind=EngineKind.SGLANG, source="flag")  # role unknown until the first read
    result, _, events = drain([BUSY3], logged, role=Role.PREFILL, grace_s=45.0, hint=hint)
    assert events[0]["exit_reserve_s"] == 5.0 and events[0]["deadline_s"] == 40.0
    changed = next(e for e in events if e["event"] == "exit_reserve_changed")
    assert changed["exit_reserve_s"] == 20.0 and changed["deadline_s"] == 25.0
    assert result.outcome is DrainOutcome.DEADLINE and result.elapsed_s == pytest.approx(25.0)


def test_an_explicit_exit_reserve_is_kept_whatever_the_role(logged):
    hint = EngineHint(kind=EngineKind.SGLANG, role=Role.DECODE, source="cmdline")
    result, _, events = drain([BUSY3], logged, role=Role.DECODE, grace_s=30.0, hint=hint, exit_reserve_s=5.0)
    assert events[0]["exit_reserve_reason"] == "--exit-reserve"
    assert result.elapsed_s == pytest.approx(25.0)
    assert not [e for e in events if e["event"] == "exit_reserve_changed"]


def test_drain_started_names_the_release_rule_the_argv_shows(logged):
    # Issue 26: SGLang with --pp-size > 1 undercounts running requests; the start says so and why.
    hint = EngineHint(kind=EngineKind.SGLANG, role=Role.UNIFIED, source="cmdline", pipeline_parallel_size=2)
    _, _, events = drain([IDLE], logged, hint=hint)
    (rule,) = events[0]["release_rules"]
    assert events[0]["event"] == "drain_started" and "32158" in rule and "--pp-size" in rule
    _, _, plain = drain([IDLE], logged)
    assert plain[0]["release_rules"] == []


def test_the_time_held_after_the_last_busy_read_is_counted_from_that_reads_end(logged):
    """Issue 30, 6: what the sidecar's modeldrain_drain_held_after_last_busy_seconds observes."""
    result, engine, _ = drain([BUSY3, BUSY3, IDLE, IDLE], logged)
    last_busy_end = engine.calls[1][0] + READ_TAKES_S
    assert result.held_after_last_busy_s == pytest.approx(T0 + result.elapsed_s - last_busy_end, abs=1e-3)
    assert result.held_after_last_busy_s == pytest.approx(2.0, abs=1e-3)  # two idle reads 1 s apart
    never_busy, _, _ = drain([IDLE], logged)
    assert never_busy.held_after_last_busy_s == never_busy.elapsed_s  # all of it, from the start
