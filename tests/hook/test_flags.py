"""The value parsers every program shares: what they accept, and the one-line words they refuse with."""

import argparse

import pytest

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.hook.flags import (
    MAX_SECONDS,
    Parser,
    parse_engine,
    parse_listen,
    parse_path,
    parse_port,
    parse_role,
    parse_scheme,
    parse_seconds,
    parse_whole_number,
    seconds_arg,
)
from modeldrain.hook.gauges import EngineKind, Role


@pytest.mark.parametrize("text, kwargs, expected", [
    ("5", {}, 5.0),
    (" 0.25 ", {}, 0.25),
    ("0", {}, 0.0),
    ("1e3", {}, 1000.0),
    (str(MAX_SECONDS), {}, MAX_SECONDS),
])
def test_seconds(text, kwargs, expected):
    assert parse_seconds(text, what="--x", **kwargs) == expected


@pytest.mark.parametrize("text, kwargs", [
    ("abc", {}), ("nan", {}), ("inf", {}), ("-1", {}), ("1e10", {}), ("", {}),
    ("0", {"inclusive": False}),  # a strict lower bound
    ("0.5", {"minimum": 1.0}),
])
def test_bad_seconds_name_the_flag_and_the_value(text, kwargs):
    with pytest.raises(ValueError, match=r"^--x must be a number of seconds") as raised:
        parse_seconds(text, what="--x", **kwargs)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize("text", ["\u00b2", "\u0663", "1_000", "+5", "0x10", "1.0", "1" * 10, " ", "-0"])
def test_whole_numbers_are_ascii_digits_only(text):
    # str.isdigit() accepts '²' and Arabic-Indic digits; int() accepts '1_000' and '+5'.
    with pytest.raises(ValueError, match="must be a whole number"):
        parse_whole_number(text, what="N", minimum=0)


def test_whole_number_bounds():
    assert parse_whole_number(" 7 ", what="N", minimum=1, maximum=7) == 7
    with pytest.raises(ValueError, match=r"N must be a whole number >= 1 and <= 7, got '8'"):
        parse_whole_number("8", what="N", minimum=1, maximum=7)
    with pytest.raises(ValueError, match=r">= 1, got '0'"):
        parse_whole_number("0", what="N", minimum=1)


def test_ports():
    assert parse_port("8000") == 8000
    assert parse_port("0", allow_zero=True) == 0
    for bad in ("0", "65536", "http", "\u00b2"):
        with pytest.raises(ValueError, match="port must be a whole number >= "):
            parse_port(bad)


@pytest.mark.parametrize("path", ["/metrics", "/a/b?x=1", "/%C3%A9"])
def test_paths(path):
    assert parse_path(path) == path


@pytest.mark.parametrize("path, problem", [
    ("metrics", "must start with '/'"),
    ("/a b", "printable ASCII"),
    ("/a\r\nHost: evil", "printable ASCII"),
    ("/m\u00e9trics", "printable ASCII"),  # would not encode into the request line
])
def test_bad_paths(path, problem):
    with pytest.raises(ValueError, match=problem):
        parse_path(path)


def test_scheme_engine_and_role():
    assert parse_scheme(" HTTPS ") == "https"
    assert parse_engine("SGLang") is EngineKind.SGLANG
    assert parse_role("null") is Role.UNIFIED  # SGLang's own spelling of a unified server
    assert parse_role("unified") is Role.UNIFIED
    assert parse_role("decode") is Role.DECODE
    for parse, bad in ((parse_scheme, "ftp"), (parse_engine, "tgi"), (parse_role, "both")):
        with pytest.raises(ValueError, match="must be"):
            parse(bad)


@pytest.mark.parametrize("text, expected", [
    ("127.0.0.1:8490", ("127.0.0.1", 8490)),
    (":9000", ("", 9000)),
    ("[::1]:0", ("::1", 0)),
    ("0.0.0.0:65535", ("0.0.0.0", 65535)),
])
def test_listen_addresses(text, expected):
    assert parse_listen(text) == expected


@pytest.mark.parametrize("text", ["8490", "host:", "host:http", "host:70000", "a b:1", "[::1:80"])
def test_bad_listen_addresses(text):
    with pytest.raises(ValueError):
        parse_listen(text)


def test_usage_error_is_one_line_naming_the_flag_once(capsys):
    parser = Parser(prog="tool")
    parser.add_argument("--wait", type=seconds_arg("--wait"))
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--wait", "soon"])
    assert exited.value.code == ExitCode.USAGE
    err = capsys.readouterr().err
    assert err == "tool: error: --wait must be a number of seconds, got 'soon' (see tool --help)\n"


def test_argparse_type_adapter_keeps_argparse_errors_for_other_problems(capsys):
    parser = Parser(prog="tool")
    parser.add_argument("--n", type=int)
    with pytest.raises(SystemExit):
        parser.parse_args(["--bogus"])
    assert capsys.readouterr().err.startswith("tool: error: unrecognized arguments: --bogus")
    assert isinstance(parser, argparse.ArgumentParser)
