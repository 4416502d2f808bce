"""Real replicas deleted under load through the kubelet emulation, with the real prestop: the smoke
that .ci/run runs (one vLLM and one SGLang deletion).

The load is a router in miniature (emulation.load) sending completions to the real engine; it
drops the replica 3 s after the delete, as a lagging router would (within the route wait).
"""

from __future__ import annotations

import json
import time

import pytest

from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines.servers import RealEngine, completion_body, measure_seconds_per_token, proc_root_of
from modeldrain.hook.engine import SGLANG_FORCE_SHUTDOWN_ENV
from tests.e2e.prestop_run import PRESTOP

pytestmark = pytest.mark.engines

GRACE_S = 30
ROUTE_LAG_S = 3.0
# Requests of 6-9 s (at ~5 ms a token; ~3.6 s at the 3 ms of a quiet machine), eight at a time,
# the last sent 3 s after the delete: each engine is busy at the delete and past the route wait
# (5 s), so the hook's return follows the last request, not the route wait.
DURATIONS = UniformDurations(6.0, 9.0)
CONCURRENCY = 8
# Long enough for every worker to have a request running on the engine.
WARM_LOAD_S = 3.0
# The hook reads every 0.25 s while busy and needs two idle reads >= 1 s apart: it returns ~1.2 s
# after the last request (measured 1.21-1.24 s on a quiet machine); the slack is for a loaded one.
RETURN_AFTER_LAST_REQUEST_MAX_S = 3.5
# prestop's default wait before its first read.
ROUTE_WAIT_S = 5.0
# An SGLang server whose SIGTERM drains is handed its drain at the route wait's end: the hook's own
# start-up and two /health reads (<= 0.5 s), plus slack for a loaded machine's process start.
FOLLOW_RETURN_SLACK_S = 1.5


def hook_argv(engine, *extra: str) -> list[str]:
    return [PRESTOP, "--grace", str(GRACE_S), "--port", str(engine.port), "--proc-root", proc_root_of(engine),
            "--quiet", *extra]


def delete_under_load(engine):
    load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=7,
                         request_body=completion_body(engine.kind, seconds_per_token=measure_seconds_per_token(engine))).start()
    time.sleep(WARM_LOAD_S)
    return delete_pod(engine.process, hook_argv(engine), GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S)


def describe(report) -> str:
    return f"{report.load.summary()}; hook exit {report.hook_exit_code}, stderr:\n{report.hook_stderr[-3000:]}"


def assert_returned_soon_after_the_last_request(report) -> float:
    """A vLLM deleted under load: nothing cut, the hook back soon after the last request ended (not
    at the route wait, not at the deadline), no SIGKILL. Returns when the last request ended."""
    assert report.hook_exit_code == 0 and not report.hook_abandoned, describe(report)
    assert report.cut == 0 and report.rejected == 0 and report.refused == 0 and report.load.other == 0, describe(report)
    assert report.completed >= CONCURRENCY, describe(report)
    last_done = report.relative(report.load.last_finished_at)
    assert last_done > ROUTE_WAIT_S, f"the load ended before the first read: nothing measured; {describe(report)}"
    assert last_done <= report.sigterm_at <= last_done + RETURN_AFTER_LAST_REQUEST_MAX_S, describe(report)
    assert report.sigkill_at is None, describe(report)
    return last_done


def test_a_real_vllm_deleted_under_load_cuts_nothing_and_the_hook_returns_soon_after_the_last_request(vllm):
    assert_returned_soon_after_the_last_request(delete_under_load(vllm))


def hook_events(report) -> list[dict]:
    """The hook's JSON lines (stderr; --quiet only keeps them off PID 1's stdout)."""
    return [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]


def test_a_real_sglang_deleted_under_load_is_handed_its_own_drain_and_serves_every_request(sglang):
    report = delete_under_load(sglang)
    assert report.hook_exit_code == 0 and not report.hook_abandoned, describe(report)
    assert report.load.in_flight == 0 and report.completed == report.load.sent >= CONCURRENCY, describe(report)
    assert report.sigkill_at is None and report.engine_exit_code == 0, describe(report)
    # Its argv and environment seen, /health 200: the hook returns at the route wait's end, with
    # requests still running, and SGLang's SIGTERM serves them (the late ones too).
    events = hook_events(report)
    started = next(e for e in events if e["event"] == "drain_started")
    assert started["exit_policy"] == "follow_engine_drain", started["exit_policy_reason"]
    assert events[-1]["outcome"] == "engine_drains", events[-1]
    assert ROUTE_WAIT_S <= report.sigterm_at <= ROUTE_WAIT_S + FOLLOW_RETURN_SLACK_S, describe(report)


def test_a_real_sglang_with_sgl_force_shutdown_is_drained_in_full(tier):
    with RealEngine.sglang(tier, env={SGLANG_FORCE_SHUTDOWN_ENV: "1"}) as engine:
        report = delete_under_load(engine)
    assert report.hook_exit_code == 0 and not report.hook_abandoned, describe(report)
    started = next(e for e in hook_events(report) if e["event"] == "drain_started")
    assert started["exit_policy"] == "full_drain" and SGLANG_FORCE_SHUTDOWN_ENV in started["exit_policy_reason"]
    # Polled to idle: nothing was left for the abort to hang.
    assert report.load.in_flight == 0 and report.completed == report.load.sent >= CONCURRENCY, describe(report)
    last_done = report.relative(report.load.last_finished_at)
    assert last_done <= report.sigterm_at <= last_done + RETURN_AFTER_LAST_REQUEST_MAX_S, describe(report)
