"""bench/README.md maps every bench module to the figures it writes: none is left out, none is gone,
and every section it names is a heading of the page it names."""

from __future__ import annotations

import re

from tests.conftest import REPO

BENCH = REPO / "bench"
MAP = (BENCH / "README.md").read_text()
ROWS = [line.split(" | ") for line in MAP.splitlines() if line.startswith("| ") and "`" in line]


def named_modules() -> set[str]:
    return set(re.findall(r"`([\w/]+\.py)`", MAP))


def test_every_bench_module_is_on_the_map():
    modules = {p.relative_to(BENCH).as_posix() for p in BENCH.rglob("*.py") if p.name != "__init__.py"}
    assert modules - named_modules() == set(), "say in bench/README.md what the new module's figures are"


def test_every_module_on_the_map_exists():
    assert {m for m in named_modules() if not (BENCH / m).is_file()} == set()


def test_every_command_on_the_map_names_a_module_that_exists():
    commands = re.findall(r"python -m (bench(?:\.\w+)+)", MAP)
    assert commands
    assert [c for c in commands if not (REPO / (c.replace(".", "/") + ".py")).is_file()] == []


def headings(page: str) -> list[str]:
    return [line.lstrip("#").strip() for line in (REPO / page).read_text().splitlines() if line.startswith("#")]


def test_every_section_on_the_map_is_a_heading_of_its_page():
    pages = {"RESULTS.md": "bench/RESULTS.md", "docs/engines.md": "docs/engines.md"}
    checked = 0
    for row in ROWS:
        written = next((cell for cell in row if cell.startswith(tuple(pages))), None)
        if written is None:
            continue
        for part in written.split("; "):  # "RESULTS.md, "A"; docs/engines.md, "B" and "C""
            page = next((p for p in pages if part.startswith(p)), None)
            assert page is not None, f"{part!r} names no page the map may name"
            titles = headings(pages[page])
            for section in re.findall(r'"([^"]+)"', part):
                assert any(t.startswith(section) for t in titles), f"no heading {section!r} in {page}"
                checked += 1
    assert checked >= 16
