"""The real prestop against a real engine process (the emulator behind SGLang's command line): an
SGLang server whose SIGTERM drains is handed its drain at the route wait's end; one whose SIGTERM
would abort (SGL_FORCE_SHUTDOWN) or whose node is a worker is polled to idle as before."""

from __future__ import annotations

import pytest

from emulation.engine_process import EngineProcess
from emulation.launch import LaunchShape
from modeldrain.hook.engine import SGLANG_FORCE_SHUTDOWN_ENV
from tests.engine_work import send_requests

from .prestop_run import run_prestop
from .test_prestop_engines import container_proc

# Longer than SGLang's /health takes (>= 1 s, emulated): its answer must come by the route wait's end.
ROUTE_WAIT_S = 2.5
REQUEST_S = 4.0
# Handed over at the route wait's end, the requests must still be running then: long enough to
# outlast the route wait and a slow hook start on a loaded machine (4 s did not, at load 9-12).
HANDED_OVER_REQUEST_S = 12.0
# The hook's own start-up and its two /health reads: within 0.5 s of the route wait, plus slack
# for a loaded machine's process start.
FOLLOW_SLACK_S = 1.5


def drain(engine, tmp_path):
    return run_prestop("--route-wait", str(ROUTE_WAIT_S), "--grace", "30", "--proc-root", container_proc(tmp_path, engine))


def test_an_sglang_whose_sigterm_drains_is_handed_its_drain_at_the_route_waits_end(tmp_path):
    with EngineProcess(launch=LaunchShape.SGLANG_MODULE) as engine:
        send_requests(engine, 2, duration_s=HANDED_OVER_REQUEST_S)
        run = drain(engine, tmp_path)
        in_flight = engine.stats()["in_flight"]
        # returned with work in flight: SGLang's SIGTERM serves it
        assert in_flight == 2, f"{in_flight} in flight when the hook returned: {run.stderr[-2000:]}"
    assert run.code == 0, run.stderr
    started = run.event("drain_started")
    assert started["exit_policy"] == "follow_engine_drain" and "SGL_FORCE_SHUTDOWN unset" in started["exit_policy_reason"]
    assert run.finished["outcome"] == "engine_drains" and run.finished["reads"] == 0
    assert "/health 200" in run.finished["reason"]
    assert ROUTE_WAIT_S <= run.finished["elapsed_s"] <= ROUTE_WAIT_S + FOLLOW_SLACK_S


@pytest.mark.parametrize("env, launch_args, words", [
    ({SGLANG_FORCE_SHUTDOWN_ENV: "1"}, [], "SGL_FORCE_SHUTDOWN is set"),
    ({}, ["--node-rank", "1"], "--node-rank 1: a worker node"),
], ids=["force-shutdown", "node-rank-1"])
def test_an_sglang_whose_sigterm_would_not_drain_is_polled_to_idle(tmp_path, env, launch_args, words):
    with EngineProcess(launch=LaunchShape.SGLANG_MODULE, launch_engine_args=launch_args, env=env) as engine:
        send_requests(engine, 2, duration_s=REQUEST_S)
        run = drain(engine, tmp_path)
        assert engine.stats()["in_flight"] == 0  # it waited for the work
    assert run.code == 0, run.stderr
    started = run.event("drain_started")
    assert started["exit_policy"] == "full_drain" and words in started["exit_policy_reason"], started
    assert run.finished["outcome"] == "idle" and run.finished["elapsed_s"] >= REQUEST_S
