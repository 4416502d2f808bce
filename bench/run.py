"""`make bench`: every benchmark, then bench/RESULTS.md (and the raw numbers in bench/results.json).

    python -m bench.run [--quick] [--repeats N] [--jobs N] [--out MD] [--json JSON]
                        [--parts prestop,sidecar-start,reading,scrape,sidecar,reliability,drain,configurations,fleet]

The cost parts run first, one thing at a time, while the machine is otherwise quiet; then the drain
matrix, its cells concurrently; then the other drain configurations (bench/drains/configurations.py),
theirs concurrently too; then the fleet simulation, drawn from the drain parts' figures
(bench/fleet/), and its real roll. `--parts` reruns only those parts and keeps the others' last
results from the JSON file, so a part disturbed by other work on the machine can be rerun alone.
A --quick run writes bench/out/quick/ (untracked), never the tracked bench/RESULTS.md.
Wiring only: the measuring is in the modules named after what they measure.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import report
from bench.costs import prestop as cost_prestop
from bench.costs import reading as cost_reading
from bench.costs import scrape as cost_scrape
from bench.costs import sidecar as cost_sidecar
from bench.costs.process import version_line
from bench.drains import configurations as drain_configurations
from bench.drains import quality as drain_quality
from bench.fleet import part as fleet_part
from bench.fleet import report as fleet_report
from bench.fleet.measured import (
    Measured,
    MissingMeasurement,
)
from bench.fleet.measured import from_results as fleet_measured
from bench.machine import CpuMeter, describe
from bench.paths import PRESTOP_BUNDLE, PRESTOP_CONSOLE_SCRIPT, SIDECAR_BUNDLE, SIDECAR_CONSOLE_SCRIPT
from bench.reliability import part as reliability

HERE = Path(__file__).resolve().parent
PARTS = ("prestop", "sidecar-start", "reading", "scrape", "sidecar", "reliability", "drain", "configurations", "fleet")

# Full run / --quick: enough runs for a median and a range, or just enough to see it work.
PRESTOP_RUNS = (20, 5)
SIDECAR_START_RUNS = (20, 5)
READING_ROUNDS = (15, 5)
SCRAPE_ROUNDS = (15, 5)
SIDECAR_SECONDS = (5.0, 1.0)
DRAIN_REPEATS_DEFAULT = 3
QUICK_GRACES_S = (30.0,)
# Where a --quick run writes its report: untracked (.gitignore), never the record README.md cites.
QUICK_OUT = HERE / "out" / "quick"


def _log(message: str) -> None:
    print(f"[bench {datetime.datetime.now():%H:%M:%S}] {message}", file=sys.stderr, flush=True)


def _snapshot_bundle(workdir: Path) -> Path | None:
    """A private copy of dist/prestop, so a `make bundle` running meanwhile cannot swap it mid-run."""
    if not PRESTOP_BUNDLE.is_file():
        return None
    copy = workdir / "prestop"
    shutil.copy2(PRESTOP_BUNDLE, copy)
    return copy


def run_prestop(bundle: Path | None, quick: bool) -> dict:
    executables = {}
    if bundle is not None:
        executables["bundle"] = bundle
    executables["console script"] = PRESTOP_CONSOLE_SCRIPT
    result = cost_prestop.measure(executables, PRESTOP_RUNS[quick])
    if bundle is not None:
        result["executables"]["bundle"]["path"] = "dist/prestop"
    result["executables"]["console script"]["path"] = ".venv/bin/prestop"
    return result


def run_sidecar_start(workdir: Path, quick: bool) -> dict:
    executables = {}
    if SIDECAR_BUNDLE.is_file():  # a private copy: a `make bundle` meanwhile cannot swap it mid-run
        executables["bundle"] = workdir / "drain-sidecar"
        shutil.copy2(SIDECAR_BUNDLE, executables["bundle"])
    executables["console script"] = SIDECAR_CONSOLE_SCRIPT
    result = cost_sidecar.measure(executables, SIDECAR_START_RUNS[quick])
    if "bundle" in executables:
        result["executables"]["bundle"]["path"] = "dist/drain-sidecar"
    result["executables"]["console script"]["path"] = ".venv/bin/drain-sidecar"
    return result


def run_reading(quick: bool) -> dict:
    return cost_reading.measure_all(READING_ROUNDS[quick])


def run_scrape(quick: bool) -> dict:
    return cost_scrape.measure_all(SCRAPE_ROUNDS[quick])


def run_configurations(prestop: Path, shown_as: str, repeats: int | None, quick: bool, jobs: int) -> dict:
    result = drain_configurations.run(prestop, repeats, quick, jobs, progress=_log)
    result["settings"].update(prestop=shown_as, prestop_version=version_line(prestop, "version"))
    return result


def run_sidecar(quick: bool) -> dict:
    seconds = SIDECAR_SECONDS[quick]
    with tempfile.TemporaryDirectory(prefix="bench-sidecar-") as tmp:
        out = Path(tmp) / "sidecar.json"
        argv = [sys.executable, str(HERE / "costs" / "sidecar_load.py"), "--seconds", f"{seconds:g}", "--json", str(out)]
        done = subprocess.run(argv, cwd=HERE.parent, capture_output=True, text=True, timeout=300)
        command = f"bench/costs/sidecar_load.py --seconds {seconds:g}"
        if not out.exists():
            return {"command": command, "seconds": seconds,
                    "error": f"exit {done.returncode}: {(done.stderr or done.stdout)[-500:]}"}
        return {"command": command, "seconds": seconds, "exit_code": done.returncode,
                "report": json.loads(out.read_text())}


def run_reliability(bundle: Path | None, quick: bool) -> dict:
    """Issue 12's figures: hostile inputs, fuzzing, the sidecar under attack (bench/reliability/part.py)."""
    executables = {"bundle": bundle} if bundle is not None else {}
    executables["console"] = PRESTOP_CONSOLE_SCRIPT
    return reliability.measure(executables, quick, progress=_log)


def run_drain(prestop: Path, shown_as: str, graces_s: tuple[float, ...], repeats: int, jobs: int) -> dict:
    cells = drain_quality.cells(graces_s, repeats)
    _log(f"drain quality: {len(cells)} deletions, {jobs} at a time, prestop = {prestop}")
    results = drain_quality.run_matrix(cells, jobs, prestop, progress=_log)
    return {
        "settings": {
            "graces_s": list(graces_s), "repeats": repeats, "jobs": jobs,
            "route_lag_range_s": list(drain_quality.ROUTE_LAG_RANGE_S),
            "prestop": shown_as,
            "prestop_version": version_line(prestop, "version"),
        },
        "cells": [r.as_dict() for r in results],
    }


def matrix_pools(results: dict, quick: bool) -> Measured:
    """The drain matrix's pools the fleet sets beside its own. A --quick run's few deletions do not
    make every pool (vLLM's --shutdown-timeout teardown, say): it then takes them from the record,
    bench/results.json, and says so, where a full run stops on the missing measurement."""
    try:
        return fleet_measured(results)
    except MissingMeasurement as exc:
        if not quick or not report.DEFAULT_JSON.exists():
            raise
        _log(f"fleet: --quick: {exc}; the matrix's pools come from the record, {_shown(report.DEFAULT_JSON)}")
        return fleet_measured(json.loads(report.DEFAULT_JSON.read_text()))


def run_fleet(results: dict, prestop: Path, quick: bool, report_path: Path) -> dict:
    """The fleet simulation from its own deletions' pools (set beside the drain matrix's), its real roll,
    its plot beside the report that links it (a --quick run's never over the record's)."""
    result = fleet_part.measure(results, matrix_pools(results, quick), prestop, quick, progress=_log)
    plot = fleet_report.plot(result, report_path.parent / fleet_report.PLOT_LINK)
    _log(f"fleet: plot written to {plot}")
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The run's settings. A --quick run writes its report to QUICK_OUT unless --out/--json say
    otherwise: its few runs must never replace the tracked record that README.md quotes."""
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="one repeat, G = 30 only, fewer cost runs, a short reliability part: a check that "
                             "it all works (~5 min)")
    parser.add_argument("--repeats", type=int, default=None,
                        help=f"deletions per drain cell (default {DRAIN_REPEATS_DEFAULT}, and each configuration "
                        "family's own; 1 with --quick)")
    parser.add_argument("--jobs", type=int, default=None,
                        help=f"concurrent deletions (default {drain_quality.DEFAULT_JOBS} for the drain matrix, "
                        f"{drain_configurations.DEFAULT_JOBS} for the configurations)")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated subset of {','.join(PARTS)}")
    parser.add_argument("--out", type=Path, default=None,
                        help=f"the Markdown report (default {_shown(report.DEFAULT_MD)}; with --quick "
                        f"{_shown(QUICK_OUT / report.DEFAULT_MD.name)})")
    parser.add_argument("--json", type=Path, default=None,
                        help=f"the raw results (default {_shown(report.DEFAULT_JSON)}; with --quick "
                        f"{_shown(QUICK_OUT / report.DEFAULT_JSON.name)})")
    args = parser.parse_args(argv)
    where = QUICK_OUT if args.quick else None
    if args.out is None:
        args.out = where / report.DEFAULT_MD.name if where else report.DEFAULT_MD
    if args.json is None:
        args.json = where / report.DEFAULT_JSON.name if where else report.DEFAULT_JSON
    args.parts = [p.strip() for p in args.parts.split(",") if p.strip()]
    unknown = set(args.parts) - set(PARTS)
    if unknown:
        parser.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    args.repeats_resolved = args.repeats if args.repeats is not None else (1 if args.quick else DRAIN_REPEATS_DEFAULT)
    if args.repeats_resolved < 1 or (args.jobs is not None and args.jobs < 1):
        parser.error("--repeats and --jobs must be at least 1")
    return args


def _shown(path: Path) -> str:
    return str(path.relative_to(HERE.parent))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    parts, repeats = args.parts, args.repeats_resolved
    if args.quick:
        _log(f"--quick: writing {args.out} and {args.json}, not the record (bench/RESULTS.md)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    drain_jobs = args.jobs or drain_quality.DEFAULT_JOBS
    configuration_jobs = args.jobs or drain_configurations.DEFAULT_JOBS
    graces_s = QUICK_GRACES_S if args.quick else drain_quality.GRACES_S

    results: dict = {}
    partial = set(parts) != set(PARTS) and args.json.exists()
    if partial:
        results = json.loads(args.json.read_text())  # keep the parts not rerun now, and the first run's meta
    if "fleet" in parts and not {"drain", "configurations"} <= set(parts):
        try:  # the fleet draws from those parts' figures: say so now, not after the other parts ran
            matrix_pools(results, args.quick)
        except MissingMeasurement as exc:
            print(f"python -m bench.run: error: --parts fleet: {exc}", file=sys.stderr)
            return 2
    started = time.monotonic()
    command = " ".join(["python -m bench.run", shlex.join(sys.argv[1:] if argv is None else argv)]).strip()
    this_run = describe(command)
    with tempfile.TemporaryDirectory(prefix="bench-") as tmp:
        bundle = _snapshot_bundle(Path(tmp))
        prestop = bundle or PRESTOP_CONSOLE_SCRIPT
        shown_as = "dist/prestop" if bundle else ".venv/bin/prestop"
        runners = {
            "prestop": lambda: run_prestop(bundle, args.quick),
            "sidecar-start": lambda: run_sidecar_start(Path(tmp), args.quick),
            "reading": lambda: run_reading(args.quick),
            "scrape": lambda: run_scrape(args.quick),
            "sidecar": lambda: run_sidecar(args.quick),
            "reliability": lambda: run_reliability(bundle, args.quick),
            "drain": lambda: run_drain(prestop, shown_as, graces_s, repeats, drain_jobs),
            "configurations": lambda: run_configurations(prestop, shown_as, args.repeats, args.quick,
                                                         configuration_jobs),
            "fleet": lambda: run_fleet(results, prestop, args.quick, args.out),
        }
        not_run: list[str] = []
        for part in PARTS:
            if part not in parts:
                continue
            _log(f"{part}…")
            meter = CpuMeter()
            try:
                results[part] = runners[part]()
            except MissingMeasurement as exc:  # the fleet, when this run's deletions left a pool empty
                _log(f"{part}: not run: {exc}")
                not_run.append(part)
                continue
            results[part]["cpu"] = meter.read().as_dict()
            _log(f"{part}: done in {results[part]['cpu']['wall_s']:.0f} s")
    this_run["wall_s"] = round(time.monotonic() - started, 1)
    this_run["finished"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if partial and "meta" in results:
        results["meta"].setdefault("reruns", []).append(dict(this_run, parts=[p for p in parts if p not in not_run]))
    else:
        results["meta"] = this_run
    report.write(results, args.json, args.out)
    _log(f"wrote {args.out} and {args.json} in {this_run['wall_s'] / 60:.1f} min")
    cells = [c for part in ("drain", "configurations") for c in results.get(part, {}).get("cells", [])]
    failed = [c for c in cells if c.get("error")]
    if failed:
        _log(f"{len(failed)} of {len(cells)} deletions failed, listed in {args.out} and left out of its tables "
             f"(first: {failed[0]['error'][:120]}); on a busy machine rerun the part with --parts and fewer --jobs")
    return 1 if failed or not_run else 0


if __name__ == "__main__":
    sys.exit(main())
