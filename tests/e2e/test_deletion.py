"""Whole Pod deletions through the kubelet emulation with the real prestop, under real load."""

from __future__ import annotations

import json
import time

from emulation.engine_process import EngineProcess
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations

from .prestop_run import NO_PROCESSES, PRESTOP


def hook_argv(grace_s: float, port: int, *extra: str) -> list[str]:
    return [PRESTOP, "--grace", f"{grace_s:g}", "--port", str(port), "--proc-root", NO_PROCESSES, "--quiet", *extra]


def test_busy_replica_loses_no_request_with_the_hook_and_leaves_when_done():
    with EngineProcess("--kind", "vllm", "--max-running", "8") as engine:
        load = LoadGenerator(engine.base_url, rate_per_s=2.0, durations=UniformDurations(2.0, 6.0), seed=3).start()
        time.sleep(3.0)
        report = delete_pod(engine, hook_argv(30, engine.port), 30, load=load, route_drop_after_s=1.0)
    assert report.hook_exit_code == 0 and not report.hook_abandoned
    assert report.cut == 0 and report.completed > 0 and report.refused == 0
    last_done = report.relative(report.load.last_finished_at)
    # SIGTERM came after the last request finished, and within ~2 reads of it: no idle hold.
    assert last_done <= report.sigterm_at <= max(last_done, 5.0) + 2.5
    assert report.sigkill_at is None and report.engine_exited_at < 30


def test_without_the_hook_the_same_load_is_cut():
    with EngineProcess("--kind", "vllm", "--max-running", "8") as engine:
        load = LoadGenerator(engine.base_url, rate_per_s=2.0, durations=UniformDurations(2.0, 6.0), seed=3).start()
        time.sleep(3.0)
        report = delete_pod(engine, None, 30, load=load, route_drop_after_s=1.0)
    assert report.sigterm_at < 0.1 and report.cut > 0


def test_work_longer_than_the_grace_is_cut_and_the_engine_lingers_to_kubelets_sigkill():
    grace_s = 12
    with EngineProcess("--kind", "vllm") as engine:
        load = LoadGenerator(engine.base_url, concurrency=3, durations=UniformDurations(60, 60), seed=1,
                             max_requests=3).start()
        time.sleep(1.0)
        report = delete_pod(engine, hook_argv(grace_s, engine.port), grace_s, load=load, route_drop_after_s=0.5)
    assert report.hook_exit_code == 10
    assert grace_s - 5 <= report.hook_returned_at <= grace_s - 5 + 0.5
    assert report.cut == 3  # vLLM aborts what runs at SIGTERM: the spec's known limitation
    # Its clients still wait on the aborted requests, so vLLM stays until kubelet kills it at G.
    assert report.sigkill_at is not None and grace_s <= report.sigkill_at <= grace_s + 0.5


def test_sglang_split_role_gets_sigterm_by_g_minus_20_and_loses_nothing_for_it():
    # The role comes from the engine's metrics (engine_type="prefill"): the reserve grows to 20 s.
    # SGLang serves what runs after SIGTERM, so the early return cuts nothing.
    grace_s = 30
    with EngineProcess("--kind", "sglang", "--role", "prefill", "--max-running", "4") as engine:
        load = LoadGenerator(engine.base_url, concurrency=2, durations=UniformDurations(14.0, 14.0), seed=5,
                             max_requests=2).start()
        time.sleep(1.0)
        report = delete_pod(engine, hook_argv(grace_s, engine.port), grace_s, load=load, route_drop_after_s=0.5)
    events = [json.loads(line) for line in report.hook_stderr.splitlines() if line.startswith("{")]
    started = next(e for e in events if e["event"] == "drain_started")
    changed = next(e for e in events if e["event"] == "exit_reserve_changed")
    assert started["exit_reserve_s"] == 5.0 and changed["exit_reserve_s"] == 20.0
    assert report.hook_exit_code == 10 and grace_s - 20 <= report.hook_returned_at <= grace_s - 20 + 0.5
    assert report.cut == 0 and report.completed == 2


def test_a_shortened_grace_abandons_the_hook_at_that_grace():
    # kubectl delete --grace-period=10 (or an eviction with a shorter grace) on a Pod whose spec says
    # 30: the hook was rendered with --grace 30, kubelet's timer runs for 10. kubelet abandons the
    # hook at 10 s and sends SIGTERM then, with its 2 s extension before SIGKILL: what the README's
    # "When the grace is shortened" describes. The hook cannot read the shortened grace (no downward
    # API field carries it), so the engine gets 2 s to exit instead of the 5 s reserve.
    with EngineProcess("--kind", "vllm") as engine:
        load = LoadGenerator(engine.base_url, concurrency=1, durations=UniformDurations(60, 60), seed=2,
                             max_requests=1).start()
        time.sleep(1.0)
        report = delete_pod(engine, hook_argv(30, engine.port), 10, load=load, route_drop_after_s=0.5)
    assert report.hook_abandoned and report.hook_returned_at is None
    assert 10.0 <= report.sigterm_at <= 11.0  # at the shortened grace, well before the hook's 25 s
    assert report.cut == 1  # the running request: it would have been cut at G - 5 = 25 s anyway
    assert report.engine_exited_at <= 12.5  # vLLM exits ~2 s after SIGTERM, inside the extension
