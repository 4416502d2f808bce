"""Kubelet's deletion timings: SIGTERM after the hook or at G, SIGKILL at G or after the 2 s extension."""

from __future__ import annotations

import sys

from emulation.engine_process import EngineProcess
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations


def test_no_hook_sigterm_at_once():
    with EngineProcess("--kind", "vllm") as engine:
        report = delete_pod(engine, None, grace_s=30)
    assert report.hook_kind == "none" and report.sigterm_at < 0.2
    assert report.sigkill_at is None and report.engine_exit_code == 0
    assert 0.3 < report.engine_exited_at < 1.5  # idle, vLLM exits ~0.5 s after SIGTERM


def test_hook_then_sigterm_and_load_tally():
    with EngineProcess("--kind", "vllm") as engine:
        load = LoadGenerator(engine.base_url, concurrency=2, durations=UniformDurations(5.0, 5.0)).start()
        hook = [sys.executable, "-c", "import sys, time; time.sleep(1); print('out'); print('err', file=sys.stderr)"]
        report = delete_pod(engine, hook, grace_s=30, load=load, route_drop_after_s=0.5)
    assert 0.9 < report.sigterm_at < 1.8 and report.hook_returned_at <= report.sigterm_at
    assert report.hook_exit_code == 0 and not report.hook_abandoned
    assert report.hook_stdout == "out\n" and report.hook_stderr == "err\n"
    assert 0.4 < report.route_dropped_at < 1.0
    assert report.cut == 2 and report.completed == 0  # vLLM aborted the two 5 s requests at SIGTERM


def test_hook_outliving_grace_is_abandoned_then_kill_after_2s():
    with EngineProcess("--kind", "vllm", "--on-sigterm", "ignore") as engine:
        report = delete_pod(engine, ["sleep", "30"], grace_s=2)
    assert report.hook_abandoned and report.hook_returned_at is None and report.hook_exit_code == -9
    assert 1.9 < report.sigterm_at < 2.6
    assert 3.9 < report.sigkill_at < 4.6
    assert report.engine_exit_code == -9


def test_sleep_action_and_kill_at_grace():
    with EngineProcess("--kind", "vllm", "--on-sigterm", "ignore") as engine:
        report = delete_pod(engine, hook_sleep_s=1, grace_s=2.5)
    assert report.hook_kind == "sleep" and 0.9 < report.sigterm_at < 1.5
    # kubelet counts the hook's 1.x s as 1 s and never leaves under 2 s: SIGKILL at 1.x + 2
    assert report.sigterm_at + 1.9 < report.sigkill_at < report.sigterm_at + 2.5
    assert report.engine_exit_code == -9


def test_hook_that_cannot_be_execd_fails_and_sigterm_follows():
    # an idle vLLM draining with --shutdown-timeout and no teardown exits at once: a quick test
    with EngineProcess("--kind", "vllm", "--shutdown-timeout", "5", "--drain-teardown-s", "0") as engine:
        report = delete_pod(engine, ["/nonexistent/prestop"], grace_s=30)
    assert report.hook_exit_code == 127 and "cannot exec" in report.hook_stderr
    assert report.sigterm_at < 0.2 and report.engine_exit_code == 0
