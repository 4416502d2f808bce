"""The stream written back: only the changed documents' root nodes re-written, every other byte kept,
whatever the layout around them (markers on the root's line, `...`, a trailing block scalar, CRLF)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from modeldrain.inject.stream import rewrite
from modeldrain.lint.manifest_files import UnreadableManifest

POLICY = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "added"}}


def mark(value: Any, index: int):
    """Change every Pod: a label added, and one object after it."""
    if isinstance(value, dict) and value.get("kind") == "Pod":
        return {**value, "metadata": {"name": "p", "labels": {"changed": "yes"}}}, [POLICY]
    return None


@pytest.mark.parametrize("text", [
    "# head\n---\nkind: Pod  # lost with the rewrite\nmetadata: {name: p}\n# between\n---\nkind: Service\n",
    "--- {kind: Pod, metadata: {name: p}}\n--- # c\nkind: Service\n",
    "---\n  kind: Pod\n  metadata: {name: p}\n...\n# after the end marker\n---\nkind: Service\n",
    "kind: Pod\nmetadata: {name: p}\ndata: |\n  line\n\n# trailing\n---\nkind: Service\n",
    "kind: Service\r\n---\r\nkind: Pod\r\nmetadata: {name: p}\r\n",
    "kind: Service\n---\nkind: Pod\nmetadata: {name: p}",  # no final newline
])
def test_a_changed_document_is_replaced_and_nothing_else_moves(text):
    out = rewrite("s.yaml", text, mark)
    got = [d for d in yaml.safe_load_all(out) if d]
    kinds = [d["kind"] for d in got]
    assert kinds.count("Pod") == 1 and kinds.count("Service") == 1 and kinds.count("ConfigMap") == 1
    assert next(d for d in got if d["kind"] == "Pod")["metadata"]["labels"] == {"changed": "yes"}
    assert kinds.index("ConfigMap") == kinds.index("Pod") + 1
    service = text[text.index("kind: Service"):].split("---")[0]
    assert service in out  # the untouched document, byte for byte
    assert rewrite("s.yaml", text, lambda value, index: None) == text


def test_a_rewrite_that_reads_back_differently_is_refused():
    def breaks(value: Any, index: int):
        return ({"kind": "Pod", "x": float("nan")}, []) if value.get("kind") == "Pod" else None

    with pytest.raises(UnreadableManifest, match="reads back differently"):
        rewrite("s.yaml", "kind: Pod\n", breaks)


def test_json_comes_back_as_json_and_a_list_when_objects_are_added():
    out = rewrite("d.json", '{"kind": "Pod", "metadata": {"name": "p"}}', mark)
    assert yaml.safe_load(out)["kind"] == "List" and out.startswith("{")
    assert [i["kind"] for i in yaml.safe_load(out)["items"]] == ["Pod", "ConfigMap"]
