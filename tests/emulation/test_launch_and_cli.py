"""The emulator under real engines' command lines; and its own command line's bad input."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
import trustme

from emulation.engine_process import EngineProcess
from emulation.launch import LaunchShape, emulator_args


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")


def test_vllm_cli_shape():
    with EngineProcess(launch=LaunchShape.VLLM_CLI, launch_engine_args=("--shutdown-timeout", "30")) as engine:
        argv = cmdline(engine.pid)
        assert argv[0] == sys.executable and Path(argv[1]).name == "vllm"
        assert argv[2:6] == ["serve", "tiny", "--port", str(engine.port)]
        stats = engine.stats()
        assert (stats["kind"], stats["on_sigterm"]) == ("vllm", "drain-timeout")


def test_sglang_module_shape_with_role():
    with EngineProcess("--split-role-exit-wait-s", "0", launch=LaunchShape.SGLANG_MODULE,
                       launch_engine_args=("--disaggregation-mode", "prefill")) as engine:
        argv = cmdline(engine.pid)
        assert argv[1:3] == ["-m", "sglang.launch_server"] and "--disaggregation-mode" in argv
        assert 'engine_type="prefill"' in engine.metrics_text()


def test_engine_flags_translate():
    assert emulator_args("vllm", ["serve", "m", "--port=9000", "-dp", "2", "--gpu-memory-utilization", "0.9"]) == [
        "--kind", "vllm", "--port", "9000", "--dp", "2", "--multiprocess", "--api-servers", "2"]
    assert emulator_args("vllm", ["serve", "m", "--api-server-count", "3", "--enable-server-load-tracking"]) == [
        "--kind", "vllm", "--port", "8000", "--dp", "1", "--multiprocess", "--api-servers", "3",
        "--server-load-tracking"]
    assert emulator_args("sglang", ["--model-path", "m", "--dp-size", "2", "--disaggregation-mode", "decode",
                                    "--enable-metrics"]) == [
        "--kind", "sglang", "--port", "30000", "--dp", "2", "--role", "decode"]
    # Without --enable-metrics SGLang serves no /metrics (a 404), and nor does its emulator.
    assert emulator_args("sglang", ["--model-path", "m"])[-1] == "--without-metrics"


def test_tls(tmp_path):
    authority = trustme.CA()
    cert = authority.issue_cert("127.0.0.1", "localhost")
    cert_file, key_file, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    cert.cert_chain_pems[0].write_to_path(str(cert_file))
    cert.private_key_pem.write_to_path(str(key_file))
    authority.cert_pem.write_to_path(str(ca_file))
    with EngineProcess("--tls-cert", str(cert_file), "--tls-key", str(key_file), ca_file=ca_file) as engine:
        assert engine.base_url.startswith("https://")
        assert "vllm:num_requests_running" in engine.metrics_text()


@pytest.mark.parametrize("argv, message", [
    (["--kind", "tgi"], "--kind"),
    (["--kind", "vllm", "--role", "decode"], "SGLang's"),
    (["--port", "70000"], "port must be"),
    (["--tls-cert", "/nonexistent"], "go together"),
    (["--body-kb", "0"], "--body-kb must be a whole number >= 1"),
    (["--misbehave", "explode"], "--misbehave"),
    (["--shutdown-timeout", "soon"], "seconds"),
])
def test_bad_input_exits_2_with_a_reason(argv, message):
    result = subprocess.run([sys.executable, "-m", "emulation.engine", *argv], capture_output=True, text=True,
                            timeout=30)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_port_in_use_exits_2():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        result = subprocess.run([sys.executable, "-m", "emulation.engine", "--port", str(taken.getsockname()[1])],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == 2 and "cannot listen" in result.stderr and "Traceback" not in result.stderr
