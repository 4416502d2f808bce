"""Flags, the Pod's annotations, the engine's argv and the defaults, resolved once and in that order."""

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from modeldrain.hook.cli import check_parser, drain_parser
from modeldrain.hook.config import resolve_drain_config, resolve_read_config
from modeldrain.hook.engine import PROC_ROOT_ENV
from modeldrain.hook.gauges import EngineKind, Role


def fake_proc(tmp_path: Path, *argvs: list[str]) -> str:
    """A /proc showing one process per argv, as a container's PID namespace shows its engine."""
    root = Path(tempfile.mkdtemp(prefix="proc-", dir=tmp_path))
    for pid, argv in enumerate(argvs, start=1):
        (root / str(pid)).mkdir()
        (root / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return str(root)


def annotations(tmp_path: Path, **values: str) -> str:
    path = tmp_path / "annotations"
    path.write_text("".join(f'prometheus.io/{k}="{v}"\n' for k, v in values.items()))
    return str(path)


VLLM_ON_9000 = ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m", "--port", "9000"]


def no_annotations(tmp_path: Path) -> str:
    path = tmp_path / "empty-annotations"
    path.write_text("")
    return str(path)


def read_config(tmp_path, *argv, proc=None):
    args = check_parser().parse_args([*argv, "--proc-root", proc or fake_proc(tmp_path)])
    return resolve_read_config(args)


def test_flag_beats_annotation_beats_argv_beats_default(tmp_path):
    proc = fake_proc(tmp_path, VLLM_ON_9000)
    ann = annotations(tmp_path, port="8100", path="/m2", scheme="https")
    flag = read_config(tmp_path, "--port", "8200", "--annotations", ann, proc=proc)
    assert (flag.target.port, flag.target.source) == (8200, "flag")
    assert flag.target.path == "/m2" and flag.target.scheme == "https"  # annotations still fill the rest
    annotated = read_config(tmp_path, "--annotations", ann, proc=proc)
    assert (annotated.target.port, annotated.target.source) == (8100, "annotation")
    argv = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert (argv.target.port, argv.target.source) == (9000, "cmdline")
    default = read_config(tmp_path, "--annotations", no_annotations(tmp_path), "--engine", "sglang")
    assert (default.target.port, default.target.source) == (30000, "default")
    assert default.target.url == "http://127.0.0.1:30000/metrics"


def test_annotation_that_disagrees_with_the_engine_is_used_and_warned_about(tmp_path):
    proc = fake_proc(tmp_path, VLLM_ON_9000)
    c = read_config(tmp_path, "--annotations", annotations(tmp_path, port="8000"), proc=proc)
    assert c.target.port == 8000
    assert c.warnings == ("annotation prometheus.io/port=8000 but the engine's argv says --port 9000",)


@pytest.mark.parametrize("values, problem", [
    ({"port": "http"}, "annotation prometheus.io/port ignored"),
    ({"port": "\u00b2"}, "annotation prometheus.io/port ignored"),
    ({"path": "/m\u00e9trics"}, "annotation prometheus.io/path ignored"),
    ({"scheme": "ftp"}, "annotation prometheus.io/scheme ignored"),
])
def test_a_bad_annotation_is_a_warning_and_the_next_source_is_used(tmp_path, values, problem):
    c = read_config(tmp_path, "--annotations", annotations(tmp_path, **values), "--engine", "vllm")
    assert c.target.url == "http://127.0.0.1:8000/metrics"
    assert len(c.warnings) == 1 and c.warnings[0].startswith(problem)


def test_an_unreadable_annotations_file_is_a_warning(tmp_path):
    bad = tmp_path / "annotations"
    bad.write_text("no equals sign here\n")
    c = read_config(tmp_path, "--annotations", str(bad), "--engine", "vllm")
    assert c.target.port == 8000 and c.warnings[0].startswith("annotations ignored: line 1")


def test_engine_and_role_from_flags_else_argv(tmp_path):
    proc = fake_proc(tmp_path, ["python3", "-m", "sglang.launch_server", "--disaggregation-mode", "decode"])
    from_argv = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert (from_argv.hint.kind, from_argv.hint.role, from_argv.hint.source) == (EngineKind.SGLANG, Role.DECODE,
                                                                                  "cmdline")
    flagged = read_config(tmp_path, "--annotations", no_annotations(tmp_path), "--engine", "sglang",
                          "--disaggregation-mode", "prefill", proc=proc)
    assert (flagged.hint.role, flagged.hint.source) == (Role.PREFILL, "flag")


def test_https_when_the_engine_names_a_certificate(tmp_path):
    proc = fake_proc(tmp_path, VLLM_ON_9000 + ["--ssl-certfile", "/c.pem"])
    assert read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc).target.scheme == "https"


def test_a_missing_annotations_file_named_by_flag_is_a_warning(tmp_path):
    c = read_config(tmp_path, "--annotations", "/nonexistent", "--engine", "vllm")
    assert c.warnings == ("annotations ignored: cannot read /nonexistent: No such file or directory",)


def test_no_engine_anywhere_uses_vllms_default_port_and_says_so(tmp_path):
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path))
    assert c.target.port == 8000
    assert c.warnings == ("engine not detected and no port given: using vLLM's default port",)


def test_drain_config_keeps_the_timings(tmp_path):
    args = drain_parser().parse_args(["--grace", "45", "--route-wait", "2", "--exit-reserve", "20",
                                       "--interval", "0.5", "--quiet", "--annotations", no_annotations(tmp_path),
                                       "--engine", "vllm", "--proc-root", fake_proc(tmp_path)])
    c = resolve_drain_config(args)
    assert (c.grace_s, c.route_wait_s, c.exit_reserve_s, c.interval_s) == (45, 2, 20, 0.5)


def test_a_grace_not_given_is_assumed_and_known_to_be(tmp_path):
    assumed = drain_config(tmp_path)
    assert (assumed.grace_s, assumed.grace_given) == (30.0, False)
    given = drain_config(tmp_path, "--grace", "30")
    assert (given.grace_s, given.grace_given) == (30.0, True)


def drain_config(tmp_path, *argv, env=None):
    args = drain_parser().parse_args([*argv, "--annotations", no_annotations(tmp_path), "--engine", "vllm",
                                       "--proc-root", fake_proc(tmp_path)])
    return resolve_drain_config(args, env or {})


LWS_WORKER = {"LWS_WORKER_INDEX": "1", "LWS_LEADER_ADDRESS": "vllm-0.vllm.team-a", "LWS_GROUP_SIZE": "2"}


def test_a_leaderworkerset_worker_follows_its_leader_by_default(tmp_path):
    c = drain_config(tmp_path, env=LWS_WORKER)
    assert c.leader is not None and c.leader.target.url == "http://vllm-0.vllm.team-a:8490/v1/work"
    assert c.leader.source.startswith("LeaderWorkerSet") and c.leader.token_file is None
    assert drain_config(tmp_path, env={**LWS_WORKER, "LWS_WORKER_INDEX": "0"}).leader is None  # the leader itself
    assert drain_config(tmp_path).leader is None


def test_the_flag_beats_the_environment_and_none_turns_following_off(tmp_path):
    token = tmp_path / "t"
    token.write_text("s3cret\n")
    c = drain_config(tmp_path, "--follow-leader", "http://10.1.2.3:9000", "--leader-token-file", str(token),
                     env=LWS_WORKER)
    assert c.leader.target.url == "http://10.1.2.3:9000/v1/work" and c.leader.token_file == str(token)
    assert drain_config(tmp_path, "--follow-leader", "none", env=LWS_WORKER).leader is None


def test_an_unusable_leader_address_is_a_warning_not_a_failed_hook(tmp_path):
    c = drain_config(tmp_path, env={**LWS_WORKER, "LWS_LEADER_ADDRESS": "bad address"})
    assert c.leader is None and c.warnings[0].startswith("not following the leader: LWS_LEADER_ADDRESS")
    c = drain_config(tmp_path, env={**LWS_WORKER, "LWS_WORKER_INDEX": "one"})
    assert c.leader is None and c.warnings[0].startswith("not following the leader: LWS_WORKER_INDEX must be")


# --- finding the engine (issue 15) ---------------------------------------------------------------

def test_the_engines_last_port_is_read_and_its_loopback_addresses_are_tried(tmp_path):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--port", "8000", "--port", "9001"])
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert c.target.url == "http://127.0.0.1:9001/metrics" and c.target.source == "cmdline"
    assert [t.url for t in c.alternates] == ["http://[::1]:9001/metrics"]


@pytest.mark.parametrize("host, first, then", [
    ("::1", "http://[::1]:9001/metrics", ["http://127.0.0.1:9001/metrics"]),
    ("[::1]", "http://[::1]:9001/metrics", ["http://127.0.0.1:9001/metrics"]),
    ("10.4.0.7", "http://10.4.0.7:9001/metrics", ["http://127.0.0.1:9001/metrics", "http://[::1]:9001/metrics"]),
    ("0.0.0.0", "http://127.0.0.1:9001/metrics", ["http://[::1]:9001/metrics"]),
    ("::", "http://127.0.0.1:9001/metrics", ["http://[::1]:9001/metrics"]),
])
def test_the_engines_own_host_is_read_first(tmp_path, host, first, then):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--port", "9001", f"--host={host}"])
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert c.target.url == first and [t.url for t in c.alternates] == then


def test_a_host_that_is_no_address_or_name_is_left_out_with_a_warning(tmp_path):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--host", "a\r\nX: 1"])
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert c.target.host == "127.0.0.1" and any("neither an address nor a name" in w for w in c.warnings)


def test_an_engine_on_a_unix_socket_is_a_clear_warning(tmp_path):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--uds", "/run/vllm.sock"])
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert any(w.startswith("the engine serves on the Unix socket /run/vllm.sock (vLLM --uds)") for w in c.warnings)


def test_what_the_engines_argv_cannot_say_reaches_the_warnings(tmp_path):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--config", str(tmp_path / "missing.yaml")])
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert any("missing.yaml is not read" in w for w in c.warnings)


def test_proc_root_flag_wins_over_the_environment(tmp_path, monkeypatch):
    vllm = fake_proc(tmp_path, ["vllm", "serve", "m", "--port", "9100"])
    sglang = fake_proc(tmp_path, ["python3", "-m", "sglang.launch_server", "--port", "9200"])
    monkeypatch.setenv(PROC_ROOT_ENV, sglang)
    assert read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=vllm).hint.kind is EngineKind.VLLM
    args = check_parser().parse_args(["--annotations", no_annotations(tmp_path)])
    assert resolve_read_config(args).hint.kind is EngineKind.SGLANG


def test_an_engine_whose_port_cannot_be_read_is_read_at_its_default_as_a_guess_said_in_one_line(tmp_path):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--config", str(tmp_path / "missing.yaml")])
    c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc)
    assert (c.target.port, c.target.source, c.target.port_unknown) == (8000, "unknown", True)
    (line,) = c.warnings  # one line, with the reason
    assert line.startswith("the engine's port is not known") and "missing.yaml" in line
    assert "no answer is taken for idle" in line


def test_a_port_given_by_flag_or_annotation_is_no_guess(tmp_path):
    proc = fake_proc(tmp_path, ["vllm", "serve", "m", "--config", str(tmp_path / "missing.yaml")])
    by_annotation = read_config(tmp_path, "--annotations", annotations(tmp_path, port="9001"), proc=proc)
    by_flag = read_config(tmp_path, "--port", "9002", "--annotations", no_annotations(tmp_path), proc=proc)
    assert (by_annotation.target.source, by_flag.target.source) == ("annotation", "flag")


def proc_listening_as(tmp_path: Path, argv: list[str], pid: int | None = None) -> str:
    """A /proc showing one process with `argv` whose descriptors and socket tables are those of
    process `pid` (default: this one): its sockets are that engine's listeners, as the kernel says."""
    root = Path(fake_proc(tmp_path, argv))
    (root / "1" / "fd").symlink_to(f"/proc/{pid or os.getpid()}/fd")
    (root / "1" / "net").symlink_to(f"/proc/{pid or os.getpid()}/net")
    return str(root)


LISTEN = """\
import socket, sys
servers = [socket.create_server(("127.0.0.1", 0)) for _ in range(int(sys.argv[1]))]
print(*(s.getsockname()[1] for s in servers), flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def listening_process(count: int) -> Iterator[tuple[int, list[int]]]:
    """A process of its own listening on `count` ports of 127.0.0.1: its PID and the ports, in order."""
    child = subprocess.Popen([sys.executable, "-c", LISTEN, str(count)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None
        yield child.pid, sorted(int(word) for word in child.stdout.readline().split())
    finally:
        child.kill()
        child.wait()


def test_an_engine_listening_on_ports_no_source_names_is_read_on_each(tmp_path):
    """Neither --port 9000 (its argv) nor the default: none of its listeners is known not to serve
    the metrics, so every one is read and none is taken for the engine alone."""
    with listening_process(2) as (pid, ports):
        c = read_config(tmp_path, "--annotations", no_annotations(tmp_path),
                        proc=proc_listening_as(tmp_path, VLLM_ON_9000, pid))
    assert [c.target.port, *(other.target.port for other in c.others)] == ports
    assert c.target.source == "listener"
    assert any("names port 9000, but the engine's processes listen on" in w for w in c.warnings), c.warnings


def test_a_port_its_argv_cannot_say_but_its_listener_does_is_no_guess_and_not_warned_as_one(tmp_path):
    """The engine's --config cannot be read, so its argv does not say its port; the kernel's
    listener table does: that port is read, and no line says the port is a guess. The argv's own
    line still says what it could not read."""
    argv = ["vllm", "serve", "m", "--config", str(tmp_path / "missing.yaml")]
    with listening_process(1) as (pid, (port,)):
        c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc_listening_as(tmp_path, argv, pid))
    assert (c.target.port, c.target.source, c.target.port_unknown) == (port, "listener", False)
    assert not any("port is not known" in w for w in c.warnings), c.warnings
    (said,) = [w for w in c.warnings if "missing.yaml" in w]
    assert said.startswith("the engine's flags set by its config file are not known"), said


def test_a_dual_stack_ipv6_listener_is_read_on_ipv6_loopback_then_on_127_0_0_1(tmp_path):
    with socket.create_server(("::", 0), family=socket.AF_INET6, dualstack_ipv6=True) as server:
        port = server.getsockname()[1]
        argv = ["/usr/local/bin/vllm", "serve", "m", "--host", "::", "--port", str(port)]
        c = read_config(tmp_path, "--annotations", no_annotations(tmp_path), proc=proc_listening_as(tmp_path, argv))
    assert c.target.url == f"http://[::1]:{port}/metrics" and c.target.source == "cmdline"
    assert [alternate.netloc for alternate in c.alternates] == [f"127.0.0.1:{port}"]
