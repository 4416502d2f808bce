"""Real vLLM in the serving configurations people run beside the default: two API servers (its
`/metrics` then in prometheus multiprocess mode), two data-parallel engine cores (the `engine`
label 0 and 1, and two API servers by vLLM's default), and `--enable-server-load-tracking` (the
hook reads `GET /load` too). Each is deleted under test_deletions.py's load through the kubelet
emulation with the real prestop; their emulator twins are tests/e2e/test_configurations.py.

And the replica that has served nothing in multiprocess mode: its work gauges are declared with
no series, which the hook reads as 0 only on modeldrain/hook/release_trust.py's evidence. Before
that rule it held such a replica to the deadline (exit 10) and kubelet logged a FailedPreStopHook.
"""

from __future__ import annotations

import json

import pytest

from emulation.kubelet import delete_pod
from engines.servers import RealEngine
from tests.engines.test_deletions import (
    CONCURRENCY,
    GRACE_S,
    ROUTE_WAIT_S,
    delete_under_load,
    describe,
    hook_argv,
    hook_events,
)
from tests.sidecar.sidecar_process import SidecarProcess

pytestmark = pytest.mark.engines

CONFIGURATIONS = {
    "two-api-servers": ("--api-server-count", "2"),
    "data-parallel-2": ("--data-parallel-size", "2"),
    "server-load-tracking": ("--enable-server-load-tracking",),
}


@pytest.mark.parametrize("flags", list(CONFIGURATIONS.values()), ids=list(CONFIGURATIONS))
def test_a_real_vllm_so_configured_deleted_under_load_cuts_nothing(tier, flags):
    with RealEngine.vllm(tier, *flags) as engine:
        report = delete_under_load(engine)
    assert report.hook_exit_code == 0 and not report.hook_abandoned, describe(report)
    assert report.cut == 0 and report.rejected == 0 and report.refused == 0 and report.load.other == 0, describe(report)
    assert report.completed >= CONCURRENCY, describe(report)
    last_done = report.relative(report.load.last_finished_at)
    assert last_done > ROUTE_WAIT_S, f"the load ended before the first read: nothing measured; {describe(report)}"
    # After the last request, and not held to the deadline (G - 5): the lag is measured, not asserted
    # here (reads take seconds on a loaded machine).
    assert last_done <= report.sigterm_at < GRACE_S - 5, describe(report)
    assert report.sigkill_at is None, describe(report)
    events = hook_events(report)
    assert events[-1]["outcome"] == "idle", events[-1]
    if "--enable-server-load-tracking" in flags:  # the idle reads asked /load too
        idle_reads = [e for e in events if e["event"] in ("read_state", "progress") and e["outcome"] == "idle"]
        assert idle_reads and all("/load reads 0" in e["detail"] for e in idle_reads), idle_reads


def test_a_real_vllm_with_two_api_servers_that_served_nothing_reads_idle_and_returns_at_once(tier):
    with RealEngine.vllm(tier, "--api-server-count", "2") as engine:
        with SidecarProcess("--port", str(engine.port), "--pod-name", "p", "--pod-namespace", "n",
                            "--pod-uid", "u") as sidecar:
            status, body, _ = sidecar.request("GET", "/v1/work")
        assert status == 200, body
        work = json.loads(body)["read"]
        assert work["verdict"] == "idle" and work["complete"] and work["idle"], work
        report = delete_pod(engine.process, hook_argv(engine), GRACE_S)
    events = hook_events(report)
    assert report.hook_exit_code == 0 and events[-1]["outcome"] == "idle", describe_idle(report)
    assert report.sigterm_at < GRACE_S - 5, describe_idle(report)
    assert report.sigkill_at is None and report.engine_exit_code == 0, describe_idle(report)


def describe_idle(report) -> str:
    return (f"hook exit {report.hook_exit_code} at {report.sigterm_at:.2f} s, engine exit {report.engine_exit_code}; "
            f"stderr:\n{report.hook_stderr[-3000:]}")
