"""A manifest stream written back with some documents replaced, every other byte as it was.

PyYAML cannot keep comments or a document's own layout, so only what changes is re-written: the
events PyYAML reads the stream with (modeldrain/lint/manifest_files.py) give each document's root
node span, and a changed document's root node is replaced within it; the markers, directives and
comments between documents, and every document left unchanged, are copied byte for byte. Objects
a workload adds (its NetworkPolicy) follow it as documents of their own. A JSON file is one
document: it is written back as JSON, a List when objects are added.

Before anything is written, the result is read back and compared with what was meant, document
by document: a splice that reads differently is a refusal, never output.
"""

from __future__ import annotations

import json
from typing import Any, Callable

from modeldrain.lint import manifest_files
from modeldrain.lint.manifest_files import UnreadableManifest

__all__ = ["Change", "rewrite"]

# A document's new value and the objects to add after it; None: leave it as it is.
Change = tuple[dict[str, Any], list[dict[str, Any]]] | None


def rewrite(path: str, text: str, change: Callable[[Any, int], Change]) -> str:
    """The stream with `change` applied to each document (by index)."""
    if manifest_files.is_json(text):
        return _rewrite_json(path, text, change)
    documents = manifest_files.load_yaml(path, text)
    out: list[str] = []
    expected: list[Any] = []
    position = 0
    for index, document in enumerate(documents):
        changed = change(document.value, index) if document.value is not None else None
        if changed is None:
            expected.append(document.value)
            continue
        value, added = changed
        start = _line_start(text, document.start)
        out.append(text[position:start])
        if start == document.start and start > 0 and text[start - 1] != "\n":
            out.append("\n")  # the root began on its `---` line: a block mapping starts on its own
        out.append(_dump(value))
        for extra in added:
            out.append("\n---\n" + _dump(extra))
        if text[document.start:document.end].endswith("\n"):
            out.append("\n")
        position = document.end
        expected += [value, *added]
    out.append(text[position:])
    result = "".join(out)
    _check(path, result, expected)
    return result


def _line_start(text: str, start: int) -> int:
    """Where the root node's line begins, when only blanks come before it on that line."""
    begin = text.rfind("\n", 0, start) + 1
    return begin if text[begin:start].strip() == "" else start


def _dump(value: Any) -> str:
    """Block style, keys in their order, no line folded, and no anchors: a value the input wrote
    through an alias is written out where it is used."""
    import yaml

    class Dumper(yaml.SafeDumper):
        def ignore_aliases(self, data: Any) -> bool:
            return True

    return str(yaml.dump(value, Dumper=Dumper, sort_keys=False, default_flow_style=False, allow_unicode=True,
                         width=1 << 30)).rstrip("\n")


def _rewrite_json(path: str, text: str, change: Callable[[Any, int], Change]) -> str:
    value = manifest_files.load_json(path, text)
    changed = change(value, 0)
    if changed is None:
        return text
    new, added = changed
    if added:
        if new.get("kind") == "List" and isinstance(new.get("items"), list):
            new["items"] += added
        else:
            new = {"apiVersion": "v1", "kind": "List", "items": [new, *added]}
    return json.dumps(new, indent=2, ensure_ascii=False) + "\n"


def _check(path: str, result: str, expected: list[Any]) -> None:
    try:
        got = [d.value for d in manifest_files.load_yaml(path, result) if d.value is not None]
    except UnreadableManifest as exc:
        raise UnreadableManifest(f"{path}: the rewritten stream does not read back ({exc}): nothing written") from None
    if got != [value for value in expected if value is not None]:
        raise UnreadableManifest(f"{path}: the rewritten stream reads back differently from what was meant "
                                 "(a layout the splice does not handle): nothing written")
