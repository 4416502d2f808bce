"""Finding the engine as its own parser and its own --host put it (issue 15): the real prestop, a
real engine process (the emulator behind vLLM's and SGLang's command lines) or a real listener on
::1 alone, over real sockets."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
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


# A stand-in engine: serves BUSY while $BUSY_FILE exists, then IDLE, on --host/--port (an
# IPv6 host with IPV6_V6ONLY set), and writes the port it bound to $READY_FILE. Named `vllm` and
# run as `vllm serve m …`, it is a vLLM engine to the hook; named otherwise, it is someone else.
LISTENER_SCRIPT = """\
import os, socket, socketserver, sys
from http.server import BaseHTTPRequestHandler
args = sys.argv
port = int(args[args.index("--port") + 1])
host = args[args.index("--host") + 1] if "--host" in args else "0.0.0.0"
busy_file = os.environ["BUSY_FILE"]
BUSY, IDLE = {busy!r}, {idle!r}

class Metrics(BaseHTTPRequestHandler):
    def do_GET(self):
        body = BUSY if os.path.exists(busy_file) else IDLE
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass

class Server(socketserver.TCPServer):
    address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
    allow_reuse_address = True

    def server_bind(self):
        if self.address_family == socket.AF_INET6:
            self.socket.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        super().server_bind()

server = Server((host, port), Metrics)
with open(os.environ["READY_FILE"] + ".tmp", "w") as f:
    f.write(str(server.server_address[1]))
os.rename(os.environ["READY_FILE"] + ".tmp", os.environ["READY_FILE"])
server.serve_forever()
"""


class Listening:
    """A stand-in process listening as the test says; killed on exit."""

    def __init__(self, tmp_path, name: str, *words: str, busy: bool = False):
        folder = tmp_path / f"{name}-{len(list(tmp_path.iterdir()))}"
        folder.mkdir()
        script = folder / name
        script.write_text(f"#!{sys.executable}\n" + LISTENER_SCRIPT.format(busy=BUSY, idle=IDLE))
        script.chmod(0o755)
        ready = folder / "ready"
        self.busy_file = folder / "busy"
        if busy:
            self.busy_file.touch()
        env = {"BUSY_FILE": str(self.busy_file), "READY_FILE": str(ready), "PATH": "/usr/bin:/bin"}
        self.process = subprocess.Popen([str(script), *words], env=env)
        deadline = time.monotonic() + 20
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.close()
                raise RuntimeError(f"{name} {' '.join(words)} did not start")
            time.sleep(0.02)
        self.port = int(ready.read_text())
        self.pid = self.process.pid

    def idle_in(self, seconds: float) -> threading.Timer:
        """Its work ends `seconds` from now."""
        timer = threading.Timer(seconds, self.busy_file.unlink, kwargs={"missing_ok": True})
        timer.start()
        return timer

    def close(self):
        self.process.kill()
        self.process.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def proc_of(tmp_path, *processes: Listening) -> str:
    """A /proc that shows only these processes, as a container's PID namespace does."""
    root = tmp_path / "proc"
    root.mkdir()
    for process in processes:
        (root / str(process.pid)).symlink_to(f"/proc/{process.pid}")
    return str(root)


def test_an_ipv6_only_engine_is_read_on_its_own_socket_not_on_whoever_answers_127_0_0_1(tmp_path):
    """Issue 25 item 4: the engine on `--host ::` with IPV6_V6ONLY, busy; another process idle on
    127.0.0.1 at the same port. The hook read 127.0.0.1 first (a wildcard --host) and exited 0."""
    with Listening(tmp_path, "exporter", "--host", "127.0.0.1", "--port", "0") as impostor, \
            Listening(tmp_path, "vllm", "serve", "m", "--host", "::", "--port", str(impostor.port),
                      busy=True) as engine:
        engine.idle_in(3.0)
        run = run_prestop("--route-wait", "0.5", "--grace", "30", "--proc-root", proc_of(tmp_path, engine))
    assert run.code == 0, run.stderr
    started = run.event("drain_started")
    assert started["target"] == f"http://[::1]:{engine.port}/metrics" and started["target_source"] == "cmdline"
    assert run.event("read_state")["outcome"] == "busy" and run.finished["outcome"] == "idle"


@pytest.mark.parametrize("flags", [(), ("--port", "IDLE")], ids=["no-port-named", "idle-one-named"])
def test_two_engines_in_one_container_are_each_read(tmp_path, flags):
    """Issue 25 item 3: two vLLM API servers in one container, one idle and one busy. The hook read
    one of them (or vLLM's default port, the engines' argv disagreeing) and exited."""
    with Listening(tmp_path, "vllm", "serve", "m", "--port", str(free_port())) as idle, \
            Listening(tmp_path, "vllm", "serve", "m", "--port", str(free_port()), busy=True) as busy:
        busy.idle_in(3.0)
        words = [str(idle.port) if word == "IDLE" else word for word in flags]
        run = run_prestop("--route-wait", "0.5", "--grace", "30", *words, "--proc-root", proc_of(tmp_path, idle, busy))
    assert run.code == 0, run.stderr
    assert run.finished["outcome"] == "idle"
    busy_read = run.event("read_state")
    assert busy_read["outcome"] == "busy"
    if run.event("drain_started")["target"] != f"http://127.0.0.1:{busy.port}/metrics":  # read as the other
        assert f"other engine on 127.0.0.1:{busy.port}" in busy_read["detail"], busy_read
    warnings = [e["message"] for e in run.events if e["event"] == "config_warning"]
    assert any("each is read" in w for w in warnings), warnings


def test_a_refusal_on_a_guessed_port_is_no_engines_answer(tmp_path):
    """Nothing names the port (no flag, no annotation, no engine seen): vLLM's default is a guess,
    and its refusal ended the drain at once as "nothing listens" (exit 11)."""
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", 8000)) == 0:
            pytest.skip("something listens on 127.0.0.1:8000 on this machine")
    run = run_prestop("--route-wait", "0.5", "--grace", "7", "--engine", "vllm")
    assert run.code == 10, run.stderr  # held to the deadline (busy or unknown), never "nothing listens"
    assert run.event("drain_started")["target_source"] == "default"
    warnings = [e["message"] for e in run.events if e["event"] == "config_warning"]
    assert len([w for w in warnings if "was guessed" in w]) == 1, warnings
