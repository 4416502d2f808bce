"""An engine's --config file, read as vLLM reads it (PyYAML's safe loader), bounded; and what the
hook then knows of the engine's port (issue 25, item 2)."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modeldrain.hook.engine import hint_from_argv
from modeldrain.hook.engine_config import MAX_CONFIG_FILE_BYTES, ConfigUnreadable, config_words, load_config

VLLM = ["vllm", "serve", "m"]

# Each is a file PyYAML (so vLLM) reads as port 9001; the hand-written reader read 8000 or nothing.
NINE_THOUSAND_ONE = {
    "quoted-value-spanning-lines": 'port: 9001\nchat-template: "first line\nport: 8000\nlast: line"\n',
    "bom": "\ufeffport: 9001\n",
    "json-lines": '"port": 9001\n"host": "127.0.0.1"\n',
    "json-flow": '{"port": 9001}\n',
    "hex": "port: 0x2329\n",
    "underscores": "port: 9_001\n",
    "octal": "port: 021451\n",
    "directive": "%YAML 1.1\n---\nport: 9001\n",
    "merge-key": "<<: {port: 9001}\n",
    "merge-key-alias": "kv-transfer-config: &kv {port: 9001}\n<<: *kv\n",
}


@pytest.mark.parametrize("text", NINE_THOUSAND_ONE.values(), ids=NINE_THOUSAND_ONE.keys())
def test_what_pyyaml_reads_as_9001_the_hook_reads_as_9001(tmp_path, text):
    assert yaml.safe_load(text)["port"] == 9001  # the oracle: the engine's own reader
    (tmp_path / "serve.yaml").write_text(text, encoding="utf-8")
    hint = hint_from_argv(VLLM + ["--config", str(tmp_path / "serve.yaml")])
    assert (hint.port, hint.port_unknown, hint.warnings) == (9001, None, ())


KEYS = st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True)
LEAVES = st.one_of(st.none(), st.booleans(), st.integers(-10**9, 10**9), st.text(max_size=20),
                   st.floats(allow_nan=False, allow_infinity=False))
VALUES = st.recursive(LEAVES, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                       st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(config=st.dictionaries(KEYS, VALUES, min_size=1, max_size=8),
       style=st.sampled_from([None, '"', "'"]), flow=st.sampled_from([None, True, False]),
       start=st.booleans(), bom=st.booleans(), version=st.sampled_from([None, (1, 1)]))
def test_the_hook_reads_every_file_as_yaml_safe_load_does(config, style, flow, start, bom, version):
    text = yaml.safe_dump(config, default_style=style, default_flow_style=flow, explicit_start=start,
                          allow_unicode=True, version=version)
    text = ("\ufeff" if bom else "") + text
    # The parse's time bound is its own test: on a loaded machine a slow example is not a difference.
    assert load_config(text, deadline_s=60.0) == yaml.safe_load(text)


@pytest.mark.parametrize("text", [
    "port: 9001\nhost: ::1\n", "port: 9001\nport: 9002\n", "p: 1.5\nq: 1:30\nr: .inf\ns: 2001-12-14\n",
    "a: &x 1\nb: *x\nc: !!str 5\nd: |\n  text\n", "deep:\n  a:\n    b: [1, {c: d}]\n", "on: 1\nyes: 2\n",
])
def test_samples_read_as_yaml_safe_load_reads_them(text):
    try:
        expected = yaml.safe_load(text)
    except yaml.YAMLError:
        expected = None
    if isinstance(expected, dict) and all(isinstance(key, str) for key in expected):
        assert load_config(text) == expected
    else:
        with pytest.raises(ConfigUnreadable):
            load_config(text)


def test_the_mapping_becomes_words_as_vllm_turns_it_into_flags():
    config = {"port": 9001, "enforce-eager": True, "trust-remote-code": False, "middleware": ["a", "b"],
              "empty": [], "kv-transfer-config": {"kv_role": "kv_producer"}, "host": None}
    words = config_words(config, negations={"--no-trust-remote-code"})
    assert words == ["--port", "9001", "--enforce-eager", "--no-trust-remote-code", "--middleware", "a", "b",
                     "--kv-transfer-config", '{"kv_role": "kv_producer"}', "--host", "None"]
    assert "--no-trust-remote-code" not in config_words(config)  # not one of the engine's flags: dropped, as vLLM does


def test_a_false_switch_in_the_config_file_is_its_negation_only_where_vllm_has_one(tmp_path):
    (tmp_path / "serve.yaml").write_text("data-parallel: false\ndata_parallel_external_lb: false\nport: 9001\n")
    hint = hint_from_argv(VLLM + ["--config", str(tmp_path / "serve.yaml"), "-dpe"])
    assert (hint.port, hint.port_unknown, hint.disaggregation) == (9001, None, ("-dpe",))
    (tmp_path / "off.yaml").write_text("data-parallel-external-lb: false\n")
    assert hint_from_argv(VLLM + ["-dpe", "--config", str(tmp_path / "off.yaml")]).disaggregation == ("-dpe",)


def _alias_bomb(levels: int = 9, fan: int = 9) -> str:
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [" + ",".join([f"*a{level - 1}"] * fan) + "]")
    return "\n".join(lines) + "\nport: 9001\n"


@pytest.mark.parametrize("text, why", [
    (_alias_bomb(), "once its aliases are expanded"),
    ("port: &a [9001, *a]\n", "recursive"),
    ("port: " + "[" * 20_000 + "]" * 20_000 + "\n", "nested deeper than"),
    ("port: " + "{a: " * 40 + "1" + "}" * 40 + "\n", "nested deeper than"),
    ("- port\n- 9001\n", "not a mapping"),
    ("", "empty"),
    ("a: 1\n---\nb: 2\n", "not valid YAML"),
    ("kv-transfer-config: {when: 2001-12-14}\n", "is not JSON"),
])
def test_a_file_past_a_bound_or_one_the_engine_refuses_is_unreadable_in_one_line(text, why):
    started = time.monotonic()
    with pytest.raises(ConfigUnreadable, match=why) as refused:
        config_words(load_config(text))
    assert "\n" not in str(refused.value)
    assert time.monotonic() - started < 5  # a bound, not a timing: the bomb stands for 387 million values


@pytest.mark.parametrize("content", [
    b"port: 9001\n" + b"#" * MAX_CONFIG_FILE_BYTES,  # too large
    b"port: 9001\nhost: \xff\n",  # not UTF-8
    _alias_bomb().encode(),
])
def test_an_unreadable_config_file_leaves_the_port_unknown_with_one_warning(tmp_path, content):
    (tmp_path / "serve.yaml").write_bytes(content)
    hint = hint_from_argv(VLLM + ["--config", str(tmp_path / "serve.yaml")])
    assert hint.port is None and hint.port_unknown and len(hint.warnings) == 1


def test_pyyaml_is_imported_only_for_an_engine_with_a_config_file(tmp_path):
    (tmp_path / "serve.yaml").write_text("port: 9001\n")
    program = ("import sys; from modeldrain.hook.engine import hint_from_argv; "
               "hint_from_argv(sys.argv[1:]); print('yaml' in sys.modules)")
    without = subprocess.run([sys.executable, "-c", program, "vllm", "serve", "m", "--port", "9001"],
                             capture_output=True, text=True, check=True)
    with_config = subprocess.run([sys.executable, "-c", program, "vllm", "serve", "m", "--config",
                                  str(tmp_path / "serve.yaml")], capture_output=True, text=True, check=True)
    assert (without.stdout.strip(), with_config.stdout.strip()) == ("False", "True")


def test_the_config_file_is_read_without_libyaml_as_the_bundle_carries_pyyaml(tmp_path):
    """build/prestop.spec leaves PyYAML's C extension out: the pure loader must read alone."""
    (tmp_path / "serve.yaml").write_text("port: 0x2329\n")
    program = ("import sys\nfor name in ('_yaml', 'yaml._yaml', 'yaml.cyaml'): sys.modules[name] = None\n"
               "from modeldrain.hook.engine import hint_from_argv\n"
               "import yaml\nprint(yaml.__with_libyaml__, hint_from_argv(sys.argv[1:]).port)")
    done = subprocess.run([sys.executable, "-c", program, "vllm", "serve", "m", "--config", str(tmp_path / "serve.yaml")],
                          capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "9001"]
