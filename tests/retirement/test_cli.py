"""`drain-sidecar retirement`: the verdict for people, end to end against real sidecars over emulated engines."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from emulation.engine_process import EngineProcess
from emulation.launch import LaunchShape, launch_command
from modeldrain.hook.exitcodes import ExitCode
from tests.sidecar.secret_volume import k8s_secret
from tests.sidecar.sidecar_process import SidecarProcess, kill_now

# Run as a console script would, with aiohttp and uvloop made unimportable: the command must not need them.
WITHOUT_THE_SERVER = ("import sys; sys.modules['aiohttp'] = None; sys.modules['uvloop'] = None; "
                      "from modeldrain.sidecar.main import main; sys.exit(main())")


def retirement(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", WITHOUT_THE_SERVER, "retirement", *args],
                          capture_output=True, text=True, timeout=timeout_s)


def verdict(result: subprocess.CompletedProcess) -> dict:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 1, result.stdout
    return json.loads(lines[0])


def proc_with(tmp_path: Path, *argv: str) -> str:
    """The /proc a Pod sharing its process namespace shows the sidecar: one process, the engine, with
    the argv the operator rendered. (Not this machine's /proc: an engine-shaped process there would
    be seen by every other test's sidecar and hook that is told nothing.)"""
    root = tmp_path / "proc"
    (root / "7").mkdir(parents=True)
    (root / "7" / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    return str(root)


def pod_env(name: str) -> dict[str, str]:
    return {"POD_NAMESPACE": "team-a", "POD_NAME": name, "POD_UID": f"uid-{name}"}


@pytest.fixture(scope="module")
def vllm():
    with EngineProcess("--kind", "vllm") as engine:
        yield engine
        kill_now(engine)


def test_an_idle_single_pod_may_be_deleted_after_two_rounds(vllm, tmp_path):
    proc = proc_with(tmp_path, "python3", "/usr/local/bin/vllm", "serve", "/models/tiny", "--port", str(vllm.port))
    with SidecarProcess("--port", str(vllm.port), "--read-timeout", "0.5", "--proc-root", proc,
                        env=pod_env("llm-0")) as s:
        started = time.monotonic()
        result = retirement(s.base_url, "--pod", "team-a/llm-0/uid-llm-0", "--trace")
        elapsed_s = time.monotonic() - started
    assert result.returncode == ExitCode.OK, result
    body = verdict(result)
    assert (body["verdict"], body["reason"], body["rounds"]) == ("delete", "idle_twice", 2)
    assert body["speaker"] == f"{s.base_url}/v1/work"
    assert body["pods"] == [{"url": f"{s.base_url}/v1/work", "namespace": "team-a", "name": "llm-0", "uid": "uid-llm-0"}]
    trace = [json.loads(line) for line in result.stderr.splitlines()]
    assert [t["reason"] for t in trace] == ["one_idle_read", "idle_twice"]
    assert 1.0 <= trace[1]["at_s"] and elapsed_s < 10


def test_another_pod_at_the_ip_is_held_until_the_budget(vllm, tmp_path):
    with SidecarProcess("--port", str(vllm.port), "--engine", "vllm", "--proc-root", str(tmp_path),
                        env=pod_env("llm-0")) as s:
        result = retirement(s.base_url, "--pod", "team-a/llm-0/uid-of-the-pod-meant", "--budget", "1.5")
    assert result.returncode == ExitCode.NOT_CLEARED == 1
    body = verdict(result)
    assert (body["verdict"], body["reason"]) == ("abort", "wrong_pod")
    assert "its Pod IP was reused" in body["message"]


def test_the_token_is_sent_from_the_file(vllm, tmp_path):
    secret = k8s_secret(tmp_path, "s3cret-token", 1)
    with SidecarProcess("--port", str(vllm.port), "--engine", "vllm", "--token-file", str(secret),
                        "--proc-root", str(tmp_path), env=pod_env("llm-0")) as s:
        without = retirement(s.base_url, "--budget", "1")
        with_token = retirement(s.base_url, "--token-file", str(secret))
    assert without.returncode == 1 and verdict(without)["reason"] == "unreadable"
    assert "HTTP 401 (unauthorized)" in verdict(without)["message"]
    assert with_token.returncode == 0 and verdict(with_token)["verdict"] == "delete"



def test_a_controllers_two_token_file_reads_a_sidecar_that_holds_either(vllm, tmp_path):
    """Issue 30, 4: mid-rotation the controller's file holds the old and the new token; a sidecar whose
    node has not refreshed its Secret yet wants the old one, a refreshed one the new: both answer."""
    (tmp_path / "sidecar").mkdir()
    secret = k8s_secret(tmp_path / "sidecar", "old-token", 1)
    controller = tmp_path / "controller-token"
    controller.write_text("new-token\nold-token\n")
    with SidecarProcess("--port", str(vllm.port), "--engine", "vllm", "--token-file", str(secret),
                        "--proc-root", str(tmp_path), env=pod_env("llm-0")) as s:
        done = retirement(s.base_url, "--token-file", str(controller))
    assert done.returncode == 0 and verdict(done)["verdict"] == "delete", done.stdout + done.stderr
    controller.write_text("one two three\n")
    refused = retirement("http://127.0.0.1:9", "--token-file", str(controller))
    assert refused.returncode == 2 and "does not hold one token, or two on two lines" in refused.stderr

def first_stderr_line(*args: str, within_s: float = 20.0) -> tuple[str, float]:
    """Run the command with a long budget; the first line it writes to stderr, and when."""
    import select

    started = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-c", WITHOUT_THE_SERVER, "retirement", *args, "--budget", "120"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    stderr = proc.stderr
    assert stderr is not None
    try:
        ready, _, _ = select.select([stderr], [], [], within_s)
        assert ready, f"nothing on stderr within {within_s} s"
        return stderr.readline(), time.monotonic() - started
    finally:
        proc.kill()
        proc.wait()


def test_a_401_is_said_with_the_first_hold_not_after_the_budget(vllm, tmp_path):
    secret = k8s_secret(tmp_path, "s3cret-token", 1)
    with SidecarProcess("--port", str(vllm.port), "--engine", "vllm", "--token-file", str(secret),
                        "--proc-root", str(tmp_path), env=pod_env("llm-0")) as s:
        line, after_s = first_stderr_line(s.base_url)
    hold = json.loads(line)
    assert (hold["verdict"], hold["reason"]) == ("hold", "unreadable") and after_s < 20  # the budget is 120 s
    assert "HTTP 401 (unauthorized): the sidecar wants its bearer token" in hold["message"]


def test_a_404_names_the_address_as_no_sidecars(vllm):
    line, _ = first_stderr_line(f"http://127.0.0.1:{vllm.port}")  # the engine itself, not its sidecar
    hold = json.loads(line)
    assert hold["reason"] == "unreadable" and "HTTP 404" in hold["message"]
    assert "no /v1/work at this address: is it a drain-sidecar's (port 8490)" in hold["message"]


@pytest.mark.parametrize("mode", ["prefill", "decode"])
def test_an_sglang_prefill_or_decode_member_is_refused_from_its_own_command(mode, tmp_path):
    with EngineProcess("--kind", "sglang", "--role", mode) as engine:
        argv = launch_command(LaunchShape.SGLANG_MODULE, tmp_path / "shims", port=engine.port,
                              engine_args=("--disaggregation-mode", mode)).argv
        # The sidecar is told nothing: it finds the engine's argv in (its view of) /proc.
        with SidecarProcess("--port", str(engine.port), "--read-timeout", "0.5",
                            "--proc-root", proc_with(tmp_path, *argv), env=pod_env(f"{mode}-0")) as s:
            answer = s.work()
            result = retirement(s.base_url)
        kill_now(engine)
    assert answer["engine"]["command"] == {"source": "cmdline", "disaggregated": True,
                                           "evidence": [f"cmdline: --disaggregation-mode={mode}"]}
    assert result.returncode == 1
    body = verdict(result)
    assert (body["verdict"], body["reason"], body["rounds"]) == ("refuse", "prefill_decode", 1)
    assert f"--disaggregation-mode={mode}" in body["message"]


@pytest.mark.parametrize("argv, problem", [
    ([], "the following arguments are required: URL"),
    (["10.0.0.7:8490"], "http:// or https:// URL"),
    (["http://a:1", "http://a:1/v1/work"], "each member's URL once"),
    (["http://a:1", "--pod", "ns/name"], "--pod must be NAMESPACE/NAME/UID"),
    (["http://a:1", "http://b:1", "--pod", "ns/a/u"], "--pod given 1 time(s) for 2 URL(s)"),
    (["http://a:1", "--token-file", "/nonexistent/token"], "--token-file /nonexistent/token: No such file or directory"),
    (["http://a:1", "--budget", "0"], "--budget must be a number of seconds > 0"),
])
def test_usage_errors_are_one_line_and_exit_2(argv, problem):
    result = retirement(*argv)
    assert result.returncode == ExitCode.USAGE == 2, result
    assert problem in result.stderr and "Traceback" not in result.stderr and "[Errno" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert result.stdout == ""


def test_the_installed_command_dispatches_to_it():
    result = subprocess.run([sys.executable, "-m", "modeldrain.sidecar", "retirement", "--help"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0 and "exit codes: 0 the replica may be deleted" in result.stdout
