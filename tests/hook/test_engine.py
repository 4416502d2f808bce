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


# --- the flags as the engine's own parser reads them (issue 15, "Finding the engine") -----------

VLLM = ["/usr/bin/python3", "/usr/local/bin/vllm", "serve", "m"]
SGLANG = ["python3", "-m", "sglang.launch_server", "--model-path", "m"]


@pytest.mark.parametrize("argv, port", [
    (VLLM + ["--port", "8000", "--port", "9001"], 9001),  # argparse keeps the last
    (VLLM + ["--port=8000", "--port", "9001"], 9001),
    (VLLM + ["--port", "8000", "--port=9001"], 9001),
    (SGLANG + ["--port", "30000", "--port=31001"], 31001),
    (VLLM + ["--port", "9001", "--port", "\u00b2"], None),  # the last is no port: the engine refuses to start
])
def test_the_last_port_wins_in_either_spelling(argv, port):
    assert hint_from_argv(argv).port == port


def test_vllm_underscore_spellings_are_its_flags():
    hint = hint_from_argv(VLLM + ["--max_model_len", "256", "--port", "8000", "--port=9002", "--data_parallel_external_lb",
                                  "--kv_transfer_config.kv_role", "kv_consumer", "--ssl_certfile", "/c.pem", "--host", "::1"])
    assert (hint.port, hint.host, hint.tls) == (9002, "::1", True)
    assert hint.disaggregation == ("--data-parallel-external-lb", "--kv-transfer-config kv_role=kv_consumer")


def test_the_last_of_a_boolean_flag_and_its_negation_decides():
    assert hint_from_argv(VLLM + ["-dpe", "--no-data-parallel-external-lb"]).disaggregation == ()
    assert hint_from_argv(VLLM + ["--no-data-parallel-hybrid-lb", "-dph"]).disaggregation == ("-dph",)
    assert hint_from_argv(SGLANG + ["--disaggregation-mode", "prefill", "--disaggregation-mode=null"]).role is Role.UNIFIED
    assert hint_from_argv(SGLANG + ["--disaggregation-mode", "null", "--disaggregation_mode", "decode"]).role is Role.DECODE


@pytest.mark.parametrize("words, producer", [
    (["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_producer"}'],
     "kv_role=kv_producer, NixlConnector"),
    (["--kv-transfer-config", '{"kv_connector":"MooncakeConnector","kv_role":"kv_both"}'],
     "kv_role=kv_both, MooncakeConnector"),
    (["--kv-transfer-config.kv_role", "kv_producer"], "kv_role=kv_producer"),
    (["--kv-transfer-config", '{"kv_connector":"NixlConnector","kv_role":"kv_consumer"}'], None),
    (["--kv-transfer-config", "not json"], None),
    ([], None),
])
def test_a_vllm_kv_producer_is_named_with_its_connector(words, producer):
    hint = hint_from_argv(["vllm", "serve", "m", *words])
    assert hint is not None and hint.kv_producer == producer


def test_dotted_kv_transfer_words_replace_the_whole_json_as_vllm_gathers_them():
    # vLLM appends the dotted words' JSON after every other word: it replaces the full JSON, kv_role or not.
    argv = VLLM + ["--kv-transfer-config", '{"kv_role": "kv_producer"}', "--kv-transfer-config.kv_connector", "X"]
    assert hint_from_argv(argv).disaggregation == ()


def test_the_config_file_sets_flags_and_the_command_line_overrides_them(tmp_path):
    (tmp_path / "serve.yaml").write_text("# the engine's flags\nport: 9100\nhost: \"::1\"\n"
                                         "data_parallel_hybrid_lb: true\nkv-transfer-config:\n  kv_role: kv_producer\n")
    hint = hint_from_argv(VLLM + ["--config", "serve.yaml"], cwd=str(tmp_path))  # relative to the engine's cwd
    assert (hint.port, hint.host) == (9100, "::1") and not hint.warnings
    assert hint.disaggregation == ("--data-parallel-hybrid-lb", "--kv-transfer-config kv_role=kv_producer")
    overridden = hint_from_argv(VLLM + ["--port", "9200", "--config", str(tmp_path / "serve.yaml"), "--host", "0.0.0.0"])
    assert (overridden.port, overridden.host) == (9200, "0.0.0.0")  # the command line wins wherever it stands
    sglang = hint_from_argv(SGLANG + ["--config", str(tmp_path / "serve.yaml")])
    assert sglang.port == 9100


@pytest.mark.parametrize("name, text, warning", [
    ("serve.yaml", "port 9001\n", "its top level is a str, not a mapping"),
    ("serve.yaml", "port: 9001\n  bad: indent\n", "not valid YAML"),
    ("serve.yaml", "", "it is empty"),
    ("serve.yaml", "1: 9001\n", "is not a string"),
    ("serve.json", "port: 9001\n", "not a .yaml/.yml file"),
    ("missing.yaml", None, "cannot read"),
])
def test_a_config_file_the_hook_cannot_read_leaves_the_port_unknown_never_the_default(tmp_path, name, text, warning):
    if text is not None:
        (tmp_path / name).write_text(text)
    hint = hint_from_argv(VLLM + ["--config", str(tmp_path / name)])
    assert hint.port is None and warning in (hint.port_unknown or ""), hint.port_unknown
    assert len(hint.warnings) == 1 and warning in hint.warnings[0]


def test_a_port_the_command_line_gives_is_known_whatever_the_config_file(tmp_path):
    hint = hint_from_argv(VLLM + ["--config", str(tmp_path / "missing.yaml"), "--port", "9001"])
    assert (hint.port, hint.port_unknown) == (9001, None) and hint.warnings


def test_two_config_files_leave_the_port_unknown():
    twice = hint_from_argv(VLLM + ["--config", "a.yaml", "--config", "b.yaml"])
    assert twice.port is None and "more than once" in twice.port_unknown and "more than once" in twice.warnings[0]


def test_a_unix_socket_engine_says_so():
    hint = hint_from_argv(VLLM + ["--uds", "/run/vllm.sock"])
    assert hint.uds == "/run/vllm.sock" and hint.port is None


def test_proc_scan_reads_a_relative_config_file_from_the_engines_cwd(tmp_path):
    root = _fake_proc(tmp_path, [["vllm", "serve", "m", "--config", "conf/serve.yml"]])
    (tmp_path / "engine-cwd" / "conf").mkdir(parents=True)
    (tmp_path / "engine-cwd" / "conf" / "serve.yml").write_text("port: 9300\n")
    (tmp_path / "1" / "cwd").symlink_to(tmp_path / "engine-cwd")
    assert hint_from_proc(root).port == 9300


def test_the_process_table_is_proc_unless_the_environment_names_another():
    assert default_proc_root({}) == "/proc"
    assert default_proc_root({PROC_ROOT_ENV: ""}) == "/proc"
    assert default_proc_root({PROC_ROOT_ENV: "/elsewhere"}) == "/elsewhere"


SGLANG_ARGV = ["python3", "-m", "sglang.launch_server", "--model-path", "m"]


@pytest.mark.parametrize("environs, force", [
    ([b"PATH=/bin\0HOME=/\0"], False),
    ([b"PATH=/bin\0SGL_FORCE_SHUTDOWN=1\0"], True),
    ([b"SGL_FORCE_SHUTDOWN=yes\0"], False),  # SGLang 0.5.23's get_bool_env_var: only true and 1 are set
    ([b"SGL_FORCE_SHUTDOWN=\0"], False),
    ([b"SGL_FORCE_SHUTDOWN=TRUE\0"], True),
    ([b"SGL_FORCE_SHUTDOWN=False\0"], False),
    ([b"SGL_FORCE_SHUTDOWN=1\0SGL_FORCE_SHUTDOWN=0\0"], True),  # os.environ keeps the first of duplicates
    ([b"SGL_FORCE_SHUTDOWN=0\0SGL_FORCE_SHUTDOWN=1\0"], False),
    ([b"PATH=/bin\0", b"SGL_FORCE_SHUTDOWN=true\0"], True),  # set in one process of the engine
    ([b"PATH=/bin\0", None], None),  # one process's environment unreadable: unknown
    ([None], None),
], ids=["unset", "set", "yes", "empty", "upper-case", "false", "set-then-unset", "unset-then-set", "one-of-two",
        "one-unreadable", "unreadable"])
def test_the_engines_environment_says_whether_sglang_force_shutdown_is_set(tmp_path, environs, force):
    root = _fake_proc(tmp_path, [SGLANG_ARGV] * len(environs))
    for pid, environ in enumerate(environs, 1):
        if environ is not None:
            (tmp_path / str(pid) / "environ").write_bytes(environ)
    hint = hint_from_proc(root)
    assert hint.kind is EngineKind.SGLANG and hint.force_shutdown is force


def test_vllm_s_environment_is_not_read(tmp_path):
    root = _fake_proc(tmp_path, [["vllm", "serve", "m"]])
    (tmp_path / "1" / "environ").write_bytes(b"SGL_FORCE_SHUTDOWN=1\0")
    assert hint_from_proc(root).force_shutdown is None


@pytest.mark.parametrize("words, rank", [([], 0), (["--node-rank", "1"], 1), (["--node-rank=0"], 0),
                                         (["--node-rank", "x"], None)])
def test_sglang_s_node_rank_is_read_from_its_argv(words, rank):
    assert hint_from_argv(SGLANG_ARGV + words).node_rank == rank


def test_a_flag_hint_takes_the_facts_of_the_engines_argv_and_environment():
    proc = EngineHint(kind=EngineKind.SGLANG, source="cmdline", node_rank=0, force_shutdown=False)
    merged = EngineHint(kind=EngineKind.SGLANG, source="flag").merged(proc)
    assert (merged.node_rank, merged.force_shutdown, merged.source) == (0, False, "flag")


@pytest.mark.parametrize("words, tracked", [([], False), (["--enable-server-load-tracking"], True),
                                            (["--enable-server-load-tracking", "--no-enable-server-load-tracking"], False)])
def test_vllm_s_server_load_tracking_is_read_from_its_argv(words, tracked):
    assert hint_from_argv(["vllm", "serve", "m", *words]).server_load_tracking is tracked


@pytest.mark.parametrize("words, api_servers, engines", [
    ([], 1, 1),
    (["--api-server-count", "2"], 2, 1),
    (["-asc", "3"], 3, 1),
    (["--data-parallel-size", "2"], 2, 2),  # vLLM's default: one API server per rank
    (["-dp", "2", "--api-server-count", "1"], 1, 2),
    (["-dp", "4", "--data-parallel-rank", "3"], 1, 1),  # an external balancer's rank
    (["-dp", "4", "-dpn", "3"], 1, 1),
    (["-dp", "4", "-dpl", "2", "-dpr", "2"], 2, 2),  # -dpr: the start rank, the hybrid balancer's
    (["-dp", "4", "-dpl", "2", "--data-parallel-hybrid-lb"], 2, 2),
    (["--api-server-count", "two"], None, 1),
])
def test_vllm_s_api_servers_and_engine_cores_are_read_as_vllm_serve_defaults_them(words, api_servers, engines):
    hint = hint_from_argv(["vllm", "serve", "m", *words])
    assert (hint.api_servers, hint.data_parallel_engines) == (api_servers, engines)
