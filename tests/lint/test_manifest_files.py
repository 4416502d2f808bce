"""Hostile manifest files: each one line and exit 2 from `prestop lint`, never a traceback or a hang.

The inputs of issue 25's case 9 (an alias bomb of 342 bytes, 200,000-deep JSON, 20,000-deep flow
YAML, a 5,000-deep Pod command, a file past the size cap), and the bounds each one meets, through
libyaml's parser and PyYAML's own (where libyaml is missing)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from modeldrain.hook.exitcodes import ExitCode
from modeldrain.lint import manifest_files
from modeldrain.lint.manifest_files import MAX_BYTES, MAX_DEPTH, MAX_NODES, UnreadableManifest, load_documents

BOMB = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi"))
POD = "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: c\n    command: "
HOSTILE = {
    "alias bomb": (BOMB, "an alias bomb"),
    "200k-deep JSON": ("[" * 200_000 + "]" * 200_000, "nested deeper"),
    "20k-deep flow YAML": ("a: " + "[" * 20_000 + "]" * 20_000 + "\n", "nest"),
    "5k-deep Pod command": (POD + "[" * 5_000 + "]" * 5_000 + "\n", "nest"),
    "70-deep block YAML": ("".join(" " * i + f"k{i}:\n" for i in range(70)) + " " * 70 + "v\n", "nested deeper"),
    "recursive alias": ("a: &a [*a]\n", "recursive"),
    "5,000-digit integer": ("a: " + "1" * 5_000 + "\n", "cannot read"),
    "past the size cap": ("#" * (MAX_BYTES + 1), "larger than"),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_prestop_lint_refuses_in_one_line(tmp_path, name):
    text, said = HOSTILE[name]
    path = tmp_path / "hostile.yaml"
    path.write_text(text)
    done = subprocess.run([sys.executable, "-m", "modeldrain.hook", "lint", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == ExitCode.USAGE and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line.startswith(f"prestop lint: {path}: ") and said in line


@pytest.mark.parametrize("name", [n for n in HOSTILE if n != "past the size cap"])
def test_pyyamls_own_parser_meets_the_same_bounds(monkeypatch, name):
    """Without libyaml (its parser stops flow nesting at 1,000 by itself), the bounds are ours."""
    monkeypatch.delattr(yaml, "CSafeLoader", raising=False)
    text, said = HOSTILE[name]
    with pytest.raises(UnreadableManifest, match=said):
        load_documents("hostile.yaml", text)


def test_the_bounds_leave_real_manifests_alone():
    deep = "a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"  # with the mapping: MAX_DEPTH levels
    nested: list = []
    for _ in range(MAX_DEPTH - 2):
        nested = [nested]
    assert load_documents("ok.yaml", deep) == [{"a": nested}]
    shared = "base: &b {image: x}\none: *b\ntwo: *b\n"
    assert load_documents("ok.yaml", shared) == [{"base": {"image": "x"}, "one": {"image": "x"}, "two": {"image": "x"}}]


def test_each_documents_span_is_its_root_nodes_text():
    text = "# lead\n---\nkind: A  # c\nx: [1, 2]\n# between\n---\n--- {kind: B}\n...\n"
    spans = [(d.value, text[d.start:d.end]) for d in manifest_files.load_yaml("s.yaml", text)]
    assert spans == [({"kind": "A", "x": [1, 2]}, "kind: A  # c\nx: [1, 2]"), (None, ""), ({"kind": "B"}, "{kind: B}")]


class Unwalkable(list):
    """A parsed list whose items must not be visited one by one."""

    def __iter__(self):
        raise AssertionError("walked a list the node bound refuses by its length")


def test_a_list_past_the_node_bound_is_refused_by_its_length(monkeypatch):
    """A 4 MiB JSON list holds two million numbers: refused by its length, not after walking each
    (which took 2.0-2.7 s on this 2-core machine under load, past inject's 2 s bound)."""
    monkeypatch.setattr(json, "loads", lambda text: {"items": Unwalkable(range(MAX_NODES))})
    with pytest.raises(UnreadableManifest, match=f"more than {MAX_NODES} values"):
        load_documents("big.json", "{}")
