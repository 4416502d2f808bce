"""What a real drain-sidecar says of itself: a start-up warning for a Pod it cannot name, and its own
name (never its HTTP library's) in every answer's Server header, routed or not."""

from __future__ import annotations

import socket

from emulation.engine_process import free_port
from modeldrain.sidecar.constants import SERVER_HEADER

from .sidecar_process import SidecarProcess


def test_started_without_the_pods_names_it_warns_what_every_retirement_will_do(tmp_path):
    with SidecarProcess("--engine", "vllm", "--port", str(free_port()), "--proc-root", str(tmp_path)) as s:
        pass
    warnings = [e["message"] for e in s.events() if e["event"] == "config_warning"]
    assert any("POD_NAMESPACE (--pod-namespace), POD_NAME (--pod-name), POD_UID (--pod-uid) not set" in w
               and "holds wrong_pod" in w for w in warnings), warnings


def test_every_answer_names_the_sidecar_not_its_http_library(tmp_path):
    env = {"POD_NAMESPACE": "team-a", "POD_NAME": "llm-0", "POD_UID": "u-1"}
    with SidecarProcess("--engine", "vllm", "--port", str(free_port()), "--proc-root", str(tmp_path), env=env) as s:
        assert not [e for e in s.events() if e["event"] == "config_warning"]
        for path in ("/healthz", "/metrics", "/no/such/route"):
            _, _, headers = s.request("GET", path)
            assert headers["server"] == SERVER_HEADER == "modeldrain-sidecar", (path, headers)
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as raw:  # not HTTP: aiohttp's own 400
            raw.sendall(b"NOT HTTP AT ALL\r\n\r\n")
            answer = raw.recv(65536).decode("latin-1")
    assert answer.split(" ", 2)[1] == "400" and f"\r\nServer: {SERVER_HEADER}\r\n" in answer
    assert "aiohttp" not in answer
