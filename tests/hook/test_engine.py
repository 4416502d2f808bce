"""Which engine and role a replica runs, from argv as /proc shows it."""

import pytest

from modeldrain.hook.engine import PROC_ROOT_ENV, EngineHint, default_proc_root, hint_from_argv, hint_from_proc
from modeldrain.hook.gauges import EngineKind, Role


@pytest.mark.parametrize("argv, kind, role, port", [
    (["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m", "--port", "9000"], EngineKind.VLLM, None, 9000),
    (["vllm", "serve", "m"], EngineKind.VLLM, None, None),
    (["python3", "-m", "vllm.entrypoints.openai.api_server", "--port=8100"], EngineKind.VLLM, None, 8100),
    (["python3", "-m", "sglang.launch_server", "--model-path", "m"], EngineKind.SGLANG, Role.UNIFIED, None),
    (["python3", "-m", "sglang.launch_server", "--disaggregation-mode", "decode", "--port", "30001"],
     EngineKind.SGLANG, Role.DECODE, 30001),
    (["sglang", "serve", "--disaggregation-mode=prefill"], EngineKind.SGLANG, Role.PREFILL, None),
])
def test_engines_are_recognized(argv, kind, role, port):
    hint = hint_from_argv(argv)
    assert (hint.kind, hint.role, hint.port, hint.source) == (kind, role, port, "cmdline")


@pytest.mark.parametrize("argv", [
    ["/bin/sh", "-c", "sleep 1"],
    ["python3", "myapp.py", "vllm", "serve"],  # 'vllm' only as an argument deep in argv
    ["python3", "-m", "emulation.engine"],
    [],
])
def test_other_processes_are_not_engines(argv):
    assert hint_from_argv(argv) is None


def test_tls_engine_defaults_to_https():
    hint = hint_from_argv(["vllm", "serve", "m", "--ssl-certfile", "/c.pem"])
    assert hint.tls


def _fake_proc(tmp_path, argvs):
    for pid, argv in enumerate(argvs, 1):
        (tmp_path / str(pid)).mkdir()
        (tmp_path / str(pid) / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (tmp_path / "self").mkdir()
    return str(tmp_path)


def test_proc_scan_finds_the_one_engine(tmp_path):
    root = _fake_proc(tmp_path, [["/pause"], ["python3", "-m", "sglang.launch_server", "--port", "31000"]])
    hint = hint_from_proc(root)
    assert hint.kind is EngineKind.SGLANG and hint.port == 31000


def test_proc_scan_with_disagreeing_engines_knows_nothing(tmp_path):
    root = _fake_proc(tmp_path, [["vllm", "serve", "a"], ["python3", "-m", "sglang.launch_server"]])
    assert hint_from_proc(root) == EngineHint()


def test_flags_win_over_cmdline():
    flag = EngineHint(kind=EngineKind.SGLANG, role=Role.PREFILL, source="flag")
    proc = EngineHint(kind=EngineKind.SGLANG, role=Role.UNIFIED, port=31000, source="cmdline")
    merged = flag.merged(proc)
    assert (merged.kind, merged.role, merged.port, merged.source) == (EngineKind.SGLANG, Role.PREFILL, 31000, "flag")


@pytest.mark.parametrize("argv, marks", [
    (["python3", "-m", "sglang.launch_server", "--disaggregation-mode", "prefill"], ("--disaggregation-mode=prefill",)),
    (["sglang", "serve", "--disaggregation-mode=decode"], ("--disaggregation-mode=decode",)),
    (["sglang", "serve", "--disaggregation-mode", "null"], ()),
    (["vllm", "serve", "m", "--data-parallel-external-lb"], ("--data-parallel-external-lb",)),
    (["vllm", "serve", "m", "-dph", "--data-parallel-size", "8"], ("-dph",)),
    (["vllm", "serve", "m", "--no-data-parallel-hybrid-lb"], ()),
    (["vllm", "serve", "m", "--kv-transfer-config", '{"kv_connector":"X","kv_role":"kv_consumer"}'],
     ("--kv-transfer-config kv_role=kv_consumer",)),
    (["vllm", "serve", "m", '--kv-transfer-config={"kv_role":"kv_producer"}'],
     ("--kv-transfer-config kv_role=kv_producer",)),
    (["vllm", "serve", "m", "--kv-transfer-config.kv_role", "kv_producer"],
     ("--kv-transfer-config kv_role=kv_producer",)),
    (["vllm", "serve", "m", "--kv-transfer-config", '{"kv_role":"kv_both"}'], ()),
    (["vllm", "serve", "m", "--kv-transfer-config", "not json"], ()),
    (["vllm", "serve", "m", "--data-parallel-size", "2"], ()),
])
def test_a_prefill_or_decode_server_is_recognized_by_its_own_command(argv, marks):
    assert hint_from_argv(argv).disaggregation == marks


@pytest.mark.parametrize("port", ["\u00b2", "\u0663\u0663", "99999", "0", "8_000", "+80", ""])
def test_a_port_the_engine_could_not_listen_on_is_no_port(port):
    # '²' passes str.isdigit() but not int(): it must not crash prestop, check or the sidecar at start.
    hint = hint_from_argv(["vllm", "serve", "m", "--port", port])
    assert hint is not None and hint.kind is EngineKind.VLLM and hint.port is None


def test_proc_scan_counts_only_its_own_pid_namespace(tmp_path):
    """On a node /proc shows every container's processes; a hook run there must not read another
    container's engine as its own (a Pod shows only its own namespace)."""
    root = _fake_proc(tmp_path, [["vllm", "serve", "m", "--port", "8001"],
                                 ["python3", "-m", "sglang.launch_server", "--port", "30000"]])
    for pid, namespace in (("self", "pid:[1]"), ("1", "pid:[1]"), ("2", "pid:[2]")):
        (tmp_path / pid / "ns").mkdir()
        (tmp_path / pid / "ns" / "pid").symlink_to(namespace)
    hint = hint_from_proc(root)
    assert (hint.kind, hint.port) == (EngineKind.VLLM, 8001)


def test_proc_scan_counts_a_process_whose_namespace_it_cannot_tell(tmp_path):
    root = _fake_proc(tmp_path, [["vllm", "serve", "m", "--port", "8001"]])
    (tmp_path / "self" / "ns").mkdir()
    (tmp_path / "self" / "ns" / "pid").symlink_to("pid:[1]")
    assert hint_from_proc(root).kind is EngineKind.VLLM  # no ns/pid to read: counted, as before


def test_the_process_table_is_proc_unless_the_environment_names_another():
    assert default_proc_root({}) == "/proc"
    assert default_proc_root({PROC_ROOT_ENV: ""}) == "/proc"
    assert default_proc_root({PROC_ROOT_ENV: "/elsewhere"}) == "/elsewhere"
