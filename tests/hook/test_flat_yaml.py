"""The bounded flat-YAML reader of an engine's --config file, against PyYAML's safe_load (the
engines' own reader) as the oracle: where it gives a value, it is PyYAML's; otherwise it says so."""

import string

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from modeldrain.hook.flat_yaml import FlatYamlError, Unfollowed, parse_flat_mapping


def _reads_as_a_key_of_its_own(key: str, value: object) -> bool:
    return isinstance(value, Unfollowed) and "a key YAML reads as" in value.why


def agrees_with_pyyaml(text: str) -> dict:
    mine = parse_flat_mapping(text)
    try:
        theirs = yaml.safe_load(text) or {}
    except yaml.YAMLError:
        return mine  # the engine refuses to start on such a file: what the hook reads of it never matters
    # A key YAML reads as no string (`on`, `null`) names no flag: set aside, never read as one.
    strings = {key for key in theirs if isinstance(key, str)}
    assert {key for key, value in mine.items() if not _reads_as_a_key_of_its_own(key, value)} == strings, (mine, theirs)
    for key, value in mine.items():
        if not isinstance(value, Unfollowed):
            assert value == theirs[key] and type(value) is type(theirs[key]), (key, value, theirs[key])
    return mine


@pytest.mark.parametrize("text", [
    "port: 9001\nhost: ::1\n", "host: 0.0.0.0\nport: '9002' # a comment\n", "---\nport: 9001\n",
    "kv-transfer-config:\n  kv_connector: X\n  kv_role: kv_producer\n", 'kv-transfer-config: {"kv_role": "kv_consumer"}\n',
    "data-parallel-external-lb: yes\nenable: off\nx: ~\ny:\n", "a: b # c\nhost: 10.0.0.5\nuds: /tmp/x.sock\n",
    "list:\n  - 1\n  - two\n", 'port: "9003"\n', "k: 'it''s'\n", "k: a#b\n", "port: 9001\nport: 9002\n",
    "p: 0x2329\nq: 9_001\nr: 1.5\ns: 0123\nt: 1:30\nu: .inf\n", "a: &x 1\nb: *x\nc: !!str 5\nd: |\n  text\n",
    "deep:\n  a:\n    b: 1\n",
])
def test_samples_agree_with_pyyaml(text):
    agrees_with_pyyaml(text)


@pytest.mark.parametrize("text", ["port 9001\n", "  port: 1\n", "- a\n", "a: 1\n---\nb: 2\n", "\tport: 1\n"])
def test_what_is_not_a_flat_mapping_is_refused_whole(text):
    with pytest.raises(FlatYamlError, match="line"):
        parse_flat_mapping(text)


SCALARS = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.sampled_from(["-", "- a", "-5", "?", ":", ",a", "true", "False", "yes", "NO", "on", "Off", "null", "~", "0x10", "0o7", "1_000", "1.5", "1e3",
                     ".5", "1:30", "0123", "::1", "0.0.0.0", "10.0.0.5", "/a/b.sock", "a#b", "a #b", "kv_producer"]),
    st.text(string.ascii_letters + string.digits + "-_./", min_size=1, max_size=12),
    st.text(string.ascii_letters + " '#:", max_size=8).map(lambda t: "'" + t.replace("'", "''") + "'"),
    st.text(string.ascii_letters + " #:", max_size=8).map(lambda t: '"' + t + '"'),
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.from_regex(r"[a-z][a-z0-9_-]{0,10}", fullmatch=True), SCALARS, max_size=6))
def test_generated_flat_files_agree_with_pyyaml(entries):
    agrees_with_pyyaml("".join(f"{key}: {value}\n" for key, value in entries.items()))


def test_a_key_yaml_reads_as_a_boolean_or_null_is_not_a_flag():
    read = agrees_with_pyyaml("on: 0\nnull: 1\nport: 9001\n")
    assert read["port"] == 9001 and isinstance(read["on"], Unfollowed) and isinstance(read["null"], Unfollowed)
