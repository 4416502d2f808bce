"""Words a reader can look up: "the operator" and "the spec" always say which.

modeldrain implements the ModelDeployment operator's shutdown documentation, which is not in this
repository: docs/requirements.md restates it. So a page that speaks of the operator names it and
links that restatement, "the spec" is said only where the page defines it, and no message the
programs print speaks of an operator without naming it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
RESTATEMENT = "requirements.md"
PAGES = [REPO / "README.md", *sorted(p for p in (REPO / "docs").glob("*.md") if p.name != RESTATEMENT)]
OPERATOR = re.compile(r"\bthe operator\b|\boperator's\b", re.I)
THE_SPEC = re.compile(r"\bthe spec\b(?!\")", re.I)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_a_page_that_speaks_of_the_operator_names_it_and_links_the_restatement(page):
    text = page.read_text()
    if not OPERATOR.search(text):
        return
    assert "ModelDeployment operator" in text, f"{page.name} speaks of the operator without saying which"
    assert f"]({RESTATEMENT})" in text or f"](docs/{RESTATEMENT})" in text, \
        f"{page.name} speaks of the operator but does not link {RESTATEMENT}"
    first = OPERATOR.search(text)
    assert first is not None
    named_at = text.find("ModelDeployment operator")
    assert named_at <= first.start() + len("ModelDeployment "), \
        f"{page.name}: the first mention of the operator ({text[first.start():first.start() + 60]!r}) does not name it"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_the_spec_is_said_only_where_the_page_defines_it(page):
    text = page.read_text().replace("Pod spec", "")
    if THE_SPEC.search(text):
        assert '"the spec"' in text, f"{page.name} says 'the spec' without saying which document it is"


def _messages(path: Path):
    """Every string literal of a module but its docstrings: what the program may print."""
    tree = ast.parse(path.read_text())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            yield node.value


@pytest.mark.parametrize("module", sorted((REPO / "modeldrain").rglob("*.py")),
                         ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_message_speaks_of_an_operator_without_naming_it(module):
    for text in _messages(module):
        if OPERATOR.search(text):
            assert "ModelDeployment" in text, f"{module.name}: {text!r}"


def test_the_readme_quotes_no_test_count_that_no_test_holds():
    """A count of tests goes stale with the next test added: the README names the command instead."""
    counts = re.findall(r"\b\d[\d,]* (?:passed|failed|skipped|tests? collected|tests)\b", (REPO / "README.md").read_text())
    assert counts == [], f"README.md quotes test counts {counts}: say `pytest --collect-only -q` instead"


@pytest.mark.parametrize("page", [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))], ids=lambda p: p.name)
def test_no_page_installs_modeldrain_from_an_index_it_is_not_on(page):
    """Nothing is published (README "Install"): an install is from a checkout or the wheel built there."""
    text = page.read_text()
    assert not re.search(r"pip install[^`\n]*\bmodeldrain(?:==|\[|\b(?![-./]))", text), \
        f"{page.name} installs modeldrain from a package index"
