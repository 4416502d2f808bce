"""The architecture as a test: the hook's layers point one way, the sidecar sits on the shared core,
and nothing in the product imports the test bed.

Every import counts, including the ones inside functions (the CLI imports lazily to start fast).
A new hook module fails here until it is given a layer.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

# The hook, bottom to top: a module imports only modules of lower layers.
HOOK_LAYERS: dict[str, int] = {
    # facts and leaf utilities: constants, the gauge sets, exit codes, where the engine is
    "modeldrain.hook": 0, "modeldrain.hook.constants": 0, "modeldrain.hook.exitcodes": 0, "modeldrain.hook.gauges": 0, "modeldrain.hook.target": 0,
    "modeldrain.hook.bundle": 0, "modeldrain.hook.files": 0, "modeldrain.hook.events": 0, "modeldrain.hook.engine_config": 0,
    # values parsed and read
    "modeldrain.hook.flags": 1, "modeldrain.hook.outcome": 1, "modeldrain.hook.clock": 1, "modeldrain.hook.annotations": 1,
    "modeldrain.hook.work_names": 1, "modeldrain.hook.framing": 1,
    "modeldrain.hook.token": 1, "modeldrain.hook.engine_argv": 1, "modeldrain.hook.sidecar_report": 1,
    "modeldrain.hook.foreign_body": 1, "modeldrain.hook.server_load": 1,
    # what each signal does to a drain (a stop, or ignored)
    "modeldrain.hook.signals": 1,
    # series into work: the gauges applied to what a body holds
    "modeldrain.hook.work": 1,
    # reading: argv, exposition, HTTP, the kernel's socket tables
    "modeldrain.hook.engine": 2, "modeldrain.hook.exposition": 2, "modeldrain.hook.fetch": 2,
    "modeldrain.hook.freshness": 2, "modeldrain.hook.kernel_sockets": 2,
    # an earlier run of the hook in the same container (a marker in $TMPDIR)
    "modeldrain.hook.rerun": 2,
    # a leader's drain-sidecar, read like the engine; where a release's gauges cannot prove idle (a KV
    # producer's zero among them); where the engine's processes listen
    "modeldrain.hook.leader": 3, "modeldrain.hook.release_trust": 3, "modeldrain.hook.listeners": 3,
    "modeldrain.hook.kv_producer": 3,
    "modeldrain.hook.held_connections": 3,
    # the configuration's frozen values; what a worker's own sidecar remembers
    "modeldrain.hook.settings": 4, "modeldrain.hook.leader_memory": 4,
    # the parser that builds the configuration from flags, annotations, argv, environment; the one
    # reader bound to its configuration; the pure decisions over reads
    "modeldrain.hook.config": 5, "modeldrain.hook.reader": 5, "modeldrain.hook.decision": 5,
    "modeldrain.hook.exit_policy": 5,
    # the drain loop
    "modeldrain.hook.drain": 6,
    # entry points
    "modeldrain.hook.install": 7, "modeldrain.hook.cli": 8, "modeldrain.hook.__main__": 9,
}

# What the bundled hook may import beyond the standard library.
HOOK_THIRD_PARTY = {"prometheus_client", "yaml"}
# Imported only where installed, inside `except ImportError` (the bundle excludes it): module -> names.
HOOK_OPTIONAL: dict[str, set[str]] = {}
# The tools around the programs: each its own package over the hook's facts, never the sidecar's server.
TOOLS = {"lint": {"yaml"}, "inject": {"yaml"}, "retirement": set()}
# A tool built on another's: the injector reads manifests with lint's bounded reader and writes what lint's rules pass.
TOOLS_INTO_TOOLS = {"inject": ("modeldrain.lint",)}
# The one import from the hook into a tool: `prestop lint` (inside `except ImportError`; the static
# executable leaves the tool out).
HOOK_INTO_TOOLS = {"modeldrain.hook.cli": {"modeldrain.lint.cli"}}
SIDECAR_THIRD_PARTY = {"aiohttp", "uvloop", "prometheus_client"}
TEST_BED = {"emulation", "tests", "bench", "build"}


def module_name(path: Path) -> str:
    """The dotted name: the folders are the import path."""
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1]) if parts[-1] == "__init__" else ".".join(parts)


def imports_of(path: Path) -> set[str]:
    """Every module `path` imports, anywhere in it, as absolute dotted names."""
    tree = ast.parse(path.read_text(), str(path))
    package = module_name(path).rpartition(".")[0] if path.name != "__init__.py" else module_name(path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            found.add(prefix)
            # `from modeldrain.hook import constants` imports the module modeldrain.hook.constants.
            found.update(f"{prefix}.{alias.name}" for alias in node.names)
    return found


def product_modules() -> dict[str, set[str]]:
    modules = {}
    for package in ("modeldrain", "modeldrain/hook", "modeldrain/sidecar", *(f"modeldrain/{t}" for t in TOOLS)):
        for path in sorted((REPO / package).glob("*.py")):
            modules[module_name(path)] = imports_of(path)
    return modules


MODULES = product_modules()
KNOWN = set(MODULES)


def internal(imports: set[str]) -> set[str]:
    return {name for name in imports if name in KNOWN}


def top(name: str) -> str:
    """The package a name belongs to: hook or sidecar for the product, else its top-level name."""
    parts = name.split(".")
    return parts[1] if parts[0] == "modeldrain" and len(parts) > 1 else parts[0]


def test_every_hook_module_has_a_layer():
    hook = {m for m in MODULES if top(m) == "hook"}
    assert hook == set(HOOK_LAYERS), "give new hook modules a layer in HOOK_LAYERS (and remove gone ones)"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if top(m) == "hook"))
def test_hook_imports_point_down(module):
    upward = {dep for dep in internal(MODULES[module]) if top(dep) == "hook"
              and HOOK_LAYERS[dep] >= HOOK_LAYERS[module] and dep != module
              and not (dep == "modeldrain.hook" and module != "modeldrain.hook")}
    assert not upward, f"{module} (layer {HOOK_LAYERS[module]}) imports {sorted(upward)} from its layer or above"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_third_party_and_test_bed_imports(module):
    package = top(module)
    if package == "hook":
        allowed = HOOK_THIRD_PARTY | HOOK_OPTIONAL.get(module, set())
        own: tuple[str, ...] = ("modeldrain.hook", *HOOK_INTO_TOOLS.get(module, ()))
    elif package in TOOLS:
        allowed, own = HOOK_THIRD_PARTY | TOOLS[package], ("modeldrain.hook", f"modeldrain.{package}",
                                                           *TOOLS_INTO_TOOLS.get(package, ()))
    elif package == "sidecar":
        allowed, own = SIDECAR_THIRD_PARTY, ("modeldrain.hook", "modeldrain.sidecar", "modeldrain.retirement")
    else:  # modeldrain itself: the tools' dispatch
        allowed, own = set(), ("modeldrain.tools", "modeldrain.hook.exitcodes", *(f"modeldrain.{t}" for t in TOOLS))
    for name in MODULES[module]:
        root = name.split(".")[0]
        assert root not in TEST_BED, f"{module} imports the test bed: {name}"
        assert name == "modeldrain" or name.startswith(own) or root in allowed or root in sys.stdlib_module_names \
            or root == "__future__", \
            f"{module} imports {name}, which the {top(module)} may not carry"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if top(m) == "sidecar"))
def test_sidecar_uses_the_shared_core_not_the_hooks_entry_points(module):
    entry_points = {m for m, layer in HOOK_LAYERS.items() if layer >= HOOK_LAYERS["modeldrain.hook.install"]}
    assert not internal(MODULES[module]) & entry_points


def first_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """An import circle in `graph` (module -> the modules it imports), as the path around it, or None."""
    state: dict[str, str] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for dep in sorted(graph[node]):
            if state.get(dep) == "open":
                return path[path.index(dep):] + [dep]
            if dep not in state and (cycle := visit(dep)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for module in sorted(graph):
        if module not in state and (cycle := visit(module)):
            return cycle
    return None


def test_no_import_cycles():
    graph = {m: internal(deps) - {m} for m, deps in MODULES.items()}
    # A package's __init__ is imported by every submodule import: not an edge worth following.
    packages = {"modeldrain.hook", "modeldrain.sidecar", *(f"modeldrain.{t}" for t in TOOLS)}
    cycle = first_cycle({m: {d for d in deps if d not in packages} for m, deps in graph.items()})
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_checker_sees_lazy_and_relative_imports():
    sample = REPO / "modeldrain" / "hook" / "cli.py"
    assert "modeldrain.hook.drain" in imports_of(sample)  # imported inside a function
    assert "modeldrain.hook.exitcodes" in imports_of(sample)


def test_the_static_hook_leaves_the_tools_out():
    """What the hook imports from a tool is lazy and optional; the bundle spec excludes every tool."""
    spec = (REPO / "build" / "prestop.spec").read_text()
    assert all(f'"modeldrain.{tool}",' in spec for tool in TOOLS)
