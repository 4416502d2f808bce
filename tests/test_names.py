"""One name per concept: no class or public function name is defined in two product modules.

A reader who meets `Verdict` or `read_token` should not have to ask which one. (The retirement
reference client is self-contained on purpose, so a controller team can copy it: its names are
its own, not the sidecar's twins.)
"""

from __future__ import annotations

import ast

from tests.conftest import REPO


def public_definitions() -> dict[str, list[str]]:
    defined: dict[str, list[str]] = {}
    for path in sorted((REPO / "modeldrain").rglob("*.py")):
        for node in ast.parse(path.read_text(), str(path)).body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and not node.name.startswith("_"):
                defined.setdefault(node.name, []).append(str(path.relative_to(REPO)))
    return defined


def console_script_targets() -> set[tuple[str, str]]:
    """(file, function) of each program pyproject installs: `main` by convention, one per program."""
    import tomllib

    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    targets = set()
    for target in scripts.values():
        module, _, function = target.partition(":")
        targets.add((module.replace(".", "/") + ".py", function))
    return targets


def test_no_public_name_is_defined_twice():
    entry_points = console_script_targets()
    twice = {name: paths for name, paths in public_definitions().items() if len(paths) > 1
             and not all((path, name) in entry_points for path in paths)}
    assert not twice, f"one name, several definitions: {twice}"


def test_only_the_programs_entry_points_share_a_name():
    assert console_script_targets() == {("modeldrain/hook/cli.py", "main"), ("modeldrain/sidecar/main.py", "main"),
                                        ("modeldrain/tools.py", "main")}
