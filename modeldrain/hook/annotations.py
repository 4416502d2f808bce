"""The Pod's scrape annotations, read from a downward-API annotations file.

The file holds one `key="value"` line per annotation, the value quoted as Go's %q quotes it
(strconv.Quote): backslash escapes \\a \\b \\f \\n \\r \\t \\v \\\\ \\" , \\xHH and octal \\NNN
bytes, and \\uHHHH / \\UHHHHHHHH code points.
"""

from __future__ import annotations

import os
import re

from modeldrain.hook.files import SmallFileError, read_small_file

__all__ = [
    "AnnotationsError", "DEFAULT_ANNOTATIONS_FILE", "PATH_ANNOTATION", "PORT_ANNOTATION", "SCHEME_ANNOTATION",
    "default_annotations_file", "go_unquote", "parse_annotations", "read_annotations",
]

# Where deploy/'s manifests mount the downward-API annotations volume; absent outside a Pod.
DEFAULT_ANNOTATIONS_FILE = "/etc/podinfo/annotations"

# Kubernetes caps all of a Pod's annotations at 256 KiB; four times that is not an annotations file.
MAX_ANNOTATIONS_BYTES = 1024 * 1024

PORT_ANNOTATION = "prometheus.io/port"
PATH_ANNOTATION = "prometheus.io/path"
SCHEME_ANNOTATION = "prometheus.io/scheme"

_SIMPLE_ESCAPES = {
    "a": b"\a", "b": b"\b", "f": b"\f", "n": b"\n", "r": b"\r", "t": b"\t", "v": b"\v",
    "\\": b"\\", '"': b'"', "'": b"'",
}
_ESCAPE = re.compile(r'\\(?:([abfnrtv\\"\'])|x([0-9a-fA-F]{2})|([0-7]{3})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8}))')


class AnnotationsError(ValueError):
    """The annotations file cannot be read or is not in the downward-API format."""


def go_unquote(quoted: str) -> str:
    """Undo Go's strconv.Quote; raises ValueError on a malformed value."""
    if len(quoted) < 2 or quoted[0] != '"' or quoted[-1] != '"':
        raise ValueError(f"not a double-quoted value: {quoted!r}")
    body = quoted[1:-1]
    out = bytearray()
    pos = 0
    for m in _ESCAPE.finditer(body):
        out += _plain(body[pos : m.start()])
        simple, hex_byte, octal, u4, u8 = m.groups()
        if simple:
            out += _SIMPLE_ESCAPES[simple]
        elif hex_byte:
            out.append(int(hex_byte, 16))
        elif octal:
            if int(octal, 8) > 255:
                raise ValueError(f"octal escape out of range in {quoted!r}")
            out.append(int(octal, 8))
        else:
            out += chr(int(u4 or u8, 16)).encode("utf-8")
        pos = m.end()
    out += _plain(body[pos:])
    return out.decode("utf-8", "replace")


def _plain(text: str) -> bytes:
    if "\\" in text or '"' in text:
        raise ValueError(f"bad escape or stray quote in {text!r}")
    return text.encode("utf-8")


def parse_annotations(text: str) -> dict[str, str]:
    """Parse the file's lines; raises AnnotationsError naming the first bad line."""
    result: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        key, sep, value = line.partition("=")
        if not sep or not key:
            raise AnnotationsError(f"line {number}: expected key=\"value\", got {line!r}")
        try:
            result[key.strip()] = go_unquote(value.strip())
        except ValueError as exc:
            raise AnnotationsError(f"line {number}: {exc}") from None
    return result


def read_annotations(path: str) -> dict[str, str]:
    try:
        content = read_small_file(path, MAX_ANNOTATIONS_BYTES)
    except SmallFileError as exc:
        raise AnnotationsError(str(exc)) from None
    return parse_annotations(content.decode("utf-8", "replace"))


def default_annotations_file() -> str | None:
    return DEFAULT_ANNOTATIONS_FILE if os.path.exists(DEFAULT_ANNOTATIONS_FILE) else None
