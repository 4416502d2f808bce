"""The engine's hook telling its Pod's drain-sidecar over loopback (issue 30, items 1 and 6): real
prestop, real drain-sidecar, real emulated engine. From the hook's start /v1/work says the member is
draining, and /metrics counts the drain by outcome; no sidecar, or a stuck one, changes nothing of
the drain."""

from __future__ import annotations

import json
import socket
import time

from prometheus_client.parser import text_string_to_metric_families

from emulation.engine_process import EngineProcess
from tests.engine_work import send_requests
from tests.sidecar.secret_volume import k8s_secret
from tests.sidecar.sidecar_process import SidecarProcess

from .prestop_run import run_prestop, start_prestop


def samples(sidecar: SidecarProcess) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, body, _ = sidecar.request("GET", "/metrics")
    assert status == 200
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(body.decode()) for s in family.samples}


def value(table, name: str, **labels: str) -> float:
    return table[(name, tuple(sorted(labels.items())))]


def wait_for(predicate, timeout_s: float, what: str) -> None:
    deadline_at = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline_at:
            raise AssertionError(f"not within {timeout_s} s: {what}")
        time.sleep(0.05)


def test_the_hooks_drain_marks_the_member_draining_and_is_counted(tmp_path):
    token = k8s_secret(tmp_path, "token", 1)
    bearer = {"Authorization": "Bearer token"}
    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--token-file", str(token),
                           "--proc-root", str(tmp_path)) as sidecar:
        assert sidecar.work(bearer)["sidecar"]["draining"] is None
        send_requests(engine, 2, duration_s=3.0)
        hook = start_prestop("--route-wait", "1", "--grace", "30", "--port", str(engine.port), "--engine", "vllm",
                             "--sidecar-report", str(sidecar.port))
        wait_for(lambda: sidecar.work(bearer)["sidecar"]["draining"] is not None, 10.0, "the member draining")
        during = sidecar.work(bearer)["sidecar"]
        assert during["terminating"] is False and during["draining"]["via"] == "hook"
        assert value(samples(sidecar), "modeldrain_drains_in_progress", via="hook") == 1
        assert value(samples(sidecar), "modeldrain_pod_draining") == 1
        out, err = hook.communicate(timeout=60)
        assert hook.returncode == 0, err
        finished = json.loads(out.splitlines()[-1])
        assert finished["outcome"] == "idle"
        table = samples(sidecar)
        after = sidecar.work(bearer)["sidecar"]["draining"]
    assert after == during["draining"]  # a deletion is never undone
    assert value(table, "modeldrain_drains_started_total", via="hook") == 1
    assert value(table, "modeldrain_drains_total", outcome="idle", via="hook") == 1
    assert value(table, "modeldrain_drains_in_progress", via="hook") == 0
    assert value(table, "modeldrain_drain_held_after_last_busy_seconds_count", via="hook") == 1
    # Held after the last busy read: at least the two idle reads a second apart, less than the whole drain.
    held_s = value(table, "modeldrain_drain_held_after_last_busy_seconds_sum", via="hook")
    assert 1.0 <= held_s < finished["elapsed_s"]
    assert value(table, "modeldrain_drains_total", outcome="deadline", via="hook") == 0
    events = [e["event"] for e in sidecar.events()]
    assert events.count("hook_drain_started") == events.count("hook_drain_finished") == 1


def test_a_drain_call_marks_the_member_draining_and_is_counted(tmp_path):
    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--proc-root", str(tmp_path)) as sidecar:
        assert sidecar.work()["sidecar"]["draining"] is None
        status, body, _ = sidecar.request("GET", "/v1/drain?grace=20", timeout_s=60)
        assert status == 200 and json.loads(body)["outcome"] == "idle"
        draining = sidecar.work()["sidecar"]["draining"]
        table = samples(sidecar)
    assert draining["via"] == "drain_call"
    assert value(table, "modeldrain_drains_started_total", via="drain_call") == 1
    assert value(table, "modeldrain_drains_total", outcome="idle", via="drain_call") == 1
    assert value(table, "modeldrain_drains_total", outcome="idle", via="hook") == 0


def test_a_hook_with_no_sidecar_or_a_stuck_one_drains_as_before(tmp_path):
    with socket.socket() as stuck, EngineProcess("--kind", "vllm") as engine:
        stuck.bind(("127.0.0.1", 0))
        stuck.listen(8)  # accepts in the kernel, never answers
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            nobody = probe.getsockname()[1]  # closed again: nothing listens there
        runs = [run_prestop("--route-wait", "0.5", "--grace", "30", "--port", str(engine.port), "--engine", "vllm",
                            "--sidecar-report", str(port)) for port in (stuck.getsockname()[1], nobody, 0)]
    for run in runs:
        assert run.code == 0 and run.finished["outcome"] == "idle", run.stderr


def test_only_loopback_peers_may_post_hook_events():
    from modeldrain.sidecar.app import from_loopback

    assert from_loopback("127.0.0.1") and from_loopback("127.3.4.5") and from_loopback("::1")
    assert from_loopback("::ffff:127.0.0.1")
    assert not from_loopback("10.0.0.7") and not from_loopback("::ffff:10.0.0.7")
    assert not from_loopback("fe80::1") and not from_loopback(None) and not from_loopback("unknown")


def test_a_bad_hook_event_is_a_400_and_counts_nothing(tmp_path):
    with EngineProcess("--kind", "vllm") as engine, \
            SidecarProcess("--port", str(engine.port), "--engine", "vllm", "--proc-root", str(tmp_path)) as sidecar:
        bad = [b"not json", b"[]", b'{"event":"started","drain":"xyz","grace_s":30}',
               b'{"event":"started","drain":"0123456789abcdef","grace_s":-1}',
               b'{"event":"finished","drain":"0123456789abcdef","outcome":"unreported"}',
               b'{"event":"rebooted","drain":"0123456789abcdef"}']
        statuses = []
        for body in bad:
            connection_status, answer, _ = _post(sidecar, body)
            statuses.append((connection_status, json.loads(answer)["error"]))
        table = samples(sidecar)
        draining = sidecar.work()["sidecar"]["draining"]
    assert statuses == [(400, "bad_request")] * len(bad)
    assert value(table, "modeldrain_drains_started_total", via="hook") == 0 and draining is None


def _post(sidecar: SidecarProcess, body: bytes):
    import http.client

    connection = http.client.HTTPConnection("127.0.0.1", sidecar.port, timeout=10)
    try:
        connection.request("POST", "/v1/hook-events", body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        return response.status, response.read(), dict(response.getheaders())
    finally:
        connection.close()
