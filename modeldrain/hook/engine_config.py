"""An engine's `--config FILE` read as the engine reads it: PyYAML's safe loader, bounded.

vLLM's FlexibleArgumentParser (load_config_file) reads the file with `yaml.safe_load` and turns
each top-level key into flags; SGLang reads it with PyYAML too. So this reads it with PyYAML's own
pure-Python SafeLoader (the same resolver, YAML 1.1 integers such as `0x2329` and `9_001`, merge
keys, directives, a BOM, JSON), never with a reader of its own, and turns the mapping into words
with vLLM's rules. It is imported only where an engine's argv names --config: PyYAML costs about
13 ms of import (`python -X importtime -c "import yaml"`).

Bounded, since a YAML file can stand for far more than its bytes: at most MAX_CONFIG_FILE_BYTES
are read (by the caller), nesting deeper than MAX_DEPTH, a document of more than MAX_NODES nodes
once its aliases are expanded (an alias bomb: a kilobyte that stands for billions of values), a
recursive alias, or a parse past its deadline: each is ConfigUnreadable, as is anything the
engine itself would refuse to start on (not a mapping, a key that is not a string, a value that
is no JSON). ConfigUnreadable says why in one line; the caller then knows none of the file's flags.
"""

from __future__ import annotations

import json
import time
from typing import Any, Container

import yaml

__all__ = ["ConfigUnreadable", "MAX_CONFIG_FILE_BYTES", "config_words", "load_config"]

# vLLM's and SGLang's config files are a screenful of flags; a file this large is not one.
MAX_CONFIG_FILE_BYTES = 64 * 1024
# Nodes of the document with every alias expanded: a flat file of flags has a few dozen.
MAX_NODES = 10_000
# Mappings and lists inside each other: the engines' nested JSON flags are two or three deep.
MAX_DEPTH = 32
# The parse's own bound on the clock (64 KiB of adversarial YAML parses in well under this).
PARSE_DEADLINE_S = 1.0


class ConfigUnreadable(ValueError):
    """The file is not one the hook can read as the engine does; the message says why, in one line."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's SafeLoader, which refuses nesting past MAX_DEPTH and a parse past its deadline, both
    checked on every token its scanner reads (the scanner reads ahead over a run of `[`, before any
    node is composed) and on every node composed."""

    def __init__(self, text: str, deadline_at: float):
        super().__init__(text)
        self._deadline_at = deadline_at
        self._depth = 0

    def _within_bounds(self) -> None:
        if time.monotonic() > self._deadline_at:
            raise ConfigUnreadable(f"its parse took longer than {PARSE_DEADLINE_S:g} s")
        if self.flow_level > MAX_DEPTH or len(self.indents) > MAX_DEPTH:
            raise ConfigUnreadable(f"nested deeper than {MAX_DEPTH} levels")

    def fetch_more_tokens(self) -> None:
        self._within_bounds()
        super().fetch_more_tokens()

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._within_bounds()
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise ConfigUnreadable(f"nested deeper than {MAX_DEPTH} levels")
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def load_config(text: str, deadline_s: float = PARSE_DEADLINE_S) -> dict[str, Any]:
    """The top-level mapping of `text` as yaml.safe_load gives it; ConfigUnreadable when it is not
    one the engine would start on, or is past a bound."""
    loader = _BoundedLoader(text, time.monotonic() + deadline_s)
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigUnreadable("it is empty (the engine refuses it: no mapping of flags)")
        _count_nodes(node)
        config = loader.construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigUnreadable(f"not valid YAML: {' '.join(str(exc).split())}"[:300]) from None
    except RecursionError:
        raise ConfigUnreadable("nested too deep to read") from None
    finally:
        loader.dispose()
    if not isinstance(config, dict):
        raise ConfigUnreadable(f"its top level is a {type(config).__name__}, not a mapping of flags "
                               "(the engine refuses it)")
    for key in config:
        if not isinstance(key, str):
            raise ConfigUnreadable(f"its key {key!r} is not a string (the engine refuses it)")
    return config


def _count_nodes(root: yaml.Node) -> None:
    """Refuse a document of more than MAX_NODES nodes with its aliases expanded, or a recursive one.
    Each node is sized once (an alias is the same node object), so this is linear in the file."""
    sizes: dict[int, int] = {}
    in_progress: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            in_progress.discard(key)
            size = 1 + sum(sizes[id(child)] for child in _children(node))
            if size > MAX_NODES:
                raise ConfigUnreadable(f"it stands for more than {MAX_NODES} values once its aliases are expanded")
            sizes[key] = size
            continue
        if key in sizes:
            continue
        if key in in_progress:
            raise ConfigUnreadable("an alias refers to a value that contains it (a recursive document)")
        in_progress.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node) if id(child) not in sizes)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def config_words(config: dict[str, Any], negations: Container[str] = ()) -> list[str]:
    """The mapping as vLLM's load_config_file turns it into argv words: `--key value`; a true
    boolean `--key`, a false one `--no-key` where that is one of the engine's flags (`negations`:
    those the caller knows; vLLM looks the key up as written, before its underscores become
    dashes) and nothing otherwise; a list `--key item...` (none when empty); a mapping `--key
    JSON`; anything else `--key str(value)`."""
    words: list[str] = []
    for key, value in config.items():
        flag = "--" + key
        if isinstance(value, bool):
            words += [flag] if value else [f"--no-{key}"] if f"--no-{key}" in negations else []
        elif isinstance(value, list):
            words += [flag, *(str(item) for item in value)] if value else []
        elif isinstance(value, dict):
            try:
                words += [flag, json.dumps(value)]
            except (TypeError, ValueError) as exc:
                raise ConfigUnreadable(f"its {key} is not JSON ({exc}): the engine refuses it") from None
        else:
            words += [flag, str(value)]
    return words
