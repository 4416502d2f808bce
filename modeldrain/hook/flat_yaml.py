"""A bounded reader for the flat YAML of an engine's `--config FILE`, where PyYAML is not carried.

vLLM and SGLang read `--config FILE` with PyYAML's safe_load and turn each top-level key into
flags. PyYAML would add 252 KB of Python (plus a 2.9 MB C extension) to the hook's bundle and
13-21 ms to its start (`python -X importtime -c "import yaml"`, `du -ch yaml/*.py`), for files
that are `key: value` lines. So this reads that much of YAML and says, per key, when it cannot
follow a value, instead of guessing it.

What it follows: one mapping at the top level; `key: value` lines with plain, single-quoted or
double-quoted (JSON escapes) scalars; YAML 1.1's booleans (true/false/yes/no/on/off in their
three spellings) and nulls (null, ~, empty) as PyYAML resolves them; decimal integers; a JSON
flow value (`{"kv_role": "kv_producer"}`, `[1, 2]`); one level of block mapping or block list
of such scalars under a key; `#` comments; a leading `---`. What it does not follow, and says
so for that key (`Unfollowed`): anchors, aliases, tags, block scalars (| and >), multi-line
scalars, deeper nesting, non-JSON flow collections, and the numbers PyYAML reads otherwise than
their text (floats, 0x/0o/0b, 1_000, 1:30). A line that is none of these makes the whole file
unreadable (`FlatYamlError`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Union

# vLLM's and SGLang's config files are a screenful of flags; a file this large is not one.
MAX_CONFIG_FILE_BYTES = 64 * 1024

_KEY = r"[A-Za-z0-9_][A-Za-z0-9_.-]*"
_ENTRY = re.compile(rf"^(?P<key>{_KEY})[ \t]*:(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_ITEM = re.compile(r"^-(?:[ \t]+(?P<value>.*?))?[ \t]*$")
_DECIMAL = re.compile(r"^[-+]?(0|[1-9][0-9]*)$")
# YAML 1.1's int and float forms, as PyYAML's resolver reads a plain scalar: binary, octal, hex,
# underscores and base 60 are numbers whose value is not their text.
_YAML_INT = re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+"
                       r"|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$")
_YAML_FLOAT = re.compile(r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9][0-9_]*(?:[eE][-+][0-9]+)?"
                         r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
_TRUE = {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"}
_FALSE = {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"}
_NULL = {"", "~", "null", "Null", "NULL"}
_NOT_FOLLOWED_START = tuple("&*!|>%@`")

Scalar = Union[str, int, bool, None]
Value = Union[Scalar, dict, list]


@dataclass(frozen=True)
class Unfollowed:
    """A key whose value this reader does not follow; `why` says what it is."""

    why: str


class FlatYamlError(ValueError):
    """The file is not a flat mapping this reader follows; the message names the line."""


def parse_flat_mapping(text: str) -> dict[str, Value | Unfollowed]:
    """The top-level mapping of `text`, each value as PyYAML's safe_load gives it, or Unfollowed."""
    lines = _meaningful_lines(text)
    result: dict[str, Value | Unfollowed] = {}
    i = 0
    while i < len(lines):
        number, indent, body = lines[i]
        if indent:
            raise FlatYamlError(f"line {number}: indented where a top-level key was expected")
        match = _ENTRY.match(body)
        if not match:
            raise FlatYamlError(f"line {number}: not a `key: value` line")
        key, raw = match["key"], match["value"] or ""
        block = []
        i += 1
        while i < len(lines) and lines[i][1] > 0:
            block.append(lines[i])
            i += 1
        if not isinstance(_scalar(key), str):  # `on:`, `null:`, `1:`: YAML's key is no flag name
            result[key] = Unfollowed(f"a key YAML reads as {_scalar(key)!r}, not as the string {key!r}")
        elif block and raw:
            result[key] = Unfollowed("a value continued on the next lines")
        elif block:
            result[key] = _block(block)
        else:
            result[key] = _scalar(raw)
    return result


def _meaningful_lines(text: str) -> list[tuple[int, int, str]]:
    """(line number, indentation, content without its comment) of each line that says something."""
    lines: list[tuple[int, int, str]] = []
    opened = False  # a leading `---` seen
    for number, line in enumerate(text.splitlines(), start=1):
        if "\t" in line[: len(line) - len(line.lstrip())]:
            raise FlatYamlError(f"line {number}: a tab in the indentation (YAML forbids it)")
        content = _strip_comment(line).rstrip()
        if not content.strip():
            continue
        if not lines and not opened and content.strip() == "---":
            opened = True
            continue
        if content.strip() in ("---", "..."):
            raise FlatYamlError(f"line {number}: a second document")
        lines.append((number, len(content) - len(content.lstrip(" ")), content.strip()))
    return lines


def _strip_comment(line: str) -> str:
    """The line without a `#` comment (one at the start, or after a space, outside quotes)."""
    quote = ""
    for i, char in enumerate(line):
        if quote:
            if char == quote:
                quote = ""
        elif char in "'\"" and (i == 0 or line[i - 1] in " \t:-[{,"):
            quote = char
        elif char == "#" and (i == 0 or line[i - 1] in " \t"):
            return line[:i]
    return line


def _block(block: list[tuple[int, int, str]]) -> Value | Unfollowed:
    """One level of block mapping (`  sub: scalar`) or block list (`  - scalar`) under a key."""
    indent = block[0][1]
    if any(line_indent != indent for _, line_indent, _ in block):
        return Unfollowed("nested deeper than one level")
    items = [_ITEM.match(body) for _, _, body in block]
    if all(items):
        values = [_scalar(m["value"] or "") for m in items if m]
        if any(isinstance(v, (Unfollowed, dict, list)) for v in values):
            return Unfollowed("a list of values this reader does not follow")
        return values
    entries = [_ENTRY.match(body) for _, _, body in block]
    if not all(entries):
        return Unfollowed("a nested block that is neither a mapping nor a list")
    mapping: dict[str, Value] = {}
    for m in entries:
        assert m is not None
        value = _scalar(m["value"] or "")
        if isinstance(value, Unfollowed):
            return Unfollowed(f"its {m['key']}: {value.why}")
        mapping[m["key"]] = value
    return mapping


def _scalar(raw: str) -> Value | Unfollowed:
    if raw.startswith(_NOT_FOLLOWED_START):
        return Unfollowed(f"{raw[0]!r}: an anchor, alias, tag or block scalar")
    if raw.startswith(("{", "[")):
        try:
            flow = json.loads(raw)
        except ValueError:
            return Unfollowed("a flow collection that is not JSON")
        return flow if isinstance(flow, (dict, list)) else Unfollowed("a flow collection that is not JSON")
    if raw.startswith('"'):
        try:
            text = json.loads(raw)
        except ValueError:
            return Unfollowed("a double-quoted string with escapes YAML reads otherwise than JSON")
        return text if isinstance(text, str) else Unfollowed("not one quoted string")
    if raw.startswith("'"):
        if len(raw) < 2 or not raw.endswith("'") or "'" in raw[1:-1].replace("''", ""):
            return Unfollowed("a single-quoted string that does not end on its line")
        return raw[1:-1].replace("''", "'")
    if raw in _NULL:
        return None
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    if _DECIMAL.match(raw):
        return int(raw)
    if _YAML_INT.match(raw) or _YAML_FLOAT.match(raw):
        return Unfollowed(f"{raw!r}: a number PyYAML reads otherwise than its text")
    if ": " in raw or raw.endswith(":"):
        return Unfollowed("a mapping on the key's own line")
    if raw[0] in ",]}" or (raw[0] in "-?:" and (len(raw) == 1 or raw[1] == " ")):
        return Unfollowed(f"{raw[0]!r}: an indicator YAML does not allow to start a plain value")
    return raw
