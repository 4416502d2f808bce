"""Each engine's gauge set, data-parallel series, formats, TLS and finding the engine by itself."""

from __future__ import annotations

import json
import subprocess
import threading

import pytest
import trustme

from emulation.engine_process import EngineProcess, free_port
from emulation.launch import LaunchShape
from tests.engine_work import send_requests

from .prestop_run import FAST, PRESTOP, run_prestop


def states(run):
    return [(e["outcome"], e["engine"], e["role"]) for e in run.events if e["event"] == "read_state"]


@pytest.mark.parametrize("role, flags", [
    ("unified", []),
    ("prefill", []),
    ("prefill", ["--legacy-prefill-name"]),
])
def test_sglang_roles_drain_idle_with_the_role_read_from_the_exposition(role, flags):
    # --exit-reserve 5 at G = 12 leaves 7 s after the route wait for the two reads of an 87 KB
    # exposition on a loaded machine (a split role's own reserve, 20 s, is tested with the deletions).
    with EngineProcess("--kind", "sglang", "--role", role, *flags) as engine:
        run = run_prestop(*FAST, "--grace", "12", "--exit-reserve", "5", "--port", str(engine.port))
    assert run.code == 0, run.stderr
    expected_role = role
    assert states(run) == [("idle", "sglang", expected_role)]


def test_sglang_decode_that_served_nothing_is_incomplete_then_idle_once_it_has():
    with EngineProcess("--kind", "sglang", "--role", "decode") as engine:
        run = run_prestop(*FAST, "--grace", "12", "--exit-reserve", "5", "--port", str(engine.port))
        assert run.code == 10
        assert states(run) == [("incomplete", "sglang", "decode")]
        assert "sglang:num_decode_prealloc_queue_reqs" in run.event("read_state")["missing"]
        engine.request("POST", "/v1/completions", {"duration_s": 0.1})
        run = run_prestop(*FAST, "--grace", "12", "--exit-reserve", "5", "--port", str(engine.port))
    assert run.code == 0, run.stderr


def test_sglang_decode_work_in_its_own_queues_holds_the_drain():
    with EngineProcess("--kind", "sglang", "--role", "decode") as engine:
        engine.request("POST", "/v1/completions", {"duration_s": 0.1})
        send_requests(engine, 3, duration_s=4.0)
        run = run_prestop("--route-wait", "0.2", "--grace", "30", "--port", str(engine.port),
                          "--disaggregation-mode", "decode", "--engine", "sglang")
    assert run.code == 0
    first = run.event("read_state")
    assert first["outcome"] == "busy" and first["in_flight"] == 3


def test_vllm_data_parallel_series_are_summed():
    with EngineProcess("--kind", "vllm", "--dp", "2", "--max-running", "2", "--multiprocess") as engine:
        send_requests(engine, 6, duration_s=30)
        stats = engine.stats()
        run = run_prestop(*FAST, "--port", str(engine.port))
    first = run.event("read_state")
    assert first["outcome"] == "busy"
    assert first["in_flight"] == stats["running"] + stats["waiting"] == 6
    assert run.code == 10


def test_vllm_multiprocess_that_served_nothing_drains_idle():
    # --api-server-count 2 before any request: the work gauges declared with no series (issue 26).
    with EngineProcess("--kind", "vllm", "--multiprocess") as engine:
        _, data = engine.get("/metrics")
        body = data.decode()
        run = run_prestop(*FAST, "--port", str(engine.port))
    assert "# TYPE vllm:num_requests_running gauge" in body and "\nvllm:num_requests_running{" not in body
    assert run.code == 0, run.stderr
    assert states(run) == [("idle", "vllm", "unified")]
    assert "multiprocess" in run.event("read_state")["detail"]


PRODUCER_CONFIG = ("--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}')


def test_vllm_kv_producer_that_has_served_is_held_to_the_deadline_saying_why(tmp_path):
    # Its request has left both gauges, but the connector may still hold its blocks for the decoder.
    with EngineProcess(launch=LaunchShape.VLLM_CLI, launch_engine_args=PRODUCER_CONFIG) as engine:
        engine.request("POST", "/v1/completions", {"duration_s": 0.1})
        run = run_prestop(*FAST, "--proc-root", container_proc(tmp_path, engine))
    assert run.code == 10, run.stderr
    assert any("KV producer (kv_role=kv_producer, NixlConnector)" in rule
               for rule in run.event("drain_started")["release_rules"])
    held = [e for e in run.events if e["event"] == "read_state"]
    assert held and all(e["outcome"] == "incomplete" and e["in_flight"] == 0 for e in held)
    assert "no gauge counts them" in held[0]["detail"]


def test_vllm_kv_producer_that_has_served_nothing_drains_idle(tmp_path):
    with EngineProcess(launch=LaunchShape.VLLM_CLI, launch_engine_args=PRODUCER_CONFIG) as engine:
        run = run_prestop(*FAST, "--proc-root", container_proc(tmp_path, engine))
    assert run.code == 0, run.stderr
    assert [e["outcome"] for e in run.events if e["event"] == "read_state"] == ["idle"]


def test_sglang_without_enable_metrics_ends_at_once_naming_the_flag():
    with EngineProcess("--kind", "sglang", "--without-metrics") as engine:
        run = run_prestop(*FAST, "--port", str(engine.port), "--engine", "sglang")
    assert run.code == 11, run.stderr
    assert "--enable-metrics" in run.event("drain_finished")["reason"]


def test_openmetrics_only_engine_is_read():
    with EngineProcess("--kind", "vllm", "--format", "openmetrics") as engine:
        run = run_prestop(*FAST, "--port", str(engine.port))
    assert run.code == 0, run.stderr


@pytest.fixture(scope="module")
def engine_cert(tmp_path_factory):
    ca = trustme.CA()
    cert = ca.issue_cert("llm-engine.serving.svc.cluster.local")  # a Service name, never 127.0.0.1
    d = tmp_path_factory.mktemp("tls")
    cert.private_key_pem.write_to_path(d / "key.pem")
    cert.cert_chain_pems[0].write_to_path(d / "cert.pem")
    return d / "cert.pem", d / "key.pem"


def test_https_engine_is_read_without_verifying_its_name(engine_cert):
    cert, key = engine_cert
    with EngineProcess("--kind", "vllm", "--tls-cert", str(cert), "--tls-key", str(key)) as engine:
        run = run_prestop(*FAST, "--port", str(engine.port), "--scheme", "https")
    assert run.code == 0, run.stderr


def test_annotations_file_names_port_path_and_scheme(tmp_path, engine_cert):
    cert, key = engine_cert
    with EngineProcess("--kind", "vllm", "--tls-cert", str(cert), "--tls-key", str(key)) as engine:
        annotations = tmp_path / "annotations"
        annotations.write_text(
            'kubectl.kubernetes.io/default-container="engine"\n'
            f'prometheus.io/port="{engine.port}"\nprometheus.io/path="/metrics"\nprometheus.io/scheme="https"\n'
            'prometheus.io/scrape="true"\n')
        run = run_prestop(*FAST, "--annotations", str(annotations), "--engine", "vllm")
    assert run.code == 0, run.stderr
    started = run.event("drain_started")
    assert started["target"] == f"https://127.0.0.1:{engine.port}/metrics"
    assert started["target_source"] == "annotation"


def container_proc(tmp_path, engine) -> str:
    """A /proc that shows only the engine, as a container's PID namespace does (and other
    tests' engines, running at the same time, stay out of sight)."""
    root = tmp_path / "proc"
    root.mkdir()
    (root / str(engine.pid)).symlink_to(f"/proc/{engine.pid}")
    return str(root)


def test_bad_annotation_is_a_warning_and_the_next_source_is_used(tmp_path):
    with EngineProcess(launch=LaunchShape.VLLM_CLI) as engine:
        annotations = tmp_path / "annotations"
        annotations.write_text('prometheus.io/port="eighty"\n')
        run = run_prestop(*FAST, "--annotations", str(annotations), "--proc-root", container_proc(tmp_path, engine))
    assert run.code == 0, run.stderr
    assert "prometheus.io/port" in run.event("config_warning")["message"]
    assert run.event("drain_started")["target"] == f"http://127.0.0.1:{engine.port}/metrics"


@pytest.mark.parametrize("shape", [LaunchShape.VLLM_CLI, LaunchShape.SGLANG_MODULE])
def test_engine_and_port_found_from_its_own_command_line(shape, tmp_path):
    with EngineProcess(launch=shape) as engine:
        run = run_prestop("--route-wait", "1", "--grace", "8", "--proc-root", container_proc(tmp_path, engine))
    assert run.code == 0, run.stderr
    started = run.event("drain_started")
    assert started["target"] == f"http://127.0.0.1:{engine.port}/metrics"
    assert started["target_source"] == "cmdline" and started["engine_source"] == "cmdline"
    assert started["engine"] == shape.kind


@pytest.mark.parametrize("shape", [LaunchShape.VLLM_CLI, LaunchShape.SGLANG_MODULE])
def test_an_engine_moved_by_its_own_port_is_read_there_when_the_annotated_port_refuses(shape, tmp_path):
    # The role's command sets --port; the operator's annotation still names the port it rendered.
    with EngineProcess(launch=shape) as engine:
        send_requests(engine, 2, duration_s=3.0)
        annotations = tmp_path / "annotations"
        annotations.write_text(f'prometheus.io/port="{free_port()}"\n')  # nothing listens there
        run = run_prestop("--route-wait", "1", "--grace", "30", "--annotations", str(annotations),
                          "--proc-root", container_proc(tmp_path, engine))
    assert run.code == 0, run.stderr  # drained, not "nothing to measure" after the route wait
    warnings = [e["message"] for e in run.events if e["event"] == "config_warning"]
    # The kernel says where the engine listens: read there from the first read, said once.
    assert any(f"but the engine's processes listen on 127.0.0.1:{engine.port}" in w for w in warnings), warnings
    assert run.event("read_state")["outcome"] == "busy" and run.finished["elapsed_s"] >= 3.0


def test_check_reads_where_the_drain_would_when_the_annotated_port_refuses(tmp_path):
    with EngineProcess(launch=LaunchShape.VLLM_CLI) as engine:
        annotations = tmp_path / "annotations"
        annotations.write_text(f'prometheus.io/port="{free_port()}"\n')  # nothing listens there
        proc = subprocess.run([PRESTOP, "check", "--annotations", str(annotations),
                               "--proc-root", container_proc(tmp_path, engine)], capture_output=True, text=True,
                              timeout=30)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["verdict"] == "idle", proc.stdout + proc.stderr
    assert report["target"] == f"http://127.0.0.1:{engine.port}/metrics"
    assert any(f"but the engine's processes listen on 127.0.0.1:{engine.port}" in w for w in report["warnings"]), report


def test_two_hooks_at_once_both_drain():
    # kubelet's hook delivery is at-least-once.
    with EngineProcess("--kind", "vllm") as engine:
        send_requests(engine, 2, duration_s=2.5)
        runs = []
        threads = [threading.Thread(target=lambda: runs.append(run_prestop(*FAST, "--grace", "30",
                                                                             "--port", str(engine.port))))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert [r.code for r in runs] == [0, 0]
    assert all(r.event("read_state")["outcome"] == "busy" for r in runs)
