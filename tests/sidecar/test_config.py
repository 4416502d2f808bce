"""Flags and environment into a config; anything bad is exit 2 with a message, never a traceback."""

import subprocess
import sys

import pytest

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.sidecar.config import DEFAULT_LISTEN_PORT, resolve_config, sidecar_parser
from modeldrain.sidecar.member import Member, PodIdentity


def config(argv, env=None):
    parser = sidecar_parser()
    return resolve_config(parser.parse_args(argv), parser, env or {})


def test_defaults_listen_everywhere_on_the_documented_port():
    c = config(["--engine", "vllm", "--port", "8000", "--annotations", "/nonexistent"])
    assert (c.listen_host, c.listen_port) == ("", DEFAULT_LISTEN_PORT)
    assert c.read.target.url == "http://127.0.0.1:8000/metrics"
    assert c.member == Member(0, 1, "default") and c.member.speaks_for_replica
    assert c.token_file is None and c.pod == PodIdentity(None, None, None)


def test_the_pod_and_its_configuration_come_from_the_downward_api_or_flags():
    env = {"POD_NAMESPACE": "team-a", "POD_NAME": "llm-0", "POD_UID": "u-1", "MEMBER_CONFIGURATION": "rev-7"}
    c = config(["--engine", "vllm"], env)
    assert c.pod == PodIdentity("team-a", "llm-0", "u-1") and c.member.configuration == "rev-7"
    c = config(["--engine", "vllm", "--pod-namespace", "b", "--pod-name", "n", "--pod-uid", "u-2",
                "--configuration", "rev-8"], env)
    assert c.pod == PodIdentity("b", "n", "u-2") and c.member.configuration == "rev-8"


def test_a_pod_that_does_not_name_itself_is_warned_of_what_it_costs():
    (warning,) = config(["--engine", "vllm"], {"POD_NAMESPACE": "team-a"}).warnings
    assert "POD_NAME (--pod-name), POD_UID (--pod-uid) not set" in warning and "POD_NAMESPACE" not in warning
    assert "every retirement of this replica holds wrong_pod" in warning
    named = {"POD_NAMESPACE": "team-a", "POD_NAME": "llm-0", "POD_UID": "u-1"}
    assert config(["--engine", "vllm"], named).warnings == ()


def test_what_the_flags_state_about_the_engine_is_kept_apart_from_the_argv_found():
    from modeldrain.hook.gauges import EngineKind, Role

    c = config(["--engine", "sglang", "--disaggregation-mode", "decode", "--proc-root", "/nonexistent"])
    assert (c.stated.kind, c.stated.role, c.proc_root) == (EngineKind.SGLANG, Role.DECODE, "/nonexistent")
    assert config(["--proc-root", "/nonexistent"]).stated.kind is None


def test_target_comes_from_the_scrape_annotations_like_prestop(tmp_path):
    annotations = tmp_path / "annotations"
    annotations.write_text('prometheus.io/port="31000"\nprometheus.io/path="/m"\n')
    c = config(["--annotations", str(annotations), "--engine", "sglang"])
    assert c.read.target.url == "http://127.0.0.1:31000/m"
    assert c.read.target.source == "annotation"


@pytest.mark.parametrize("argv, problem", [
    (["--listen", "nope"], "--listen"),
    (["--port", "0"], "port"),
    (["--engine", "tgi"], "engine must be vllm or sglang"),
    (["--linger-max", "-1"], "--linger-max"),
    (["--max-connections", "0"], "--max-connections"),
    (["--worker-index", "2", "--group-size", "2"], "not below"),
    (["--token-file", "/nonexistent/token"], "--token-file"),
    (["--read-timeout", "nan"], "--read-timeout"),
])
def test_bad_flags_exit_2_with_a_message(argv, problem):
    result = subprocess.run([sys.executable, "-m", "modeldrain.sidecar", *argv], capture_output=True, text=True, timeout=30)
    assert result.returncode == 2, result.stderr
    assert problem in result.stderr
    assert "Traceback" not in result.stderr


def test_a_taken_listen_address_is_a_clear_error():
    import socket

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run([sys.executable, "-m", "modeldrain.sidecar", "--listen", f"127.0.0.1:{port}",
                                 "--engine", "vllm", "--port", "8000"],
                                capture_output=True, text=True, timeout=30)
    assert result.returncode == ExitCode.LISTEN_FAILED == 3
    assert '"event":"listen_failed"' in result.stderr
    assert "Traceback" not in result.stderr


def test_a_leaderworkerset_worker_remembers_its_leader_with_its_own_token(tmp_path):
    token = tmp_path / "token"
    token.write_text("s3cret\n")
    worker = {"LWS_WORKER_INDEX": "1", "LWS_GROUP_SIZE": "2", "LWS_LEADER_ADDRESS": "llm-0.llm.team-a"}
    c = config(["--engine", "sglang", "--token-file", str(token)], worker)
    assert c.leader is not None and c.leader.target.url == "http://llm-0.llm.team-a:8490/v1/work"
    assert c.leader.token_file == str(token)  # one Secret for every member
    assert config(["--engine", "sglang", "--follow-leader", "none"], worker).leader is None
    assert config(["--engine", "sglang"], {**worker, "LWS_WORKER_INDEX": "0"}).leader is None  # the leader itself
    flagged = config(["--engine", "vllm", "--follow-leader", "http://10.0.0.7:9000"], {})
    assert flagged.leader is not None and flagged.leader.target.netloc == "10.0.0.7:9000"
