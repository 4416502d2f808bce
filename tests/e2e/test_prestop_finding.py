"""Finding the engine as its own parser and its own --host put it (issue 15): the real prestop, a
real engine process (the emulator behind vLLM's and SGLang's command lines) or a real listener on
::1 alone, over real sockets."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from emulation.engine_process import EngineProcess, free_port
from emulation.launch import LaunchShape
from emulation.raw_server import RawServer, http_response
from tests.engine_work import send_requests

from .prestop_run import run_prestop
from .test_prestop_engines import container_proc

BUSY = b"vllm:num_requests_running 2\nvllm:num_requests_waiting 0\n"
IDLE = b"vllm:num_requests_running 0\nvllm:num_requests_waiting 0\n"


@pytest.mark.parametrize("shape", [LaunchShape.VLLM_CLI, LaunchShape.SGLANG_MODULE])
def test_an_engine_that_names_its_port_twice_is_read_on_the_last(shape, tmp_path):
    """`vllm serve m --port 8000 --port 9001`: argparse keeps 9001; the hook read 8000, was refused
    and exited 11 while the engine was busy."""
    with EngineProcess(launch=shape, launch_engine_args=["--port", str(free_port())]) as engine:
        assert engine.argv.count("--port") == 2 and engine.argv[-1] == str(engine.port)  # listens on the last
        send_requests(engine, 2, duration_s=3.0)
        run = run_prestop("--route-wait", "1", "--grace", "30", "--proc-root", container_proc(tmp_path, engine))
    assert run.code == 0, run.stderr
    assert run.event("drain_started")["target"] == f"http://127.0.0.1:{engine.port}/metrics"
    assert run.event("read_state")["outcome"] == "busy" and run.finished["elapsed_s"] >= 3.0


def ipv6_only_engine(respond) -> tuple[RawServer, socket.socket]:
    """A listener on [::1] alone, its port held on 127.0.0.1 by a socket that never listens:
    refused there for certain, whatever else runs on this machine."""
    for _ in range(20):
        server = RawServer(respond, host="::1")
        holder = socket.socket(socket.AF_INET)
        try:
            holder.bind(("127.0.0.1", server.port))
            return server, holder
        except OSError:  # that number is taken on IPv4: try another
            holder.close()
            server.close()
    raise RuntimeError("no port free on both loopback addresses")


def test_an_engine_on_ipv6_loopback_alone_is_drained_not_taken_for_nothing_listening():
    """Refused on 127.0.0.1 ended the drain after the route wait (exit 11) while [::1] was busy."""
    switch_at = time.monotonic() + 3.5

    def busy_then_idle(conn):
        conn.sendall(http_response(BUSY if time.monotonic() < switch_at else IDLE))

    engine, holder = ipv6_only_engine(busy_then_idle)
    with engine, holder:
        run = run_prestop("--route-wait", "0.5", "--grace", "30", "--engine", "vllm", "--port", str(engine.port))
    assert run.code == 0, run.stderr
    assert run.finished["outcome"] == "idle" and run.finished["elapsed_s"] >= 3.0
    assert run.event("read_state")["outcome"] == "busy"
    warnings = [e["message"] for e in run.events if e["event"] == "config_warning"]
    assert any(f"answers on [::1]:{engine.port}" in w for w in warnings), warnings


def test_an_engine_on_a_unix_socket_ends_unmeasurable_with_a_warning_that_says_why(tmp_path):
    """vLLM --uds: no port to read. Exit 11 as before, but the log says why, at the start."""
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    script.chmod(0o755)
    engine = subprocess.Popen([str(script), "serve", "m", "--uds", str(tmp_path / "vllm.sock")])
    try:
        proc = tmp_path / "proc"
        proc.mkdir()
        (proc / str(engine.pid)).symlink_to(f"/proc/{engine.pid}")
        run = run_prestop("--route-wait", "0.5", "--grace", "8", "--proc-root", str(proc))
    finally:
        engine.kill()
        engine.wait()
    assert run.code == 11, run.stderr
    warnings = [e["message"] for e in run.events if e["event"] == "config_warning"]
    assert any(w.startswith(f"the engine serves on the Unix socket {tmp_path / 'vllm.sock'} (vLLM --uds)")
               for w in warnings), warnings


def _sleeping_vllm(tmp_path, *args: str) -> subprocess.Popen:
    """A process whose command line is `vllm serve m ARGS...` (a script that only sleeps)."""
    script = tmp_path / "vllm"
    script.write_text(f"#!{sys.executable}\nimport time\ntime.sleep(120)\n")
    script.chmod(0o755)
    return subprocess.Popen([str(script), "serve", "m", *args], cwd=tmp_path)


def _only(tmp_path, process: subprocess.Popen) -> str:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / str(process.pid)).symlink_to(f"/proc/{process.pid}")
    return str(proc)


def test_a_config_file_is_read_as_pyyaml_reads_it_not_at_a_port_line_inside_a_quoted_value(tmp_path):
    """`port: P` then a double-quoted value spanning lines with a `port: Q` line: PyYAML (vLLM) reads
    P. The hand-written reader read Q, where another process answered idle: exit 0 while busy on P."""
    switch_at = time.monotonic() + 3.5

    def busy_then_idle(conn):
        conn.sendall(http_response(BUSY if time.monotonic() < switch_at else IDLE))

    with RawServer(busy_then_idle) as engine_port, RawServer(lambda conn: conn.sendall(http_response(IDLE))) as other:
        (tmp_path / "serve.yaml").write_text(f'port: {engine_port.port}\nchat-template: "first line\n'
                                             f'port: {other.port}\nlast: line"\n')
        engine = _sleeping_vllm(tmp_path, "--config", "serve.yaml")
        try:
            run = run_prestop("--route-wait", "0.5", "--grace", "30", "--proc-root", _only(tmp_path, engine))
        finally:
            engine.kill()
            engine.wait()
    assert run.code == 0, run.stderr
    assert run.event("drain_started")["target"] == f"http://127.0.0.1:{engine_port.port}/metrics"
    assert run.event("read_state")["outcome"] == "busy" and run.finished["elapsed_s"] >= 3.0


def test_an_engine_whose_port_cannot_be_read_is_never_drained_at_a_guessed_port(tmp_path):
    """A --config the hook cannot read: the default port it reads is a guess, so neither an idle
    answer nor a refusal there ends the drain (it was: exit 11 after the route wait while busy)."""
    (tmp_path / "serve.yaml").write_text("port: [9001\n")  # not YAML: the engine's port is not known
    engine = _sleeping_vllm(tmp_path, "--config", "serve.yaml")
    try:
        run = run_prestop("--route-wait", "0.5", "--grace", "8", "--exit-reserve", "2",
                          "--proc-root", _only(tmp_path, engine))
    finally:
        engine.kill()
        engine.wait()
    assert run.code == 10, run.stderr  # the deadline: work unknown to the end
    assert run.event("drain_started")["target_source"] == "unknown"
    warnings = [e["message"] for e in run.events if e["event"] == "config_warning"]
    engine_lines = [w for w in warnings if w.startswith("the engine's")]
    assert len(engine_lines) == 1 and engine_lines[0].startswith("the engine's port is not known"), warnings
    assert all(e["outcome"] != "idle" for e in run.events if e["event"] == "read_state")
