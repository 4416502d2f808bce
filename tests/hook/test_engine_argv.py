"""The engine's argv and environment read as the engine's own parsers read them (issue 25, items
3 and 5): argparse for the flags, CPython's option parsing for `python -m`, CPython's os.environ
for a duplicated variable. Each oracle is the original program, run here."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modeldrain.hook import engine
from modeldrain.hook.engine import EngineHint, force_shutdown_of, hint_from_argv, hint_from_proc, python_program
from modeldrain.hook.engine_argv import EngineArgs
from modeldrain.hook.gauges import EngineKind

VLLM = ["vllm", "serve", "m"]
SGLANG = ["python3", "-m", "sglang.launch_server", "--model-path", "m"]


# --- argparse: prefixes and the last of a flag -------------------------------------------------

@pytest.mark.parametrize("argv, port", [
    (SGLANG + ["--por", "31001"], 31001),  # argparse takes a unique prefix for the flag
    (SGLANG + ["--po=31001"], 31001),
    (VLLM + ["--port", "8000", "--por", "9001"], 9001),  # and the last of them wins
    (VLLM + ["--por", "9001", "--port=8001"], 8001),
])
def test_a_unique_prefix_is_the_flag_and_the_last_wins(argv, port):
    hint = hint_from_argv(argv)
    assert (hint.port, hint.port_unknown, hint.warnings) == (port, None, ())


def test_a_prefix_the_parser_finds_ambiguous_leaves_the_port_unknown():
    hint = hint_from_argv(VLLM + ["--data-parallel", "2", "--port", "9001"])
    assert hint.port is None and "ambiguous option: --data-parallel" in hint.port_unknown


def test_a_flag_without_its_value_leaves_the_port_unknown():
    hint = hint_from_argv(VLLM + ["--host", "--port", "9001"])
    assert hint.port is None and "expected one argument" in hint.port_unknown


def test_vllm_s_data_parallel_size_alias_is_not_taken_for_its_balance_flags():
    hint = hint_from_argv(VLLM + ["-dp", "2", "--port", "9001"])
    assert (hint.port, hint.port_unknown, hint.disaggregation) == (9001, None, ())


def _stand_in_vllm() -> argparse.ArgumentParser:
    """A parser with vLLM's flags that share a prefix with those the hook reads: the engine, for the oracle."""

    class Refusing(argparse.ArgumentParser):
        def error(self, message):
            raise ValueError(message)

    parser = Refusing(add_help=False, allow_abbrev=True)
    parser.add_argument("model_tag", nargs="?")
    for flag in ("--port", "--host", "--uds", "--ssl-certfile", "--ssl-keyfile", "--ssl-ca-certs", "--kv-transfer-config",
                 "--pooler-config", "--max-model-len", "--data-parallel-address"):
        parser.add_argument(flag)
    parser.add_argument("--data-parallel-size", "-dp")
    parser.add_argument("--data-parallel-external-lb", "-dpe", action=argparse.BooleanOptionalAction)
    parser.add_argument("--data-parallel-hybrid-lb", "-dph", action=argparse.BooleanOptionalAction)
    parser.add_argument("--enable-server-load-tracking", action=argparse.BooleanOptionalAction)
    parser.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction)
    return parser


WORDS = st.sampled_from([
    "--port", "--por", "--po", "--p", "--port=9002", "--por=9003", "--host", "--hos", "--h", "--uds", "--ud",
    "--ssl-certfile", "--ssl-cert", "--ssl", "--pooler-config", "--pool", "--max-model-len", "--max", "--kv",
    "--kv-transfer-config", "--data-parallel-external-lb", "--data-parallel-e", "--data-parallel", "-dpe", "-dph",
    "-dp", "--no-data-parallel-external-lb", "--no-data-parallel-h", "--enable-server-load-tracking", "--enable-s",
    "--enable", "--no-enable-server-load-tracking", "--data-parallel-size", "--", "9001", "8000", "x", "-1",
])


@settings(max_examples=400, deadline=None)
@given(st.lists(WORDS, max_size=8))
def test_the_hook_reads_what_argparse_reads_wherever_the_engine_starts(words):
    """Where the stand-in engine's parser accepts the words (the engine runs), the hook reads the
    same values; where it refuses them, no engine runs and the hook only must not crash."""
    args = EngineArgs.read(words, EngineKind.VLLM)
    try:
        namespace, _ = _stand_in_vllm().parse_known_args(words)
    except ValueError:
        return
    assert args.unknown is None, (words, args.unknown)
    for flag in ("--port", "--host", "--uds", "--ssl-certfile", "--kv-transfer-config"):
        assert args.value(flag) == getattr(namespace, flag[2:].replace("-", "_")), (words, flag)
    for names, negation in (("--data-parallel-external-lb", "-dpe"), "--no-data-parallel-external-lb"), \
            (("--data-parallel-hybrid-lb", "-dph"), "--no-data-parallel-hybrid-lb"), \
            (("--enable-server-load-tracking",), "--no-enable-server-load-tracking"):
        assert (args.switch(names, negation) is not None) == bool(getattr(namespace, names[0][2:].replace("-", "_"))), \
            (words, names)


# --- the whole command line ---------------------------------------------------------------------

def _fake_proc(tmp_path, argv: list[str]) -> str:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "cmdline").write_bytes(b"\0".join(a.encode() for a in argv) + b"\0")
    (tmp_path / "self").mkdir()
    return str(tmp_path)


def test_a_port_past_64_kib_of_command_line_is_read(tmp_path):
    template = "{{ messages }}" * 8000  # an inline --chat-template: 112,000 bytes
    root = _fake_proc(tmp_path, VLLM + ["--chat-template", template, "--port", "9001"])
    hint = hint_from_proc(root)
    assert (hint.port, hint.port_unknown) == (9001, None)


def test_a_command_line_cut_at_the_cap_leaves_the_port_unknown(tmp_path, monkeypatch):
    monkeypatch.setattr(engine, "MAX_CMDLINE_BYTES", 4096)
    root = _fake_proc(tmp_path, VLLM + ["--port", "8000", "--chat-template", "x" * 4070, "--port", "9001"])
    hint = hint_from_proc(root)
    assert hint.kind is EngineKind.VLLM and hint.port is None and "longer than the 4096 bytes" in hint.port_unknown


def test_an_empty_word_is_a_word_of_argv(tmp_path):
    root = _fake_proc(tmp_path, VLLM + ["--host", "", "--port", "9001"])
    hint = hint_from_proc(root)
    assert (hint.port, hint.host) == (9001, None)


# --- Python's own spellings of `-m` ----------------------------------------------------------------

@pytest.mark.parametrize("argv, kind", [
    (["python3", "-mvllm.entrypoints.openai.api_server", "--port", "9001"], EngineKind.VLLM),
    (["python3", "--check-hash-based-pycs", "never", "-m", "vllm.entrypoints.openai.api_server", "--port", "9001"],
     EngineKind.VLLM),
    (["python3", "-X", "dev", "-W", "ignore", "-m", "sglang.launch_server", "--port", "9001"], EngineKind.SGLANG),
    (["python3", "-Xdev", "-Wignore", "-Bm", "sglang.launch_server", "--port", "9001"], EngineKind.SGLANG),
    (["python3.11", "-I", "-Bmsglang.launch_server", "--port", "9001"], EngineKind.SGLANG),
    (["/usr/bin/python3", "-u", "--", "/usr/local/bin/vllm", "serve", "m", "--port", "9001"], EngineKind.VLLM),
])
def test_python_s_own_spellings_of_a_module_are_the_engine(argv, kind):
    hint = hint_from_argv(argv)
    assert (hint.kind, hint.port) == (kind, 9001)


@pytest.mark.parametrize("argv", [
    ["python3", "-c", "import vllm", "-m", "vllm.entrypoints.openai.api_server"],  # -c runs the command
    ["python3", "--check-hash-based-pycs=never", "-m", "sglang.launch_server"],  # CPython refuses it
    ["python3", "-J", "-m", "sglang.launch_server"],
    ["python3", "-h", "-m", "sglang.launch_server"],
    ["python3", "-", "-m", "sglang.launch_server"],
    ["python3", "-W"],
])
def test_what_python_would_not_run_as_the_engine_is_no_engine(argv):
    assert hint_from_argv(argv) is None


STUB = "zzengine_stub"
PLAIN = st.sampled_from(["B", "b", "d", "E", "O", "q", "s", "S", "u", "R", "I", "P"])
VALUED = st.sampled_from([("W", "ignore"), ("X", "dev"), ("X", "utf8")])


@st.composite
def python_words(draw) -> list[str]:
    """A random CPython option prefix, then `-m STUB` in one of its spellings, then the module's args."""
    words: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.integers(0, 2))
        if kind == 0:
            words.append("-" + "".join(draw(st.lists(PLAIN, min_size=1, max_size=3))))
        elif kind == 1:
            letter, value = draw(VALUED)
            plain = "".join(draw(st.lists(PLAIN, max_size=2)))
            words += [f"-{plain}{letter}{value}"] if draw(st.booleans()) else [f"-{plain}{letter}", value]
        else:
            words += ["--check-hash-based-pycs", draw(st.sampled_from(["never", "always", "default"]))]
    plain = "".join(draw(st.lists(PLAIN, max_size=2)))
    words += [f"-{plain}m{STUB}"] if draw(st.booleans()) else [f"-{plain}m", STUB]
    return words + draw(st.sampled_from([[], ["--port", "9001"], ["-m", "x", "--", "-c"]]))


@settings(max_examples=40, deadline=None)
@given(python_words())
def test_the_module_and_its_args_are_what_cpython_runs(tmp_path_factory, words):
    folder = tmp_path_factory.mktemp("stub")
    (folder / f"{STUB}.py").write_text("import json, sys; print(json.dumps(sys.argv[1:]))\n")
    done = subprocess.run([sys.executable, *words], cwd=folder, capture_output=True, text=True, timeout=60,
                          env={"PATH": os.environ.get("PATH", "")})
    assert python_program(words) is not None
    how, module, args = python_program(words)
    assert (how, module) == ("-m", STUB)
    if done.returncode == 0:  # found (not isolated from the folder): its argv is the oracle
        assert json.loads(done.stdout.splitlines()[-1]) == args, done
    else:  # isolated (-I, -P): CPython names the module it looked for
        assert f"No module named {STUB}" in done.stderr, done


# --- the environment: CPython's os.environ keeps the first of duplicates ---------------------------

CHILD = "import os, sys; print(os.environ.get('SGL_FORCE_SHUTDOWN'), flush=True); sys.stdin.read()"
EXEC = ("import os, sys; first, second = sys.argv[1], sys.argv[2]; "
        "env = {'SGL_FORCE_SHUTDOWN': first, b'SGL_FORCE_SHUTDOWN': second.encode()}; "  # two entries, one name
        "os.execve(sys.executable, [sys.executable, '-c', sys.argv[3]], env)")


@pytest.mark.parametrize("first, second", [("1", "0"), ("0", "1"), ("true", "false"), ("", "1"), ("yes", "TRUE")])
def test_a_duplicated_variable_is_read_as_the_engine_s_python_reads_it(first, second):
    engine_process = subprocess.Popen([sys.executable, "-c", EXEC, first, second, CHILD], stdin=subprocess.PIPE,
                                      stdout=subprocess.PIPE, text=True)
    try:
        seen = engine_process.stdout.readline().strip()  # what the engine itself reads
        with open(f"/proc/{engine_process.pid}/environ", "rb") as f:
            assert f.read().count(b"SGL_FORCE_SHUTDOWN=") == 2  # the duplicate is really there
        assert seen == first
        assert force_shutdown_of("/proc", str(engine_process.pid)) is (seen.lower() in ("true", "1"))
    finally:
        engine_process.kill()
        engine_process.wait()


def test_a_hint_with_an_unknown_port_keeps_it_unknown_when_merged():
    proc = EngineHint(kind=EngineKind.VLLM, port_unknown="its command line is cut", source="cmdline")
    assert EngineHint(kind=EngineKind.VLLM, source="flag").merged(proc).port_unknown == "its command line is cut"
    assert EngineHint(port=9001).merged(proc).port_unknown is None
