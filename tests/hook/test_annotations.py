"""The downward-API annotations file: Go-quoted values and the errors people will hit."""

import pytest

from modeldrain.hook.annotations import AnnotationsError, go_unquote, parse_annotations, read_annotations


def test_downward_api_file_is_parsed():
    text = 'kubernetes.io/config.seen="2026-11-29T10:00:00Z"\nprometheus.io/port="9100"\nprometheus.io/path="/metrics"\n'
    got = parse_annotations(text)
    assert got["prometheus.io/port"] == "9100" and got["prometheus.io/path"] == "/metrics"


@pytest.mark.parametrize("quoted, plain", [
    (r'"a\"b"', 'a"b'),
    (r'"line\nnext\ttab"', "line\nnext\ttab"),
    (r'"back\\slash"', "back\\slash"),
    (r'"\x41\101\u00e9\U0001F600"', "AAé😀"),
    ('"é plain utf-8"', "é plain utf-8"),
    (r'"\xc3\xa9"', "é"),  # Go quotes invalid-UTF-8-free bytes this way too
])
def test_go_unquote(quoted, plain):
    assert go_unquote(quoted) == plain


@pytest.mark.parametrize("bad", ['9100', '"unterminated', r'"bad \q escape"', '"stray " quote"'])
def test_go_unquote_rejects_malformed(bad):
    with pytest.raises(ValueError):
        go_unquote(bad)


def test_bad_line_is_named():
    with pytest.raises(AnnotationsError, match="line 2"):
        parse_annotations('a="1"\nno equals sign here\n')


def test_unreadable_file_is_a_clear_error(tmp_path):
    with pytest.raises(AnnotationsError, match="cannot read"):
        read_annotations(str(tmp_path / "absent"))
