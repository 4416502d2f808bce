"""No import circle within bench/: every import counts, the ones inside functions too."""

from __future__ import annotations

from tests.conftest import REPO
from tests.test_layering import first_cycle, imports_of, module_name

BENCH = REPO / "bench"


def bench_imports() -> dict[str, set[str]]:
    """Each bench module -> the bench modules it imports (a package's empty __init__ is no edge)."""
    paths = sorted(BENCH.rglob("*.py"))
    modules = {module_name(p): imports_of(p) for p in paths}
    packages = {module_name(p) for p in paths if p.name == "__init__.py"}
    return {m: {d for d in deps if d in modules and d not in packages and d != m} for m, deps in modules.items()}


def test_no_import_cycle_within_the_bench():
    cycle = first_cycle(bench_imports())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_circle_issue_28_found_would_be_found_again():
    """bench/engines/matrix.py imports bench/report.py; the report importing the matrix back was the circle."""
    graph = bench_imports()
    assert "bench.report" in graph["bench.engines.matrix"]
    graph["bench.report"].add("bench.engines.matrix")
    cycle = first_cycle(graph)
    assert cycle is not None and {"bench.report", "bench.engines.matrix"} <= set(cycle)
