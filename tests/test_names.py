"""One name per concept, and a declared surface per module.

No class or public function name is defined in two product modules. Every module of the product
declares its surface (`__all__`), and nothing in the repository takes a name from a product module
that its surface leaves out.

A reader who meets `Verdict` or `read_token` should not have to ask which one. (The retirement
reference client is self-contained on purpose, so a controller team can copy it: its names are
its own, not the sidecar's twins.)
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

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


# --- the declared surface -----------------------------------------------------------------------

PRODUCT_PACKAGES = ("hook", "sidecar", "lint", "retirement", "inject")
# What the repository's imports are read from: every Python file but the build outputs and caches.
SKIPPED_DIRECTORIES = {".venv", ".git", "build/out", "dist", ".mypy_cache", ".pytest_cache", ".hypothesis", "bench/out"}


def product_module_paths() -> dict[str, Path]:
    """Every module of the product's packages, by dotted name (a package by its own name)."""
    modules = {}
    for package in PRODUCT_PACKAGES:
        for path in sorted((REPO / "modeldrain" / package).glob("*.py")):
            parts = path.relative_to(REPO).with_suffix("").parts
            modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return modules


def repository_sources() -> list[Path]:
    def skipped(path: Path) -> bool:
        relative = path.relative_to(REPO).as_posix()
        return any(relative == d or relative.startswith(d + "/") for d in SKIPPED_DIRECTORIES)

    return [path for path in sorted(REPO.rglob("*.py")) if not skipped(path)]


def _module_of(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _source_of(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _own_nodes(scope: ast.AST):
    """The nodes of one scope: not those inside a function, lambda or class it defines."""
    for child in ast.iter_child_nodes(scope):
        yield child
        if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            yield from _own_nodes(child)


def names_taken(path: Path, modules: set[str], text: str | None = None) -> dict[str, set[str]]:
    """Product module -> the names `path` takes from it: `from M import name`, and `alias.name` where
    `alias` is bound to M (in that scope or one around it) by `import M as alias` or `from package
    import M`. A submodule taken from its package is a module, not a name of the package's."""
    tree = ast.parse(path.read_text() if text is None else text, str(path))
    own = _module_of(path)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    taken: dict[str, set[str]] = {}

    def visit(scope: ast.AST, outer: dict[str, str]) -> None:
        aliases = dict(outer)
        nodes = list(_own_nodes(scope))
        for node in nodes:  # a name bound otherwise in this scope is no module's alias here
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                aliases.pop(node.id, None)
            elif isinstance(node, ast.arg):
                aliases.pop(node.arg, None)
        for node in nodes:
            if isinstance(node, ast.ImportFrom):
                source = _source_of(node, package)
                for alias in node.names:
                    if f"{source}.{alias.name}" in modules:
                        aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
                    elif source in modules:
                        taken.setdefault(source, set()).add(alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name in modules and alias.asname:
                        aliases[alias.asname] = alias.name
        for node in nodes:
            if isinstance(node, ast.Attribute):
                if isinstance(node.value, ast.Name) and node.value.id in aliases:
                    taken.setdefault(aliases[node.value.id], set()).add(node.attr)
                elif ast.unparse(node.value) in modules:  # modeldrain.hook.x.name, after `import modeldrain.hook.x`
                    taken.setdefault(ast.unparse(node.value), set()).add(node.attr)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                visit(node, aliases)

    visit(tree, {})
    return taken


def declared_surface(path: Path) -> list[str] | None:
    """The module's `__all__`, read as written (a list or tuple of string literals), or None."""
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            assert isinstance(node.value, (ast.List, ast.Tuple)), f"{path}: __all__ is a literal list"
            return [str(element.value) for element in node.value.elts if isinstance(element, ast.Constant)]
    return None


def surface_uses() -> dict[str, dict[str, set[str]]]:
    """Product module -> name -> the files (outside the module) that take the name from it."""
    modules = set(product_module_paths())
    uses: dict[str, dict[str, set[str]]] = {}
    for path in repository_sources():
        for module, names in names_taken(path, modules).items():
            if module == _module_of(path):
                continue
            for name in names:
                uses.setdefault(module, {}).setdefault(name, set()).add(path.relative_to(REPO).as_posix())
    return uses


# What every module has without declaring it: no part of a surface.
IMPLICIT_MODULE_NAMES = {"__file__", "__name__", "__path__", "__spec__", "__doc__", "__loader__", "__package__",
                         "__cached__", "__builtins__", "__dict__"}


@pytest.mark.parametrize("module", sorted(product_module_paths()))
def test_every_product_module_declares_its_surface(module):
    assert declared_surface(product_module_paths()[module]) is not None, \
        f"{module} declares no __all__: list the names other modules, tests, bench, emulation or engines take from it"


def test_no_import_takes_a_name_the_surface_leaves_out():
    paths = product_module_paths()
    outside = {f"{module}.{name} (in {', '.join(sorted(files))})"
               for module, names in surface_uses().items()
               for name, files in names.items()
               if name not in IMPLICIT_MODULE_NAMES and name not in (declared_surface(paths[module]) or [])}
    assert not outside, f"taken from a module whose __all__ does not list it: {sorted(outside)}"


# Importing a __main__ runs its program: those are read by their source instead.
@pytest.mark.parametrize("module", sorted(m for m in product_module_paths() if not m.endswith("__main__")))
def test_the_surface_lists_only_what_the_module_has(module):
    import importlib

    loaded = importlib.import_module(module)
    assert not [name for name in loaded.__all__ if not hasattr(loaded, name)]


@pytest.mark.parametrize("module", sorted(m for m in product_module_paths() if m.endswith("__main__")))
def test_a_main_modules_surface_lists_only_what_its_source_binds(module):
    tree = ast.parse(product_module_paths()[module].read_text())
    bound = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    bound |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store)}
    bound |= {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    assert not [name for name in declared_surface(product_module_paths()[module]) or [] if name not in bound]


def test_the_surface_check_sees_every_way_of_taking_a_name():
    """Scoped aliases included: a name bound to something else in a function is not the module."""
    source = REPO / "tests" / "_surface_sample.py"
    text = (
        "from modeldrain.hook.gauges import EngineKind\n"
        "import modeldrain.hook.reader as reader\n"
        "from modeldrain.hook import exposition\n"
        "def f():\n"
        "    reader.read_work\n"
        "    exposition.parse\n"
        "def g(exposition):\n"
        "    exposition.not_the_module\n"
    )
    taken = names_taken(source, set(product_module_paths()), text)
    assert taken == {"modeldrain.hook.gauges": {"EngineKind"}, "modeldrain.hook.reader": {"read_work"},
                     "modeldrain.hook.exposition": {"parse"}}
