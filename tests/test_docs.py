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
MODULE_CITATION = re.compile(r"`(modeldrain/(?:hook|sidecar)/\w+\.py)`")


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
    sample = "`tests/hook/test_x.py::test_y`" if checker is TEST_CITATION else "`modeldrain/hook/x.py`"
    assert checker.findall(sample)


# --- the log events ---------------------------------------------------------------------------

EVENTS_PAGE = REPO / "docs" / "events.md"
LOG_METHODS = {"emit", "warning", "error"}


def _names_of(node: ast.expr) -> set[str]:
    """The event names an argument can take: a literal, or either side of a conditional."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, ast.IfExp):
        return _names_of(node.body) | _names_of(node.orelse)
    return set()


def _is_a_log(receiver: ast.expr) -> bool:
    """`log.emit(…)`, `self._log.warning(…)`, `service.log.error(…)`: the receiver is the logger."""
    name = receiver.attr if isinstance(receiver, ast.Attribute) else getattr(receiver, "id", "")
    return name.lstrip("_") == "log"


def events_in_code() -> dict[str, set[str]]:
    """Every event the product writes, with the modules that write it (read from the source)."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / "modeldrain").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names: set[str] = set()
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in LOG_METHODS and _is_a_log(node.func.value) and node.args):
                names = _names_of(node.args[0])
            elif isinstance(node, ast.Dict):  # a line printed as a dict: {"event": "installed", …}
                names = {v.value for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)
                         and k.value == "event" and isinstance(v, ast.Constant) and isinstance(v.value, str)}
            for name in names:
                found.setdefault(name, set()).add(str(path.relative_to(REPO)))
    return found


def first_column(page: Path, heading: str) -> list[str]:
    """The back-quoted first cells of the table whose header row starts with `| heading |`."""
    cells, inside = [], False
    for line in page.read_text().splitlines():
        if line.startswith(f"| {heading} |"):
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            cell = line.split("|")[1].strip()
            cells.append(cell.strip("`"))
        elif inside and not line.startswith("|"):
            break
    return cells


def test_every_event_the_programs_write_is_documented_and_nothing_else():
    in_code = events_in_code()
    documented = first_column(EVENTS_PAGE, "event")
    assert len(documented) == len(set(documented)), "an event is listed twice"
    assert not set(in_code) - set(documented), \
        f"events written but not in docs/events.md: { {e: in_code[e] for e in set(in_code) - set(documented)} }"
    assert not set(documented) - set(in_code), f"docs/events.md lists events no code writes: {set(documented) - set(in_code)}"


def test_the_event_reader_sees_literals_conditionals_and_printed_dicts():
    in_code = events_in_code()
    assert {"read_state", "progress", "installed", "handler_failed"} <= set(in_code)
    assert "each member's URL once" not in in_code  # an argparse error is not a log line


# --- the sidecar's metrics --------------------------------------------------------------------


def test_the_metrics_table_is_what_the_sidecar_exports():
    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from modeldrain.hook.events import EventLog
    from modeldrain.sidecar.drain_ledger import DrainLedger
    from modeldrain.sidecar.metrics import SidecarMetrics

    metrics = SidecarMetrics()
    metrics.watch_log(EventLog("drain-sidecar"))
    DrainLedger(metrics, EventLog("drain-sidecar"))  # the drain series, as the sidecar's wiring builds them
    families = list(text_string_to_metric_families(generate_latest(metrics.registry).decode()))
    # The *_created series the sidecar turns off at start (modeldrain/sidecar/cli.py), seen here because this
    # test leaves prometheus-client's global setting alone.
    created = {f"{f.name}_created" for f in families if f.type in ("counter", "histogram")}
    exported = {f.name + "_total" if f.type == "counter" else f.name for f in families
                if not f.name.startswith("process_") and f.name not in created}
    documented = first_column(REPO / "docs" / "sidecar-api.md", "metric")
    assert sorted(documented) == sorted(exported)
    # ... and each row's type and labels are the registry's (issue 30: the drain series and their labels).
    rows = {cells[0].strip("`"): (cells[1], cells[2]) for cells in table_rows(REPO / "docs" / "sidecar-api.md", "metric")}
    checked = set()
    for family in families:
        name = family.name + "_total" if family.type == "counter" else family.name
        if name not in rows or not family.samples:  # a labelled series nothing observed yet shows no labels
            continue
        checked.add(name)
        labels = sorted({label for sample in family.samples for label in sample.labels} - {"le"})
        documented_labels = sorted(cell.strip().strip("`") for cell in rows[name][1].split(",") if cell.strip())
        assert (rows[name][0], documented_labels) == (family.type, labels), name
    assert {"modeldrain_drains_total", "modeldrain_drain_held_after_last_busy_seconds"} <= checked


def table_rows(page: Path, heading: str) -> list[list[str]]:
    """The cells of each row of the table whose header row starts with `| heading |`."""
    rows, inside = [], False
    for line in page.read_text().splitlines():
        if line.startswith(f"| {heading} |"):
            inside = True
        elif inside and line.startswith("|") and not line.startswith("|---"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif inside and not line.startswith("|"):
            break
    return rows


# --- the exit codes ---------------------------------------------------------------------------


def test_the_exit_code_table_is_the_enum():
    from modeldrain.hook.exitcodes import ExitCode

    documented = [int(code) for code in first_column(REPO / "docs" / "prestop.md", "code")]
    assert sorted(documented) == sorted(int(code) for code in ExitCode)


# --- the sidecar's answer bound -----------------------------------------------------------------


def test_the_answer_bound_the_controller_doc_quotes_is_the_sidecars():
    from modeldrain.hook.constants import READ_TIMEOUT_S
    from modeldrain.sidecar.constants import work_answer_bound_s

    quoted = f"answers within {work_answer_bound_s(READ_TIMEOUT_S):g} s at its defaults (`work_answer_bound_s`"
    assert quoted in (REPO / "docs" / "controller.md").read_text()


# --- the module maps ----------------------------------------------------------------------------


@pytest.mark.parametrize("package", ["modeldrain/hook", "modeldrain/sidecar", "modeldrain/lint", "modeldrain/inject",
                                     "modeldrain/retirement",
                                     "emulation"])
def test_each_package_map_lists_exactly_its_modules(package):
    listed = set(re.findall(r"`(\w+\.py)`", (REPO / package / "README.md").read_text()))
    modules = {path.name for path in (REPO / package).glob("*.py") if path.name != "__init__.py"}
    assert not modules - listed, f"{package}/README.md lacks {sorted(modules - listed)}"
    assert not listed - modules, f"{package}/README.md lists modules that are gone: {sorted(listed - modules)}"
