"""Malformed manifests: any field of a real one replaced by a value of the wrong type is refused,
written, or left alone, in one line each, never a traceback (`modeldrain inject` and `lint`)."""

from __future__ import annotations

import contextlib
import copy
import io
import random
from typing import Any, Iterator

import yaml

from modeldrain.inject.cli import run_inject
from modeldrain.lint.cli import run_lint
from tests.conftest import REPO

SOURCES = [p for p in (REPO / "tests" / "deploy" / "kustomize").glob("*/*.yaml") if p.name != "kustomization.yaml"] \
    + sorted((REPO / "deploy").glob("*.yaml"))
WRONG = [None, "x", 5, True, [], {}, [1], {"a": None}, -1, 1.5]
CASES = 300


def paths(value: Any, prefix: tuple = ()) -> Iterator[tuple]:
    yield prefix
    children = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in children:
        yield from paths(child, prefix + (key,))


def broken(rng: random.Random, bases: list[dict[str, Any]]) -> dict[str, Any]:
    body = copy.deepcopy(rng.choice(bases))
    where = list(paths(body))[1:]
    for _ in range(rng.randint(1, 3)):
        path = rng.choice(where)
        owner = body
        try:
            for key in path[:-1]:
                owner = owner[key]
            owner[path[-1]] = rng.choice(WRONG)
        except (KeyError, IndexError, TypeError):
            continue  # a path an earlier change removed
    return body


def test_no_malformed_manifest_makes_a_traceback(tmp_path):
    rng = random.Random(7)
    bases = [d for p in SOURCES for d in yaml.safe_load_all(p.read_text()) if d]
    path = tmp_path / "broken.yaml"
    for _ in range(CASES):
        text = yaml.safe_dump(broken(rng, bases))
        path.write_text(text)
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
            injected = run_inject(["--image", "localhost/r/prestop", "--grace", "30", "--sidecar", "--sidecar-image",
                                   "localhost/r/drain-sidecar", str(path)])
            linted = run_lint([str(path)])
        assert injected in (0, 1, 2) and linted in (0, 1, 2), text
        assert "Traceback" not in err.getvalue()
