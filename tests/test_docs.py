"""The docs held to the code: what a page names must exist, so a rename cannot leave it behind.

docs/requirements.md cites the test that proves each requirement and the module that implements
it; every such citation is checked here against the tree.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.conftest import REPO

REQUIREMENTS = REPO / "docs" / "requirements.md"
TEST_CITATION = re.compile(r"`(tests/[\w/]+\.py)::(test_\w+)`")
MODULE_CITATION = re.compile(r"`((?:hook|sidecar)/\w+\.py)`")


def functions_named_test(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    return {node.name for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test_")}


def test_requirements_cite_tests_that_exist():
    citations = TEST_CITATION.findall(REQUIREMENTS.read_text())
    assert len(citations) >= 20, "the page cites a test for each requirement"
    missing = [f"{path}::{name}" for path, name in citations
               if not (REPO / path).is_file() or name not in functions_named_test(REPO / path)]
    assert not missing, f"docs/requirements.md cites tests that do not exist: {missing}"


def test_requirements_cite_modules_that_exist():
    cited = set(MODULE_CITATION.findall(REQUIREMENTS.read_text()))
    assert cited, "the page names the modules that implement each requirement"
    assert not {m for m in cited if not (REPO / m).is_file()}


@pytest.mark.parametrize("checker", [TEST_CITATION, MODULE_CITATION])
def test_the_checks_see_a_citation(checker):
    sample = "`tests/hook/test_x.py::test_y`" if checker is TEST_CITATION else "`hook/x.py`"
    assert checker.findall(sample)
