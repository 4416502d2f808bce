"""Manifest files read with a bound on everything: their size, their depth, and what aliases expand to.

`modeldrain lint` and `modeldrain inject` read files a user hands them, and a Helm chart's or a
stranger's YAML is input like any other. Unbounded, PyYAML answers a 1.4 KB alias bomb with
billions of nodes the moment anything walks the result, 20,000 nested flow brackets with a
RecursionError, and a 60 MB file after half a minute. So, before anything is built:

- a file is read up to MAX_BYTES; one byte more is refused unread;
- YAML is first read as PyYAML's own event stream (libyaml's parser where PyYAML has it), where
  each collection's depth and each document's expanded node count (an alias counts as every node
  of what it names) are counted; past MAX_DEPTH or MAX_NODES, or an alias to a node still open
  (a recursive structure), it is refused before a single object is made;
- JSON is parsed by the standard library, its depth and size held to the same caps, and a
  RecursionError (nesting past what the interpreter's parser takes) is a refusal too.

Every refusal is one line naming the file. The same event stream gives each document's span in
the text, which is how `modeldrain inject` re-emits the documents it does not change byte for byte.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import IO, Any

__all__ = [
    "MAX_BYTES", "MAX_DEPTH", "MAX_NODES", "STDIN", "UnreadableManifest", "is_json", "load_documents", "load_json",
    "load_yaml", "read_text",
]

# Kubernetes takes at most 3 MiB in one request (etcd stores at most 1.5 MiB an object); a
# chart's whole rendered stream is rarely more. Past this, a file is refused before it is parsed.
MAX_BYTES = 4 << 20
# Kubernetes objects nest about 15 deep (a LeaderWorkerSet's probe's httpGet's header list: 14).
MAX_DEPTH = 64
# Nodes one file may expand to, aliases counted as what they name: deploy/leaderworkerset.yaml has
# about 700; PyYAML reads some 200,000 a second, so a refusal comes within the 2 s a tool may take.
MAX_NODES = 300_000
# A file named so is standard input.
STDIN = "-"
# A file whose first non-blank character is one of these is JSON; anything else is YAML.
JSON_STARTS = ("{", "[")


class UnreadableManifest(Exception):
    """A file that cannot be read or parsed, or is past a cap: one line naming the file."""


@dataclass(frozen=True)
class Parsed:
    """One document as PyYAML reads it, and where its root node sits in the text ((0, 0) when empty)."""

    value: Any
    start: int
    end: int


def read_text(path: str, stdin: IO[bytes] | None = None) -> str:
    """The whole file (or standard input for "-") as text, refused past MAX_BYTES or when not UTF-8."""
    try:
        if path == STDIN:
            raw = (stdin or sys.stdin.buffer).read(MAX_BYTES + 1)
        else:
            with open(path, "rb") as f:
                raw = f.read(MAX_BYTES + 1)
    except OSError as exc:
        raise UnreadableManifest(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_BYTES:
        raise UnreadableManifest(f"{path}: larger than {MAX_BYTES >> 20} MiB: not read (no manifest is that large)")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnreadableManifest(f"{path}: not UTF-8 text (byte {exc.start})") from None


def is_json(text: str) -> bool:
    return text.lstrip().startswith(JSON_STARTS)


def load_documents(path: str, text: str) -> list[Any]:
    """Every non-empty document of a file's text: JSON (one value; a list is its items) or YAML."""
    if is_json(text):
        parsed = load_json(path, text)
        return parsed if isinstance(parsed, list) else [parsed]
    return [document.value for document in load_yaml(path, text) if document.value is not None]


def load_json(path: str, text: str) -> Any:
    try:
        value = json.loads(text)
    except RecursionError:
        raise UnreadableManifest(f"{path}: nested deeper than {MAX_DEPTH} levels: not a manifest") from None
    except ValueError as exc:
        raise UnreadableManifest(f"{path}: not valid JSON: {exc}") from None
    _check_shape(path, value)
    return value


def _check_shape(path: str, value: Any) -> None:
    """Depth and node count of a parsed value, walked without recursion."""
    nodes = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            raise UnreadableManifest(f"{path}: more than {MAX_NODES} values: not a manifest")
        if isinstance(item, (dict, list)):
            if depth > MAX_DEPTH:
                raise UnreadableManifest(f"{path}: nested deeper than {MAX_DEPTH} levels: not a manifest")
            children = item.values() if isinstance(item, dict) else item
            if nodes + len(stack) + len(children) > MAX_NODES:  # refused before a long list is walked
                raise UnreadableManifest(f"{path}: more than {MAX_NODES} values: not a manifest")
            stack.extend((child, depth + 1) for child in children)


def _yaml(path: str) -> Any:
    try:
        import yaml
    except ImportError:
        raise UnreadableManifest(f"{path}: YAML needs PyYAML, which this prestop does not carry: install it "
                                 "(pip install pyyaml) or give the object as JSON (kubectl get ... -o json, or "
                                 "kubectl create --dry-run=client -o json -f FILE)") from None
    return yaml


def load_yaml(path: str, text: str) -> list[Parsed]:
    """Every document of a YAML stream, with its root node's span; refused past the caps."""
    yaml = _yaml(path)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        spans = _spans(path, yaml.parse(text, Loader=loader), yaml)
        values = list(yaml.load_all(text, Loader=loader))
    except yaml.YAMLError as exc:
        raise UnreadableManifest(f"{path}: not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise UnreadableManifest(f"{path}: nested deeper than {MAX_DEPTH} levels: not a manifest") from None
    except (ValueError, OverflowError) as exc:  # a scalar PyYAML cannot make (an integer of 5,000 digits)
        raise UnreadableManifest(f"{path}: a value PyYAML cannot read: {exc}") from None
    if len(values) != len(spans):
        raise UnreadableManifest(f"{path}: PyYAML read {len(values)} documents but parsed {len(spans)}")
    return [Parsed(value, start, end) for value, (start, end) in zip(values, spans)]


def _spans(path: str, events: Any, yaml: Any) -> list[tuple[int, int]]:
    """Each document's root node span, from PyYAML's events, counting depth and expanded nodes.

    The span ends where the last scalar, alias or flow collection ends: a block collection's own
    end mark lies past the comments that follow it, which belong between the documents."""
    spans: list[tuple[int, int]] = []
    nodes = 0
    open_nodes: list[tuple[int, str | None]] = []  # (nodes counted when it opened, its anchor)
    sizes: dict[str, int] = {}  # anchor -> nodes it expands to, once closed
    start = end = 0
    for event in events:
        if isinstance(event, yaml.DocumentStartEvent):
            sizes.clear()
            start = end = -1
            continue
        if isinstance(event, yaml.DocumentEndEvent):
            spans.append((start, end) if start >= 0 else (0, 0))
            continue
        if not isinstance(event, (yaml.NodeEvent, yaml.CollectionEndEvent)):
            continue
        if start < 0:
            start = event.start_mark.index
        if isinstance(event, yaml.AliasEvent):
            size = sizes.get(event.anchor)
            if size is None:
                raise UnreadableManifest(f"{path}: alias *{event.anchor} names a node that contains it "
                                         "(or none): a recursive structure, not a manifest")
            nodes += size
            end = event.end_mark.index
        elif isinstance(event, yaml.CollectionStartEvent):
            open_nodes.append((nodes, event.anchor))
            if len(open_nodes) > MAX_DEPTH:
                raise UnreadableManifest(f"{path}: nested deeper than {MAX_DEPTH} levels: not a manifest")
            if event.flow_style:
                end = event.end_mark.index
            continue
        elif isinstance(event, yaml.CollectionEndEvent):
            opened, anchor = open_nodes.pop()
            nodes += 1
            if anchor is not None:
                sizes[anchor] = nodes - opened
            if _flow_end(event, yaml):
                end = event.end_mark.index
        else:  # a scalar
            nodes += 1
            if event.anchor is not None:
                sizes[event.anchor] = 1
            end = event.end_mark.index
        if nodes > MAX_NODES:
            raise UnreadableManifest(f"{path}: expands to more than {MAX_NODES} nodes (aliases counted as what "
                                     "they name): an alias bomb, or not a manifest")
    return spans


def _flow_end(event: Any, yaml: Any) -> bool:
    """A `]` or `}`: its end mark is the bracket's own (a block collection's is the next token's)."""
    return bool(event.start_mark.index != event.end_mark.index)
